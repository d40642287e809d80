#!/usr/bin/env bash
# Side by side: runner against curl --parallel, aria2c and xargs+curl on the same work, and
# against the floor of its output contract: floor.c, beside this script, fetches with libcurl as
# curl does and writes what a runner job must write (payload and record each to a temporary file
# renamed into place, a run-log line, one syncfs) with nothing else, its files on a second thread.
# What the runner spends above the floor is its engine's own cost. floor.swift does the same in
# Swift, four ways: as floor.c (no task; `floor-swift`); with a Swift task per job that awaits
# its transfer and writes its files (`floor-tasks`); the same with read-ahead, where a job does
# not hold its transfer slot while it writes: the transfers' thread keeps handed-over transfers
# waiting and starts the next itself when one ends (`floor-readahead`); and that with every job
# task on one writer thread, their task executor (`floor-writer`): what the language and a task
# per job cost, before any engine.
#
# Serves N small JSON entries and M small images from nginx on loopback, then fetches all of
# them with each tool, P at once, every tool writing one file per URL into a fresh folder. The
# images' bytes come from the runner's fixture server: the runner is built when it is measured or
# M is above 0, and only then.
# Each tool runs R times (round-robin, so background noise spreads over all tools); the table
# shows the median of the runs. Prints a Markdown table and one line about the machine.
#
# Usage: bash Tests/Benchmarks/compare.sh [--entries N] [--images M] [--runs R] [--parallel P]
#                                         [--tools LIST] [--https] [--out-dir DIR] [--no-build]
#                                         [--runner PATH]
#   --entries N   JSON entries to fetch (default 2000, env BENCH_ENTRIES)
#   --images M    images to fetch (default 200, env BENCH_IMAGES)
#   --runs R      runs per tool; the median is shown (default 3, env BENCH_RUNS)
#   --parallel P  fetches at once, for every tool (default 32, env BENCH_PARALLEL)
#   --tools LIST  comma-separated subset of runner,floor,floor-swift,floor-tasks,floor-readahead,
#                 floor-writer,curl,aria2c,xargs (default all of them, the Swift floors left out
#                 when there is no swiftc; env BENCH_TOOLS)
#   --https       serve over TLS with HTTP/2 (nginx, a CA and certificate made by the script for
#                 127.0.0.1; every tool is given the CA); env BENCH_HTTPS=1
#   --out-dir DIR where the tools write (default: a tmpfs, /dev/shm, when there is one, so that
#                 the tools are measured rather than the disk; env BENCH_OUT_DIR)
#   --no-build    use the existing .build/release/runner instead of building it
#   --runner PATH measure this binary (for example the one .ci/install.sh installs, with the Swift
#                 runtime linked in, which starts faster) instead of building; env RUNNER_BIN
#   (env BENCH_RUNNER_PRELOAD=LIB: the runner runs with LD_PRELOAD=LIB; allocations.sh counts
#   allocations so)
#
# Needs nginx, aria2c, curl, GNU time, (for --https) openssl and (for the floors) a C compiler and
# libcurl's headers (floor.swift is built by the Swift toolchain's swiftc); installs the missing
# ones from Debian's packages (apt-get, as root). The compiler is $CC, else cc, else the Swift
# toolchain's clang. Listens on 127.0.0.1 only.
set -euo pipefail
cd "$(dirname "$0")/../.."

entries=${BENCH_ENTRIES:-2000}
images=${BENCH_IMAGES:-200}
runs=${BENCH_RUNS:-3}
parallel=${BENCH_PARALLEL:-32}
swift_floors=floor-swift,floor-tasks,floor-readahead,floor-writer
tools=${BENCH_TOOLS:-runner,floor,$swift_floors,curl,aria2c,xargs}
tools_given=${BENCH_TOOLS:+1}
out_base=${BENCH_OUT_DIR:-}
https=${BENCH_HTTPS:-0}
runner=${RUNNER_BIN:-}
build=1

