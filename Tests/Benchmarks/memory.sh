#!/usr/bin/env bash
# Peak resident memory of `runner run` as batches grow: 2 000 and 20 000 JSON Lines jobs against
# the fixture server, and a 1 000 000-line batch (read, validated and streamed in full; with
# --shard 0/50 so that 20 000 of them are fetched in a reasonable time).
# Usage: bash Tests/Benchmarks/memory.sh [--no-build]     (prints a Markdown table)
set -euo pipefail
cd "$(dirname "$0")/../.."

if [ "${1:-}" != "--no-build" ]; then swift build -c release >/dev/null; fi
BIN=.build/release/runner
if [ ! -x /usr/bin/time ]; then
    apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq time >/dev/null
fi

WORK=$(mktemp -d)
SERVER_PID=""
cleanup() {
    [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null
    wait 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

"$BIN" fixture-server --port 0 > "$WORK/server.txt" &
SERVER_PID=$!
for _ in $(seq 100); do grep -q "listening" "$WORK/server.txt" 2>/dev/null && break; sleep 0.05; done
BASE=$(sed -n 's/.*listening on //p' "$WORK/server.txt")
[ -n "$BASE" ] || { echo "the fixture server did not start" >&2; exit 1; }

batch() {  # batch LINES FILE
    python3 - "$1" "$2" "$BASE" <<'PY'
import sys
n, path, base = int(sys.argv[1]), sys.argv[2], sys.argv[3]
with open(path, "w") as f:
    for i in range(n):
        f.write('{"kind": "entry", "id": "imgly.A.1", "key": "e%d", "url": "%s/entries/{id}.json", "output": "entries/%d/%d.json"}\n' % (i, base, i // 1000, i))
PY
}

measure() {  # measure LABEL FILE ARGS…
    local label=$1 file=$2
    shift 2
    local out="$WORK/out-$RANDOM"
    local start end
    start=$(date +%s.%N)
    /usr/bin/time -f "%M" -o "$WORK/rss" "$BIN" run "$file" --out "$out" --concurrency 32 --per-host 32 "$@" > /dev/null || true
    end=$(date +%s.%N)
    local ok
    ok=$(find "$out/results" -name '*.json' | wc -l)
    awk -v label="$label" -v ok="$ok" -v rss="$(cat "$WORK/rss")" -v start="$start" -v end="$end" \
        'BEGIN { printf "| %s | %s | %.1f MB | %.1f s |\n", label, ok, rss / 1024, end - start }'
    rm -rf "$out"
}

batch 2000 "$WORK/b2k.jsonl"
batch 20000 "$WORK/b20k.jsonl"
batch 1000000 "$WORK/b1m.jsonl"

echo "| batch | records written | peak resident memory | wall time |"
echo "| --- | --- | --- | --- |"
measure "2 000 lines" "$WORK/b2k.jsonl"
measure "20 000 lines" "$WORK/b20k.jsonl"
measure "1 000 000 lines, --shard 0/50" "$WORK/b1m.jsonl" --shard 0/50
echo
echo "Machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(swift --version 2>&1 | head -1)"
