#!/usr/bin/env bash
# One large file: the runner against curl -o, a cut and a resume, and --limit-rate.
#
# Serves one file of SIZE MiB of random bytes from nginx on loopback (its root on a tmpfs when
# there is one), then:
#   1. fetches it R times with the runner and R times with curl -o, interleaved: median wall time
#      and peak memory of each. The runner also hashes the file and makes it durable (one syncfs);
#      a third row adds sha256sum and sync to curl, for the same work.
#   2. starts the runner, kills it with SIGKILL once half the file is on disk, and runs it again:
#      the bytes nginx sent for both runs together (from its access log), what the record says
#      it resumed from, peak memory of each run, and whether the stored file is the served one.
#   3. fetches RATE_MB MiB (default 200) with --limit-rate 20M: the time it took, against the
#      RATE_MB / 20 seconds the limit allows.
#
# Usage: bash Tests/Benchmarks/large.sh [--size MIB] [--runs R] [--rate-size MIB] [--out-dir DIR]
#                                       [--no-build] [--runner PATH]
#   --size MIB       size of the file (default 1024, env BENCH_SIZE_MIB)
#   --runs R         runs per tool in part 1 (default 3, env BENCH_RUNS)
#   --rate-size MIB  size fetched in part 3 (default 200, env BENCH_RATE_MIB); 0 skips it
#   --out-dir DIR    where the tools write (default a tmpfs, /dev/shm, when there is one; give a
#                    disk folder to measure the disk too; env BENCH_OUT_DIR)
#   --no-build       use the existing .build/release/runner
#   --runner PATH    measure this binary instead of building one (env RUNNER_BIN)
#
# Needs nginx, curl and GNU time; installs them from Debian's packages when missing (as root).
# Listens on 127.0.0.1 only.
set -euo pipefail
cd "$(dirname "$0")/../.."

size_mib=${BENCH_SIZE_MIB:-1024}
runs=${BENCH_RUNS:-3}
rate_mib=${BENCH_RATE_MIB:-200}
out_base=${BENCH_OUT_DIR:-}
runner=${RUNNER_BIN:-}
build=1

usage() { sed -n '/^# Usage:/,/^# Needs/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
    case "$1" in
        --size) size_mib=$2; shift 2 ;;
        --runs) runs=$2; shift 2 ;;
        --rate-size) rate_mib=$2; shift 2 ;;
        --out-dir) out_base=$2; shift 2 ;;
        --no-build) build=0; shift ;;
        --runner) runner=$2; shift 2 ;;
        -h|--help) usage; exit 0 ;;
        *) echo "large.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
    esac
done
say() { echo "large.sh: $*" >&2; }
fail() { say "$*"; exit 1; }
# shellcheck source=Tests/Benchmarks/common.bash
source Tests/Benchmarks/common.bash  # the scripts run from the repository's root

missing=()
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || missing+=(nginx)
command -v curl >/dev/null 2>&1 || missing+=(curl)
[ -x /usr/bin/time ] || missing+=(time)
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
        say "installing ${missing[*]}"
        apt-get update -qq >/dev/null
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    else
        fail "missing ${missing[*]}; install them (Debian: apt-get install ${missing[*]}) or run as root"
    fi
fi
nginx_bin=$(command -v nginx || echo /usr/sbin/nginx)
[ -n "${EPOCHREALTIME:-}" ] || fail "needs bash 5 or later (EPOCHREALTIME)"

shm=${TMPDIR:-/tmp}
if [ "$(stat -f -c %T /dev/shm 2>/dev/null)" = tmpfs ] && [ -w /dev/shm ]; then shm=/dev/shm; fi
[ -n "$out_base" ] || out_base=$shm
[ -d "$out_base" ] && [ -w "$out_base" ] || fail "cannot write in '$out_base'"

