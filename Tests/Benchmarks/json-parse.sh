#!/usr/bin/env bash
# Time to check JSON payloads made to be costly: one object of 200 000 and 800 000 members, and
# one object of 64 MiB (the default maxBytes), plus the same with a duplicate name at the very end.
# Usage: bash Tests/Benchmarks/json-parse.sh     (release build; prints a Markdown table)
set -euo pipefail
cd "$(dirname "$0")/../.."
RUNNER_BENCH=1 swift test -c release --filter JSONParseBenchmarkTests 2>&1 | grep '^| ' || {
    echo "the benchmark did not run; try: RUNNER_BENCH=1 swift test -c release --filter JSONParseBenchmarkTests" >&2
    exit 1
}
