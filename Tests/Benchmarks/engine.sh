#!/usr/bin/env bash
# The engine's own figures, in a release build: cost per job without network, deadline
# precision with a thousand hanging fetches, and TaskManager memory over many keys.
# Usage: bash Tests/Benchmarks/engine.sh     (prints a Markdown table)
set -euo pipefail
cd "$(dirname "$0")/../.."
echo "| measurement | figure | target |"
echo "| --- | --- | --- |"
RUNNER_BENCH=1 swift test -c release --filter BenchmarkTests 2>&1 | grep '^| ' || {
    echo "benchmark run failed" >&2
    exit 1
}
echo
echo "Machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(swift --version 2>&1 | head -1)"