usage() { sed -n '/^# Usage:/,/^# Needs/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
    case "$1" in
        --entries) entries=$2; shift 2 ;;
        --images) images=$2; shift 2 ;;
        --runs) runs=$2; shift 2 ;;
        --parallel) parallel=$2; shift 2 ;;
        --tools) tools=$2; tools_given=1; shift 2 ;;
        --https) https=1; shift ;;
        --out-dir) out_base=$2; shift 2 ;;
        --no-build) build=0; shift ;;
        --runner) runner=$2; shift 2 ;;
        -h|--help) usage; exit 0 ;;
        *) echo "compare.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
    esac
done
for value in "$entries" "$images" "$runs" "$parallel"; do
    [[ "$value" =~ ^[0-9]+$ ]] || { echo "compare.sh: '$value' is not a whole number" >&2; exit 2; }
done
[ "$runs" -ge 1 ] && [ "$parallel" -ge 1 ] && [ $((entries + images)) -ge 1 ] \
    || { echo "compare.sh: runs, parallel and entries+images must be at least 1" >&2; exit 2; }
IFS=, read -r -a tool_list <<<"$tools"
for tool in "${tool_list[@]}"; do
    case "$tool" in
        runner|floor|floor-swift|floor-tasks|floor-readahead|floor-writer|curl|aria2c|xargs) ;;
        *) echo "compare.sh: unknown tool '$tool'" >&2; exit 2 ;;
    esac
done
# The Swift floors are built by swiftc: without it, they are left out of the default list and
# refused when asked for.
swift_floor_asked() { [[ ",$tools," =~ ,floor-(swift|tasks|readahead|writer), ]]; }
if swift_floor_asked && ! command -v swiftc >/dev/null 2>&1; then
    [ -z "$tools_given" ] || { echo "compare.sh: the Swift floors ($swift_floors) need swiftc" >&2; exit 2; }
    echo "compare.sh: no swiftc: the Swift floors are left out" >&2
    kept=()
    for tool in "${tool_list[@]}"; do [[ ",$swift_floors," == *,$tool,* ]] || kept+=("$tool"); done
    tool_list=("${kept[@]}")
    tools=$(IFS=,; echo "${tool_list[*]}")
fi
total=$((entries + images))

say() { echo "compare.sh: $*" >&2; }
fail() { echo "compare.sh: FAILED: $*" >&2; exit 1; }
# shellcheck source=Tests/Benchmarks/common.bash
source Tests/Benchmarks/common.bash  # the scripts run from the repository's root

# --- What it needs ---------------------------------------------------------------------------
missing=()
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || missing+=(nginx)
command -v aria2c >/dev/null 2>&1 || missing+=(aria2)
command -v curl >/dev/null 2>&1 || missing+=(curl)
[ -x /usr/bin/time ] || missing+=(time)
[ "$https" != 1 ] || command -v openssl >/dev/null 2>&1 || missing+=(openssl)
# The C compiler for floor.c: $CC, else cc, else clang (the Swift toolchain has one).
find_cc() {
    local candidate
    for candidate in "${CC:-}" cc clang; do
        [ -n "$candidate" ] && command -v "$candidate" >/dev/null 2>&1 && { echo "$candidate"; return 0; }
    done
    return 1
}
cc=""
if [[ ",$tools," == *,floor* ]]; then
    cc=$(find_cc) || missing+=(gcc)
    { [ -n "$cc" ] && echo '#include <curl/curl.h>' | "$cc" -E - >/dev/null 2>&1; } || missing+=(libcurl4-openssl-dev)
fi
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
        say "installing ${missing[*]} from Debian's packages"
        apt-get update -qq >/dev/null
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    else
        fail "missing ${missing[*]}; install them (Debian: apt-get install ${missing[*]}) or run as root"
    fi
fi
nginx_bin=$(command -v nginx || echo /usr/sbin/nginx)
if [[ ",$tools," == *,floor,* ]] && [ -z "$cc" ]; then
    cc=$(find_cc) || fail "no C compiler for floor.c (set CC)"
fi

[ -n "${EPOCHREALTIME:-}" ] || fail "needs bash 5 or later (EPOCHREALTIME)"

# --- Where the tools write -------------------------------------------------------------------
if [ -z "$out_base" ]; then
    out_base=${TMPDIR:-/tmp}
    if [ "$(stat -f -c %T /dev/shm 2>/dev/null)" = tmpfs ] && [ -w /dev/shm ]; then out_base=/dev/shm; fi