work=$(mktemp -d "${TMPDIR:-/tmp}/runner-large.XXXXXX")
root=$(mktemp -d "$shm/runner-large-root.XXXXXX")
chmod 755 "$root"  # nginx's workers may run as another user
out=$(mktemp -d "$out_base/runner-large-out.XXXXXX")
nginx_pid=""
runner_pid=""
cleanup() {
    local code=$?
    trap - EXIT INT TERM
    stop_pids "$runner_pid" "$nginx_pid"
    rm -rf "$work" "$root" "$out"
    exit "$code"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

release_runner "$runner" "$build"

# --- The file and nginx ----------------------------------------------------------------------
say "making a file of $size_mib MiB"
head -c "$((size_mib << 20))" /dev/urandom >"$root/big.bin"
[ "$rate_mib" -gt 0 ] && head -c "$((rate_mib << 20))" "$root/big.bin" >"$root/rate.bin"
chmod 644 "$root"/*.bin
served_sha=$(sha256sum "$root/big.bin" | cut -d' ' -f1)

port=$(free_port)
mkdir -p "$work/nginx"
cat >"$work/nginx/nginx.conf" <<EOF
daemon off;
worker_processes 1;
pid $work/nginx/nginx.pid;
error_log $work/nginx/error.log warn;
events { worker_connections 256; }
http {
    log_format sent '\$request_uri \$status \$bytes_sent';
    access_log $work/nginx/access.log sent;
    client_body_temp_path $work/nginx; proxy_temp_path $work/nginx; fastcgi_temp_path $work/nginx;
    uwsgi_temp_path $work/nginx; scgi_temp_path $work/nginx;
    sendfile on;
    etag on;
    server {
        listen 127.0.0.1:$port;
        root $root;
        default_type application/octet-stream;
    }
}
EOF
"$nginx_bin" -c "$work/nginx/nginx.conf" -p "$work/nginx" >"$work/nginx/stdout" 2>&1 &
nginx_pid=$!
base=http://127.0.0.1:$port
for _ in $(seq 1 100); do curl -sf -o /dev/null -r 0-0 "$base/big.bin" && break; sleep 0.05; done
curl -sf -o /dev/null -r 0-0 "$base/big.bin" || { cat "$work/nginx/error.log" >&2; fail "nginx did not start"; }

# The built-in file kind stores the body as it came, in files/<name>.bin.
mkdir -p "$work/kinds"
job() { # NAME URL: one job line
    printf '{"kind": "file", "name": "%s", "url": "%s", "timeout": 600, "maxBytes": %d}\n' "$1" "$2" "$(((size_mib + 1) << 20))"
}
job big "$base/big.bin" >"$work/big.jsonl"

# Runs a command under GNU time; prints "WALL_SECONDS PEAK_KIB".
measure() {
    /usr/bin/time -f "%e %M" -o "$work/time" "$@" >"$work/cmd.log" 2>&1 || { cat "$work/cmd.log" >&2; return 1; }
    cat "$work/time"
}
median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# --- 1. The runner against curl -o ------------------------------------------------------------
say "part 1: $runs runs each, interleaved"
: >"$work/runner.times"; : >"$work/curl.times"; : >"$work/curlsum.times"
for _ in $(seq 1 "$runs"); do
    rm -rf "$out/r"; sync
    measure "$runner" run "$work/big.jsonl" --out "$out/r" --kinds "$work/kinds" >>"$work/runner.times"
    [ "$(sha256sum "$out/r/files/big.bin" | cut -d' ' -f1)" = "$served_sha" ] || fail "the runner stored another file"
    rm -rf "$out/r" "$out/c.bin"; sync
    measure curl -sf -o "$out/c.bin" "$base/big.bin" >>"$work/curl.times"
    rm -f "$out/c.bin"; sync
    measure bash -c 'curl -sf -o "$1" "$2" && sha256sum "$1" >/dev/null && sync -f "$1"' _ "$out/c.bin" "$base/big.bin" >>"$work/curlsum.times"
    rm -f "$out/c.bin"
done
runner_wall=$(cut -d' ' -f1 "$work/runner.times" | median)
curl_wall=$(cut -d' ' -f1 "$work/curl.times" | median)
curlsum_wall=$(cut -d' ' -f1 "$work/curlsum.times" | median)
runner_mem=$(cut -d' ' -f2 "$work/runner.times" | sort -n | tail -1)
curl_mem=$(cut -d' ' -f2 "$work/curl.times" | sort -n | tail -1)

# --- 2. Killed at half, then resumed ---------------------------------------------------------
say "part 2: SIGKILL at half the file, then a second run"
rm -rf "$out/k"
: >"$work/nginx/access.log"
kill -USR1 "$nginx_pid" 2>/dev/null || true  # reopen the log
sleep 0.2
/usr/bin/time -f "%M" -o "$work/first.mem" "$runner" run "$work/big.jsonl" --out "$out/k" --kinds "$work/kinds" \
    --limit-rate "$((size_mib / 4 + 1))M" >"$work/first.log" 2>&1 &
runner_pid=$!
half=$((size_mib << 19))
for _ in $(seq 1 1200); do
    have=$(find "$out/k/files" -name '.partial-*' ! -name '*.json' -printf '%s\n' 2>/dev/null | head -1) || true
    [ -n "$have" ] && [ "$have" -ge "$half" ] && break
    kill -0 "$runner_pid" 2>/dev/null || break
    sleep 0.05
done
# The runner is the child of GNU time: kill it, not time.
pkill -KILL -P "$runner_pid" 2>/dev/null || true
wait "$runner_pid" 2>/dev/null || true
runner_pid=""
cut_at=$(find "$out/k/files" -name '.partial-*' ! -name '*.json' -printf '%s\n' | head -1)
second=$(measure "$runner" run "$work/big.jsonl" --out "$out/k" --kinds "$work/kinds")
sleep 0.2
wire=$(awk '$1 == "/big.bin" { sum += $3 } END { print sum + 0 }' "$work/nginx/access.log")
record=$(cat "$out"/k/results/*.json)
resumed=$(printf '%s' "$record" | grep -o '"resumedFrom":[0-9]*' | cut -d: -f2)
stored_ok=no
[ "$(sha256sum "$out/k/files/big.bin" | cut -d' ' -f1)" = "$served_sha" ] && stored_ok=yes
first_mem=$(tail -1 "$work/first.mem" 2>/dev/null || echo 0)  # after "Command terminated by signal 9"

# --- 3. --limit-rate 20M -----------------------------------------------------------------------
if [ "$rate_mib" -gt 0 ]; then
    say "part 3: $rate_mib MiB at --limit-rate 20M"
    rm -rf "$out/l"
    job rate "$base/rate.bin" >"$work/rate.jsonl"
    rate_run=$(measure "$runner" run "$work/rate.jsonl" --out "$out/l" --kinds "$work/kinds" --limit-rate 20M)
fi

size_bytes=$((size_mib << 20))
echo
echo "| $size_mib MiB from nginx on loopback | median wall s | peak memory MiB |"
echo "| --- | ---: | ---: |"
printf '| runner (hash, durable payload and record) | %s | %d |\n' "$runner_wall" "$((runner_mem / 1024))"
printf '| curl -o | %s | %d |\n' "$curl_wall" "$((curl_mem / 1024))"
printf '| curl -o, sha256sum, sync | %s | - |\n' "$curlsum_wall"
awk -v r="$runner_wall" -v c="$curl_wall" -v s="$curlsum_wall" 'BEGIN { printf "\nrunner / curl -o: %.2fx; runner / (curl -o, sha256sum, sync): %.2fx\n", r / c, r / s }'
echo
echo "Killed at $cut_at bytes ($(awk -v a="$cut_at" -v b="$size_bytes" 'BEGIN { printf "%.0f%%", 100 * a / b }')), then run again:"
echo "  resumed from $resumed bytes; stored file is the served one: $stored_ok"
awk -v w="$wire" -v b="$size_bytes" 'BEGIN { printf "  bytes nginx sent for both runs: %d (%.3f of the file)\n", w, w / b }'
echo "  peak memory: $((${first_mem:-0} / 1024)) MiB (killed run), $(( $(echo "$second" | cut -d' ' -f2) / 1024 )) MiB (resumed run)"
if [ "$rate_mib" -gt 0 ]; then
    awk -v t="$(echo "$rate_run" | cut -d' ' -f1)" -v m="$rate_mib" 'BEGIN { printf "\n%d MiB at --limit-rate 20M: %.2f s (the limit allows %.2f s: %.2fx)\n", m, t, m / 20, t / (m / 20) }'
fi
echo
echo "machine: $(nproc) cores, $(uname -r), output on $(stat -f -c %T "$out")"
