#!/usr/bin/env bash
# The PostgreSQL queue against the spool folder on the same work: N small JSON entries served by
# nginx on loopback, drained by 1, 2 and 4 watchers, first through a spool folder (each watcher
# its own --out; the jobs in 100 files, renamed into the inbox at once), then through a queue (the
# same 100 files in one `submit --queue`; the watchers share the queue's one output folder). Prints, for each: wall time from the hand-over to the last
# record, jobs a second, the watchers' CPU per job, and the database server's CPU per job.
#
# Each drain runs R times, spool and queue in turn; the table shows the medians. Everything
# (nginx's files, the outputs, the database) is on a tmpfs when there is one (/dev/shm), so that
# the feeds are measured rather than the disk.
#
# With --children, the N entries are the children of one tree job instead (a tree of N leaves,
# one entry per leaf): through the spool they run on the watcher that took the file; through
# the queue they are queue jobs that every watcher takes, and the tree's record is completed by
# the watcher that ends the last of them. The counts and CPU per job then include the tree.
#
# Usage: bash Tests/Benchmarks/queue.sh [--jobs N] [--children] [--watchers "1 2 4"] [--runs R] [--concurrency C] [--no-build | --runner PATH]
#   --jobs N         entry jobs per drain (default 20000, env BENCH_JOBS)
#   --children       the entries as the children of one tree job
#   --watchers LIST  watcher counts to try (default "1 2 4", env BENCH_WATCHERS)
#   --runs R         drains of each kind, the median shown (default 3, env BENCH_RUNS)
#   --concurrency C  --concurrency and --per-host of each watcher (default 32)
#   --no-build       use the existing .build/release/runner
#   --runner PATH    the binary to measure (implies --no-build), to compare two builds
#
# Needs nginx, curl and PostgreSQL (Debian's nginx, curl, postgresql); PostgreSQL is started by
# the script in a temporary folder (initdb as the postgres user when run as root), on a unix
# socket only. Listens on 127.0.0.1 only.
set -euo pipefail
cd "$(dirname "$0")/../.."

jobs=${BENCH_JOBS:-20000}
watcher_counts=${BENCH_WATCHERS:-"1 2 4"}
runs=${BENCH_RUNS:-3}
concurrency=32
build=1
children=0
while [ $# -gt 0 ]; do
    case "$1" in
        --jobs) jobs=$2; shift 2 ;;
        --children) children=1; shift ;;
        --watchers) watcher_counts=$2; shift 2 ;;
        --runs) runs=$2; shift 2 ;;
        --concurrency) concurrency=$2; shift 2 ;;
        --no-build) build=0; shift ;;
        --runner) runner_path=$2; build=0; shift 2 ;;
        -h|--help) sed -n '/^# Usage:/,/^# Needs/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "queue.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done

say() { echo "queue.sh: $*" >&2; }
fail() { say "$*"; exit 1; }

pg_bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[ -x "$pg_bin/initdb" ] || fail "PostgreSQL is not installed (Debian: apt-get install postgresql)"
nginx_bin=$(command -v nginx || echo /usr/sbin/nginx)
[ -x "$nginx_bin" ] || fail "nginx is not installed (Debian: apt-get install nginx)"