fi
[ -d "$out_base" ] && [ -w "$out_base" ] || fail "cannot write in '$out_base'"

# --- Clean-up, also on failure or Ctrl-C -----------------------------------------------------
work=$(mktemp -d "${TMPDIR:-/tmp}/runner-compare.XXXXXX")
outputs=""
nginx_pid=""
fixture_pid=""
cleanup() {
    local code=$?
    trap - EXIT INT TERM
    stop_pids "$fixture_pid" "$nginx_pid"
    rm -rf "$work" ${outputs:+"$outputs"}
    exit "$code"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- The runner, in release ------------------------------------------------------------------
# Needed when it is measured, and for its fixture server's images; otherwise not built.
if [[ ",$tools," == *,runner,* ]] || [ "$images" -gt 0 ]; then
    release_runner "$runner" "$build"
fi

# --- The floors, compiled for this machine ---------------------------------------------------
floor_bin=$work/floor
if [[ ",$tools," == *,floor,* ]]; then
    "$cc" -O2 -o "$floor_bin" Tests/Benchmarks/floor.c -lcurl -lpthread 2>"$work/cc.log" \
        || { cat "$work/cc.log" >&2; fail "$cc could not build Tests/Benchmarks/floor.c"; }
fi
floor_swift_bin=$work/floor-swift
if swift_floor_asked; then
    swiftc -O -import-objc-header Tests/Benchmarks/floor-shim.h Tests/Benchmarks/floor.swift -lcurl \
        -module-cache-path "$work/module-cache" -o "$floor_swift_bin" 2>"$work/swiftc.log" \
        || { cat "$work/swiftc.log" >&2; fail "swiftc could not build Tests/Benchmarks/floor.swift"; }
fi


# Waits until URL answers 200, or fails naming WHAT.
wait_for() {
    local url=$1 what=$2 pid=$3
    for _ in $(seq 1 100); do
        curl "${curl_tls[@]}" -sf -o /dev/null "$url" && return 0
        kill -0 "$pid" 2>/dev/null || return 1
        sleep 0.05
    done
    say "$what did not answer $url"
    return 1
}

# --- TLS, with --https: a CA of this run and a certificate for 127.0.0.1 that it signed ------
tls=""
curl_tls=()
listen_tls=""
scheme=http
if [ "$https" = 1 ]; then
    tls=$work/tls
    mkdir -p "$tls"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
        -subj "/CN=runner benchmark CA" -keyout "$tls/ca.key" -out "$tls/ca.pem" 2>"$tls/log" \
        && openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
            -subj "/CN=127.0.0.1" -keyout "$tls/server.key" -out "$tls/server.csr" 2>>"$tls/log" \
        && printf 'subjectAltName = IP:127.0.0.1\nbasicConstraints = CA:FALSE\nextendedKeyUsage = serverAuth\n' >"$tls/ext" \
        && openssl x509 -req -in "$tls/server.csr" -CA "$tls/ca.pem" -CAkey "$tls/ca.key" -CAcreateserial \
            -days 2 -extfile "$tls/ext" -out "$tls/server.pem" 2>>"$tls/log" \
        || { cat "$tls/log" >&2; fail "openssl could not make the CA and the certificate"; }
    curl_tls=(--cacert "$tls/ca.pem")
    listen_tls=" ssl http2;
        ssl_certificate $tls/server.pem;
        ssl_certificate_key $tls/server.key;
        ssl_protocols TLSv1.3;
        ssl_session_cache shared:TLS:1m;
        http2_max_concurrent_streams 256"
    scheme=https
fi

# --- The document root: N entries, M images --------------------------------------------------
root=$work/root
mkdir -p "$root/entries" "$root/images"

# Real image bytes from the fixture server (on a port it picks): a PNG and a JPEG, used in turn.
if [ "$images" -gt 0 ]; then
    setsid "$runner" fixture-server --port 0 >"$work/fixture.log" 2>&1 &
    fixture_pid=$!
    fixture_url=""
    for _ in $(seq 1 100); do
        fixture_url=$(grep -o 'http://[0-9.:]*' "$work/fixture.log" 2>/dev/null | head -1) || true
        [ -n "$fixture_url" ] || ! kill -0 "$fixture_pid" 2>/dev/null && break
        sleep 0.05
    done
    [ -n "$fixture_url" ] && wait_for "$fixture_url/images/png.png" "the fixture server" "$fixture_pid" \
        || { cat "$work/fixture.log" >&2; fail "the fixture server did not start"; }
    curl -sf -o "$work/sample.png" "$fixture_url/images/png.png"
    curl -sf -o "$work/sample.jpg" "$fixture_url/images/jpeg-baseline.jpg"
    kill -TERM "$fixture_pid"; wait "$fixture_pid" 2>/dev/null || true; fixture_pid=""
fi

# Entries in the seeds' shape, a few hundred bytes each.
awk -v n="$entries" -v dir="$root/entries" 'BEGIN {
    split("du@ijdu.cm pit@gon.bw ha@wu.ly sel@ebo.gy", who, " ")
    for (i = 1; i <= n; i++) {
        f = sprintf("%s/e%d.json", dir, i)
        printf "{\n  \"id\": \"e%d\",\n  \"createdAt\": \"2023-%02d-%02dT%02d:%02d:47.099Z\",\n", i, 1 + i % 12, 1 + i % 28, i % 24, i % 60 > f
        printf "  \"createdBy\": \"%s\",\n  \"lastModifiedAt\": \"2024-%02d-%02dT07:07:40.646Z\",\n", who[1 + i % 4], 1 + (i / 12) % 12, 1 + (i / 7) % 28 > f
        printf "  \"lastModifiedBy\": \"%s\",\n", who[1 + (i + 1) % 4] > f
        printf "  \"description\": \"Entry e%d. Duw orevoza jiprudis faz alnaimu sazafapa cuwpe zifehe kowo wasmag otu tuwulfoj bifo se botirgo. Kiojka roftan otecu ohukdu zuaruuze ow ko jogapob naw jadkawwa nem vo fasoz.\"\n}\n", i > f
        close(f)
    }
}'
for ((i = 1; i <= images; i++)); do
    if ((i % 2)); then cp "$work/sample.png" "$root/images/i$i.png"; else cp "$work/sample.jpg" "$root/images/i$i.jpg"; fi
