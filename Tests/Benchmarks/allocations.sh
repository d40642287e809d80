#!/usr/bin/env bash
# Heap allocations a job costs: `runner run` on two sizes of the same work (small JSON entries
# from nginx on loopback, 32 at once, through compare.sh), every malloc, calloc, realloc and
# aligned allocation counted by alloc-count.c (loaded with LD_PRELOAD); the difference between the
# two runs over the difference in jobs is the cost of one job, without what starting and ending
# a run costs. libcurl's allocations are in it (about 40 a job over HTTP). Counts vary by a few a
# run with the timing of the transfers; each size is run R times and the median taken.
#
# Usage: bash Tests/Benchmarks/allocations.sh [--sizes "1000 5000"] [--runs R] [--https] [--runner PATH]
#   --sizes "A B"  the two numbers of jobs (default "1000 5000")
#   --runs R       runs per size; the median count is used (default 3)
#   --https        over TLS with HTTP/2 (see compare.sh)
#   --runner PATH  count this binary instead of building the runner in release (see compare.sh)
# Needs what compare.sh needs, and a C compiler.
set -euo pipefail
cd "$(dirname "$0")/../.."

sizes="1000 5000"
runs=3
extra=()
usage() { sed -n '/^# Usage:/,/^# Needs/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
    case "$1" in
        --sizes) sizes=$2; shift 2 ;;
        --runs) runs=$2; shift 2 ;;
        --https) extra+=(--https); shift ;;
        --runner) [ -x "$2" ] || { echo "allocations.sh: --runner $2: not an executable file" >&2; exit 2; }
                  extra+=(--runner "$2"); shift 2 ;;
        -h|--help) usage; exit 0 ;;
        *) echo "allocations.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
    esac
done
read -r small large rest <<<"$sizes"
for value in "$small" "${large:-}" "$runs"; do
    [[ "$value" =~ ^[1-9][0-9]*$ ]] || { echo "allocations.sh: '$value' is not a whole number above 0" >&2; exit 2; }
done
[ -z "${rest:-}" ] && [ "$large" -gt "$small" ] || { echo "allocations.sh: --sizes takes two numbers, the second larger" >&2; exit 2; }

work=$(mktemp -d "${TMPDIR:-/tmp}/runner-allocations.XXXXXX")
trap 'rm -rf "$work"' EXIT
cc=${CC:-cc}
command -v "$cc" >/dev/null 2>&1 || cc=clang
"$cc" -O2 -shared -fPIC -o "$work/alloc-count.so" Tests/Benchmarks/alloc-count.c \
    || { echo "allocations.sh: $cc could not build Tests/Benchmarks/alloc-count.c" >&2; exit 1; }

# The median count of R runs of `n` jobs.
count() {
    local n=$1 out=$work/counts.$1
    : >"$out"
    BENCH_RUNNER_PRELOAD=$work/alloc-count.so ALLOC_COUNT_OUT=$out \
        bash Tests/Benchmarks/compare.sh --entries "$n" --images 0 --runs "$runs" --tools runner "${extra[@]}" >"$work/table.$n"
    [ "$(wc -l <"$out")" -eq "$runs" ] || { echo "allocations.sh: expected $runs counts for $n jobs, got $(wc -l <"$out")" >&2; exit 1; }
    awk '{ print $2 }' "$out" | sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
echo "allocations.sh: $small jobs" >&2
a=$(count "$small")
echo "allocations.sh: $large jobs" >&2
b=$(count "$large")
echo "| jobs | allocations (median of $runs runs) |"
echo "| ---: | ---: |"
echo "| $small | $a |"
echo "| $large | $b |"
awk -v a="$a" -v b="$b" -v s="$small" -v l="$large" 'BEGIN { printf "\nAllocations a job: %.1f (the difference over %d jobs).\n", (b - a) / (l - s), l - s }'
grep '^Machine:' "$work/table.$large" || true