base_dir=/tmp
[ -d /dev/shm ] && [ -w /dev/shm ] && base_dir=/dev/shm
work=$(mktemp -d "$base_dir/runner-queue-bench.XXXXXX")
chmod 755 "$work"
nginx_pid=""
watcher_pids=()
as_postgres() { if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
cleanup() {
    local code=$?
    for pid in "${watcher_pids[@]}" $nginx_pid ${PSQL_PID:-}; do kill -TERM "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    [ -f "$work/pg/data/postmaster.pid" ] && as_postgres "$pg_bin/pg_ctl" -D "$work/pg/data" -m immediate -w stop >/dev/null 2>&1 || true
    rm -rf "$work"
    exit "$code"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

runner=${runner_path:-.build/release/runner}
if [ "$build" -eq 1 ]; then
    say "building the runner in release"
    swift build -c release >"$work/build.log" 2>&1 || { cat "$work/build.log" >&2; fail "swift build -c release"; }
fi
[ -x "$runner" ] || fail "$runner is missing (drop --no-build)"
case $runner in /*) ;; *) runner=$PWD/$runner ;; esac

# --- nginx: N entries of a few hundred bytes ---------------------------------------------------
mkdir -p "$work/root/entries" "$work/nginx"
awk -v n="$jobs" -v dir="$work/root/entries" 'BEGIN {
    for (i = 1; i <= n; i++) {
        f = sprintf("%s/e%d.json", dir, i)
        printf "{\"id\": \"e%d\", \"createdAt\": \"2023-01-02T03:04:05.099Z\", \"description\": \"Entry e%d: duw orevoza jiprudis faz alnaimu sazafapa cuwpe zifehe kowo wasmag otu tuwulfoj.\"}\n", i, i > f
        close(f)
    }
}'
chmod -R a+rX "$work/root"
port=$((10000 + RANDOM % 20000))
cat >"$work/nginx/nginx.conf" <<EOF
daemon off;
worker_processes 1;
pid $work/nginx/nginx.pid;
error_log $work/nginx/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    keepalive_requests 1000000;
    types { application/json json; }
    client_body_temp_path $work/nginx/body;
    proxy_temp_path $work/nginx/proxy;
    fastcgi_temp_path $work/nginx/fastcgi;
    uwsgi_temp_path $work/nginx/uwsgi;
    scgi_temp_path $work/nginx/scgi;
    server { listen 127.0.0.1:$port; root $work/root; }
}
EOF
setsid "$nginx_bin" -p "$work/nginx" -e "$work/nginx/error.log" -c "$work/nginx/nginx.conf" >/dev/null 2>&1 &
nginx_pid=$!
for _ in $(seq 100); do curl -sf -o /dev/null "http://127.0.0.1:$port/entries/e1.json" && break; sleep 0.05; done
curl -sf -o /dev/null "http://127.0.0.1:$port/entries/e1.json" || fail "nginx did not start"

# --- PostgreSQL on a unix socket in the work folder -------------------------------------------
mkdir -p "$work/pg"
[ "$(id -u)" -eq 0 ] && chown postgres "$work/pg"
as_postgres "$pg_bin/initdb" -D "$work/pg/data" -U runner -A trust >"$work/pg/initdb.log" 2>&1 || { cat "$work/pg/initdb.log" >&2; fail "initdb"; }
as_postgres "$pg_bin/pg_ctl" -D "$work/pg/data" -o "-k $work/pg -c listen_addresses=''" -l "$work/pg/server.log" -w start >/dev/null
queue="postgresql://runner@/postgres?host=$work/pg"
postmaster=$(head -1 "$work/pg/data/postmaster.pid")
# One session of psql for the script's own questions (how many jobs are done), so that they cost
# no connection each; its server process is left out of the database's CPU.
coproc PSQL { as_postgres "$pg_bin/psql" -qAt -h "$work/pg" -U runner -d postgres 2>&1; }
ask() { echo "$1" >&"${PSQL[1]}"; read -r answer <&"${PSQL[0]}"; echo "$answer"; }
own_backend=$(ask "SELECT pg_backend_pid();")

# --- The jobs: 100 files -----------------------------------------------------------------------
mkdir -p "$work/files"
awk -v n="$jobs" -v dir="$work/files" -v base="http://127.0.0.1:$port" 'BEGIN {
    for (i = 1; i <= n; i++) {
        f = sprintf("%s/jobs-%03d.jsonl", dir, i % 100)
        printf "{\"kind\": \"entry\", \"id\": \"e%d\", \"url\": \"%s/entries/{id}.json\"}\n", i, base >> f
    }
}'
if [ "$children" -eq 1 ]; then
    # One tree of N leaves; each leaf's entry a child of the one job.
    rm -f "$work/files"/*
    awk -v n="$jobs" 'BEGIN { printf "["; for (i = 1; i <= n; i++) printf "%s{\"label\": \"e%d\", \"id\": \"e%d\"}", (i > 1 ? "," : ""), i, i; print "]" }' >"$work/root/tree.json"
    printf '{"kind": "tree", "key": "catalog", "url": "http://127.0.0.1:%s/tree.json", "entries": "http://127.0.0.1:%s/entries/{id}.json", "timeout": 60}\n' "$port" "$port" >"$work/files/jobs-000.jsonl"
fi
# Every job of a drain: the entries, and the tree above them.
total=$((jobs + children))
files=$(ls "$work/files" | wc -l)

# CPU seconds (user + system) of processes, from /proc/PID/stat.
ticks=$(getconf CLK_TCK)
cpu_of() { for pid in "$@"; do awk '{ print $14 + $15 }' "/proc/$pid/stat" 2>/dev/null || echo 0; done | awk -v t="$ticks" '{ s += $1 } END { printf "%.3f\n", s / t }'; }
database_pids() { echo "$postmaster"; pgrep -P "$postmaster" | grep -vx "$own_backend" || true; }

count_records() { local n=0 c; for dir in "$@"; do c=$(find "$dir/results" -name '*.json' 2>/dev/null | wc -l); n=$((n + c)); done; echo "$n"; }

# One drain: MODE (spool or queue) with W watchers. Prints "mode w wall cpu dbcpu".
drain() {
    local mode=$1 w=$2 run=$work/run.$1.$2 i outs=() start end cpu0 cpu1 db0 db1
    mkdir -p "$run"
    watcher_pids=()
    [ "$mode" = queue ] && outs=("$run/out")
    for ((i = 1; i <= w; i++)); do
        if [ "$mode" = queue ]; then
            "$runner" watch --queue "$queue" --out "$run/out" --concurrency "$concurrency" --per-host "$concurrency" --rescan 30 2>"$run/watch$i.log" &
        else
            outs+=("$run/out$i")
            "$runner" watch --spool "$run/spool" --out "$run/out$i" --concurrency "$concurrency" --per-host "$concurrency" --rescan 30 2>"$run/watch$i.log" &
        fi
        watcher_pids+=($!)
    done
    for ((i = 1; i <= w; i++)); do
        for _ in $(seq 200); do grep -q watching "$run/watch$i.log" 2>/dev/null && break; sleep 0.05; done
        grep -q watching "$run/watch$i.log" || { cat "$run/watch$i.log" >&2; fail "watcher $i did not start"; }
    done
    if [ "$mode" = spool ]; then
        mkdir -p "$run/stage"
        cp "$work/files"/* "$run/stage/"
    fi
    sleep 0.5
    cpu0=$(cpu_of "${watcher_pids[@]}"); db0=$(cpu_of $(database_pids))
    start=$EPOCHREALTIME
    if [ "$mode" = queue ]; then
        "$runner" submit --queue "$queue" "$work/files"/*.jsonl >/dev/null
        # The runner made its tables at the first watcher's start.
        until [ "$(ask "SELECT count(*) FROM runner.jobs WHERE state = 'done';")" -ge "$total" ]; do sleep 0.1; done
    else
        for f in "$run/stage"/*; do mv "$f" "$run/spool/inbox/"; done
        until [ "$(ls "$run/spool/done" "$run/spool/failed" 2>/dev/null | grep -c '^jobs-[0-9]*\.jsonl$')" -ge "$files" ]; do sleep 0.1; done
    fi
    end=$EPOCHREALTIME
    cpu1=$(cpu_of "${watcher_pids[@]}"); db1=$(cpu_of $(database_pids))
    kill -TERM "${watcher_pids[@]}"
    wait "${watcher_pids[@]}" 2>/dev/null || true
    watcher_pids=()
    local records
    records=$(count_records "${outs[@]}")
    [ "$records" -eq "$total" ] || { tail -5 "$run"/watch*.log >&2; fail "$mode with $w watchers: $records records for $total jobs"; }
    if ls "$run/spool/failed" 2>/dev/null | grep -q .; then tail -5 "$run"/watch*.log >&2; fail "$mode with $w watchers: some jobs failed"; fi
    if [ "$mode" = queue ] && [ "$(ask "SELECT count(*) FROM runner.jobs WHERE status <> 'succeeded';")" -ne 0 ]; then
        "$runner" status --queue "$queue" >&2; fail "queue with $w watchers: some jobs failed"
    fi
    if [ "$mode" = queue ]; then
        # The next drain starts from an empty queue, whose output is the next drain's folder.
        ask "TRUNCATE runner.jobs, runner.results; DELETE FROM runner.keys; UPDATE runner.identity SET folder = NULL, output = NULL, stamped_by = NULL; SELECT 1;" >/dev/null
    fi
    echo "$mode $w $start $end $cpu0 $cpu1 $db0 $db1" | awk '{ printf "%s %d %.3f %.3f %.3f\n", $1, $2, $4 - $3, $6 - $5, $8 - $7 }'
    rm -rf "$run"
}

say "$jobs entry jobs from nginx, watchers of --concurrency $concurrency; spool folder, then queue, $runs runs each"
samples=$work/samples
for w in $watcher_counts; do
    for ((r = 1; r <= runs; r++)); do
        drain spool "$w" >>"$samples"
        drain queue "$w" >>"$samples"
    done
done
# The median of each column, per feed and watcher count.
results=$work/results
for w in $watcher_counts; do
    for mode in spool queue; do
        awk -v m="$mode" -v w="$w" '$1 == m && $2 == w' "$samples" >"$work/one"
        median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
        echo "$mode $w $(cut -d' ' -f3 "$work/one" | median) $(cut -d' ' -f4 "$work/one" | median) $(cut -d' ' -f5 "$work/one" | median)" >>"$results"
    done
done

echo
echo "Draining $jobs small entry jobs$([ "$children" -eq 1 ] && echo ", the children of one tree,") from nginx on loopback ($(nproc) cores), watchers of --concurrency $concurrency, on $(stat -f -c %T "$work"); median of $runs runs"
echo
printf '| %-6s | %8s | %8s | %8s | %22s | %20s |\n' feed watchers "wall s" "jobs/s" "watchers' CPU ms/job" "database CPU ms/job"
echo '| --- | ---: | ---: | ---: | ---: | ---: |'
while read -r mode w wall cpu db; do
    awk -v m="$mode" -v w="$w" -v t="$wall" -v c="$cpu" -v d="$db" -v n="$total" \
        'BEGIN { printf "| %-6s | %8d | %8.2f | %8.0f | %22.3f | %20s |\n", m, w, t, n / t, c * 1000 / n, (m == "queue" ? sprintf("%.3f", d * 1000 / n) : "-") }'
done <"$results"
echo
awk -v n="$jobs" '{ cpu[$1 " " $2] = $4 } END {
    for (k in cpu) if (k ~ /^queue/) { split(k, p, " "); s = cpu["spool " p[2]]; if (s > 0) printf "queue/spool CPU per job with %d watcher(s): %.2fx\n", p[2], cpu[k] / s }
}' "$results" | sort -t' ' -k6n