done
expected_bytes=$(find "$root" -type f -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }')
chmod -R a+rX "$work"   # nginx's workers may run as another user

# --- nginx on loopback, in the foreground, with its own configuration ------------------------
# (In a session of its own, so that a Ctrl-C stops the tool being measured, not the server under it.)
mkdir -p "$work/nginx"
if [ "$entries" -gt 0 ]; then probe=entries/e1.json; else probe=images/i1.png; fi
# nginx keeps files open in its cache: half of what a process may open, so that a run of more
# files than that is served from disk instead of failing with "Too many open files".
nofile=$(ulimit -n)
[[ "$nofile" =~ ^[0-9]+$ ]] || nofile=100000
cache_files=$((nofile / 2 < 100000 ? nofile / 2 : 100000))
start_nginx() {
    local port=$1
    cat >"$work/nginx/nginx.conf" <<EOF
daemon off;
worker_processes auto;
pid $work/nginx/nginx.pid;
error_log $work/nginx/error.log warn;
events { worker_connections 4096; }
http {
    # One line per request naming its connection: how many connections each tool opened.
    log_format connection '\$connection';
    access_log $work/nginx/access.log connection;
    sendfile on;
    tcp_nopush on;
    tcp_nodelay on;
    keepalive_timeout 65s;
    keepalive_requests 1000000;
    open_file_cache max=$cache_files inactive=60s;
    types { application/json json; image/png png; image/jpeg jpg; }
    default_type application/octet-stream;
    client_body_temp_path $work/nginx/body;
    proxy_temp_path $work/nginx/proxy;
    fastcgi_temp_path $work/nginx/fastcgi;
    uwsgi_temp_path $work/nginx/uwsgi;
    scgi_temp_path $work/nginx/scgi;
    server {
        listen 127.0.0.1:$port$listen_tls;
        root $root;
    }
}
EOF
    setsid "$nginx_bin" -p "$work/nginx" -e "$work/nginx/error.log" -c "$work/nginx/nginx.conf" >"$work/nginx/stdout.log" 2>&1 &
    nginx_pid=$!
    wait_for "$scheme://127.0.0.1:$port/$probe" nginx "$nginx_pid" 2>/dev/null && return 0
    kill -TERM "$nginx_pid" 2>/dev/null || true
    wait "$nginx_pid" 2>/dev/null || true
    nginx_pid=""
    return 1
}
for attempt in 1 2 3 4 5; do
    port=$(free_port)
    start_nginx "$port" && break
    [ "$attempt" -lt 5 ] || { cat "$work/nginx/error.log" >&2 2>/dev/null || true; fail "nginx did not start"; }
