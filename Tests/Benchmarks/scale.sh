#!/usr/bin/env bash
# How the cost grows with the size of one run: `runner run` on 5 000, 50 000 and 200 000 small
# JSON entries from nginx on loopback (32 at once), with curl --parallel on the same work beside
# it. For each size: wall time, jobs a second, CPU per job and peak resident memory, so that a
# cost or a memory that grows faster than the number of jobs shows at once.
#
# Each size is one compare.sh run (same server, same files, same checks of the output), R runs
# per tool, the median shown.
#
# Usage: bash Tests/Benchmarks/scale.sh [--sizes "5000 50000 200000"] [--runs R] [--https] [--no-build]
#                                       [--runner PATH]
#   --sizes LIST  numbers of jobs to try (default "5000 50000 200000", env BENCH_SIZES)
#   --runs R      runs per tool and size; the median is shown (default 1, env BENCH_RUNS)
#   --https       over TLS with HTTP/2 (see compare.sh)
#   --no-build    use the existing .build/release/runner instead of building it
#   --runner PATH measure this binary instead (see compare.sh); env RUNNER_BIN
set -euo pipefail
cd "$(dirname "$0")/../.."

sizes=${BENCH_SIZES:-5000 50000 200000}
runs=${BENCH_RUNS:-1}
extra=()
build=1
usage() { sed -n '/^# Usage:/,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
    case "$1" in
        --sizes) sizes=$2; shift 2 ;;
        --runs) runs=$2; shift 2 ;;
        --https) extra+=(--https); shift ;;
        --no-build) build=0; shift ;;
        --runner) [ -x "$2" ] || { echo "scale.sh: --runner $2: not an executable file" >&2; exit 2; }
                  extra+=(--runner "$2"); build=0; shift 2 ;;
        -h|--help) usage; exit 0 ;;
        *) echo "scale.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
    esac
done
for value in $sizes "$runs"; do
    [[ "$value" =~ ^[1-9][0-9]*$ ]] || { echo "scale.sh: '$value' is not a whole number above 0" >&2; exit 2; }
done

[ -z "${RUNNER_BIN:-}" ] || build=0   # compare.sh measures that binary
if [ "$build" -eq 1 ]; then
    echo "scale.sh: building the runner in release" >&2
    swift build -c release >/dev/null 2>&1 || { swift build -c release >&2; exit 1; }
fi

# One compare.sh table per size; its rows for runner and curl become one row here.
rows=()
header=""
for n in $sizes; do
    echo "scale.sh: $n jobs" >&2
    table=$(bash Tests/Benchmarks/compare.sh --entries "$n" --images 0 --runs "$runs" \
        --tools runner,curl --no-build "${extra[@]}")
    [ -n "$header" ] || header=$(grep '^Fetching' <<<"$table" | sed 's/^Fetching [0-9]* JSON entries + 0 images ([0-9]* files)/Fetching N JSON entries/')
    machine=$(grep '^Machine:' <<<"$table")
    # | tool | wall (s) | wall min–max (s) | jobs/s | CPU user+sys (s) | CPU per job (ms) | peak RSS (MB) | connections | wall vs curl |
    runner_row=$(grep '^| `runner run`' <<<"$table")
    curl_row=$(grep '^| `curl --parallel' <<<"$table")
    rows+=("$(awk -F'|' -v n="$n" -v c="$curl_row" 'BEGIN { split(c, k, "|") } {
        gsub(/ /, "", $3); gsub(/ /, "", $5); gsub(/ /, "", $6); gsub(/ /, "", $7); gsub(/ /, "", $8)
        gsub(/ /, "", k[3]); gsub(/ /, "", k[6]); gsub(/ /, "", k[8])
        printf "| %d | %s | %s | %.1f | %s | %s | %s | %.2f× | %.2f× |\n", n, $3, $5, 1000 * $7, $8, k[3], k[8], $3 / k[3], $6 / k[6]
    }' <<<"$runner_row")")
done

echo "$header"
echo
echo "| jobs | runner wall (s) | runner jobs/s | runner CPU per job (µs) | runner peak RSS (MB) | curl wall (s) | curl peak RSS (MB) | wall vs curl | CPU vs curl |"
echo "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
printf '%s\n' "${rows[@]}"
echo
echo "$machine"