done
base=$scheme://127.0.0.1:$port

# --- The same work, in each tool's input format ----------------------------------------------
# runner: one JSONL job per URL. curl: url/output pairs. aria2c: URL with dir/out. xargs: "FILE URL".
lists=$work/lists
mkdir -p "$lists"
{
    for ((i = 1; i <= entries; i++)); do
        printf '{"kind": "entry", "id": "e%d", "url": "%s/entries/{id}.json"}\n' "$i" "$base"
    done
    for ((i = 1; i <= images; i++)); do
        ((i % 2)) && ext=png || ext=jpg
        printf '{"kind": "image", "url": "%s/images/i%d.%s"}\n' "$base" "$i" "$ext"
    done
} >"$lists/batch.jsonl"
paths() {   # "folder/name url" for every file
    for ((i = 1; i <= entries; i++)); do echo "entries/e$i.json $base/entries/e$i.json"; done
    for ((i = 1; i <= images; i++)); do
        ((i % 2)) && ext=png || ext=jpg
        echo "images/i$i.$ext $base/images/i$i.$ext"
    done
}
paths >"$lists/paths"
awk '{ printf "url = \"%s\"\noutput = \"%s\"\n", $2, $1 }' "$lists/paths" >"$lists/curl.config"
awk '{ n = split($1, p, "/"); printf "%s\n  dir=%s\n  out=%s\n", $2, p[1], p[2] }' "$lists/paths" >"$lists/aria2.list"

# The command line of one tool; each runs in a fresh output folder as its working directory.
case "$runner" in /*) runner_abs=$runner ;; *) runner_abs=$PWD/$runner ;; esac
tool_command() {
    case "$1" in
        # Every URL is on one host, so --per-host (8 by default, to be polite) is raised to P too.
        runner) cmd=(${BENCH_RUNNER_PRELOAD:+env "LD_PRELOAD=$BENCH_RUNNER_PRELOAD"}
                     "$runner_abs" run "$lists/batch.jsonl" --concurrency "$parallel" --per-host "$parallel" --out .
                     ${tls:+--cacert "$tls/ca.pem"}) ;;
        floor) cmd=("$floor_bin" "$lists/paths" . --parallel "$parallel" --writer ${tls:+--cacert "$tls/ca.pem"}) ;;
        floor-swift) cmd=("$floor_swift_bin" "$lists/paths" . --parallel "$parallel" --mode callbacks ${tls:+--cacert "$tls/ca.pem"}) ;;
        floor-tasks) cmd=("$floor_swift_bin" "$lists/paths" . --parallel "$parallel" --mode tasks ${tls:+--cacert "$tls/ca.pem"}) ;;
        floor-readahead) cmd=("$floor_swift_bin" "$lists/paths" . --parallel "$parallel" --mode readahead ${tls:+--cacert "$tls/ca.pem"}) ;;
        floor-writer) cmd=("$floor_swift_bin" "$lists/paths" . --parallel "$parallel" --mode readahead-writer ${tls:+--cacert "$tls/ca.pem"}) ;;
        curl) cmd=(curl --silent --show-error --fail "${curl_tls[@]}" --parallel --parallel-max "$parallel" -K "$lists/curl.config") ;;
        aria2c) cmd=(aria2c --no-conf -j "$parallel" -x1 -i "$lists/aria2.list" --allow-overwrite=true
                     --auto-file-renaming=false --console-log-level=warn --summary-interval=0
                     --download-result=hide --file-allocation=none ${tls:+--ca-certificate="$tls/ca.pem"}) ;;
        xargs) cmd=(xargs -P "$parallel" -n 2 curl --silent --show-error --fail "${curl_tls[@]}" -o) ;;   # reads $lists/paths
    esac
}

# Checks the output folder holds all N+M payloads, byte for byte in total.
check_output() {
    local tool=$1 dir=$2 count bytes
    count=$(find "$dir/entries" "$dir/images" -type f ! -name '.*' ! -name '*.aria2' -size +0 2>/dev/null | wc -l)
    bytes=$(find "$dir/entries" "$dir/images" -type f ! -name '.*' ! -name '*.aria2' -printf '%s\n' 2>/dev/null | awk '{ s += $1 } END { print s + 0 }')
    [ "$count" -eq "$total" ] || fail "$tool wrote $count of $total files"
    [ "$bytes" -eq "$expected_bytes" ] || fail "$tool wrote $bytes bytes, expected $expected_bytes"
    if [ "$tool" = runner ] || [[ "$tool" == floor* ]]; then
        count=$(find "$dir/results" -type f -name '*.json' | wc -l)
        [ "$count" -eq "$total" ] || fail "$tool wrote $count of $total result records"
    fi
}

# One measured run: wall time from a microsecond clock around GNU time (whose %e has 10 ms
# steps); CPU (user+sys) and peak RSS from GNU time, which counts every waited-for descendant.
measure() {
    local tool=$1 run=$2 dir=$outputs/$1.$2 start end code=0 user sys rss
    tool_command "$tool"
    mkdir -p "$dir/entries" "$dir/images"
    sync
    : >"$work/nginx/access.log"
    cd "$dir"
    start=$EPOCHREALTIME
    /usr/bin/time -f '%U %S %M' -o "$work/time" "${cmd[@]}" <"$lists/paths" >"$work/log" 2>&1 || code=$?
    end=$EPOCHREALTIME
    cd "$top"
    [ "$code" -eq 0 ] || { tail -20 "$work/log" >&2; fail "$tool exited with $code (run $run)"; }
    check_output "$tool" "$dir"
    read -r user sys rss < <(tail -1 "$work/time")
    connections=$(sort -u "$work/nginx/access.log" | wc -l)
    awk -v t="$tool" -v s="$start" -v e="$end" -v u="$user" -v y="$sys" -v m="$rss" -v c="$connections" \
        'BEGIN { printf "%s %.4f %.2f %d %d\n", t, e - s, u + y, m, c }' >>"$work/samples"
    rm -rf "$dir"
}

# Warm nginx and the page cache once, untimed, so that the first tool measured is not penalized.
outputs=$(mktemp -d "$out_base/runner-compare-out.XXXXXX")
out_fs=$( (findmnt -n -o FSTYPE --target "$outputs" 2>/dev/null || stat -f -c %T "$outputs") | tail -1)
top=$PWD
mkdir -p "$outputs/warm/entries" "$outputs/warm/images"
(cd "$outputs/warm" && curl --silent --show-error --fail "${curl_tls[@]}" --parallel --parallel-max "$parallel" -K "$lists/curl.config" >"$work/log" 2>&1) \
    || fail "the warm-up fetch with curl failed"
rm -rf "$outputs/warm"

: >"$work/samples"
for ((r = 1; r <= runs; r++)); do
    for tool in "${tool_list[@]}"; do
        say "run $r/$runs: $tool"
        measure "$tool" "$r"
    done
done

# --- The table -------------------------------------------------------------------------------
median() {   # median of the given column for one tool
    awk -v t="$1" -v c="$2" '$1 == t { print $c }' "$work/samples" | sort -g \
        | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
curl_wall=""
for tool in "${tool_list[@]}"; do [ "$tool" = curl ] && curl_wall=$(median curl 2); done

over=""
[ "$https" = 1 ] && over=" over HTTPS (TLS 1.3, HTTP/2)"
echo "Fetching $entries JSON entries + $images images ($total files) from nginx on loopback$over, $parallel at once, written to $out_fs; median of $runs runs."
echo
echo "| tool | wall (s) | wall min–max (s) | jobs/s | CPU user+sys (s) | CPU per job (ms) | peak RSS (MB) | connections | wall vs curl |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
for tool in "${tool_list[@]}"; do
    case "$tool" in
        runner) label="\`runner run\` (JSONL batch)" ;;
        floor) label="floor: libcurl and the runner's files, in C" ;;
        floor-swift) label="the floor in Swift, no task" ;;
        floor-tasks) label="the floor in Swift, a task per job" ;;
        floor-readahead) label="the floor in Swift, a task per job, read-ahead" ;;
        floor-writer) label="the floor in Swift, a task per job, read-ahead, one writer thread as the tasks' executor" ;;
        curl) label="\`curl --parallel -K\`" ;;
        aria2c) label="\`aria2c -j -i\`" ;;
        xargs) label="\`xargs -P curl\`" ;;
    esac
    wall=$(median "$tool" 2); cpu=$(median "$tool" 3); rss=$(median "$tool" 4); conns=$(median "$tool" 5)
    spread=$(awk -v t="$tool" '$1 == t { if (min == "" || $2 < min) min = $2; if ($2 > max) max = $2 } END { printf "%.3f–%.3f", min, max }' "$work/samples")
    awk -v l="$label" -v w="$wall" -v sp="$spread" -v c="$cpu" -v m="$rss" -v k="$conns" -v n="$total" -v cw="$curl_wall" 'BEGIN {
        ratio = (cw == "" || cw == 0) ? "–" : sprintf("%.2f×", w / cw)
        printf "| %s | %.3f | %s | %.0f | %.2f | %.3f | %.1f | %.0f | %s |\n", l, w, sp, n / w, c, 1000 * c / n, m / 1024, k, ratio
    }'
done
echo
echo "Connections: the median count of distinct connections nginx saw in a run (its access log)."
echo
echo "Peak RSS is GNU time's: the largest single process (for xargs, one curl or xargs itself), not a sum."
if [[ ",$tools," == *,floor,* ]]; then
    echo "floor (floor.c) fetches as curl does and writes what a runner job must write, with nothing else: what the runner spends above it is its engine's own."
    if [[ ",$tools," == *,runner,* ]]; then
        awk -v rw="$(median runner 2)" -v rc="$(median runner 3)" -v fw="$(median floor 2)" -v fc="$(median floor 3)" -v n="$total" 'BEGIN {
            if (fw > 0 && fc > 0) printf "runner against the floor: %.2f× the wall time, %.2f× the CPU (%.0f µs of CPU a job above it).\n", rw / fw, rc / fc, 1e6 * (rc - fc) / n
        }'
    fi
fi
# Each Swift floor against the C floor, and the runner against the Swift floor with a task per job.
for tool in "${tool_list[@]}"; do
    case "$tool" in floor-swift|floor-tasks|floor-readahead|floor-writer) ;; *) continue ;; esac
    if [[ ",$tools," == *,floor,* ]]; then
        awk -v t="$tool" -v sw="$(median "$tool" 2)" -v sc="$(median "$tool" 3)" -v fw="$(median floor 2)" -v fc="$(median floor 3)" 'BEGIN {
            if (fw > 0 && fc > 0) printf "%s against the floor in C: %.2f× the wall time, %.2f× the CPU.\n", t, sw / fw, sc / fc
        }'
    fi
    if [ "$tool" = floor-tasks ] && [[ ",$tools," == *,runner,* ]]; then
        awk -v rw="$(median runner 2)" -v rc="$(median runner 3)" -v fw="$(median floor-tasks 2)" -v fc="$(median floor-tasks 3)" -v n="$total" 'BEGIN {
            if (fw > 0 && fc > 0) printf "runner against the floor in Swift with a task per job: %.2f× the wall time, %.2f× the CPU (%.0f µs of CPU a job above it).\n", rw / fw, rc / fc, 1e6 * (rc - fc) / n
        }'
    fi
done
nginx_version=$("$nginx_bin" -v 2>&1 | sed 's/.*nginx\///')
echo "Machine: $(nproc) cores ($(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)), \
$(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo), Linux $(uname -r), \
load $(cut -d' ' -f1-3 /proc/loadavg); $(swift --version 2>&1 | grep -o 'Swift version [^ ]*' | head -1), \
curl $(curl --version | head -1 | cut -d' ' -f2), aria2c $(aria2c --version | head -1 | awk '{ print $3 }'), \
nginx $nginx_version, $(xargs --version | head -1)."
