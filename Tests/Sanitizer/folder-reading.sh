#!/usr/bin/env bash
# Builds the engine's folder-reading code with the address sanitizer (the engine's sources and
# FolderReadingCheck.swift, one swiftc call, no other target) and runs it over folders of
# thousands of entries with names of every length. A read past the end of an entry that readdir
# returned fails here as a heap-buffer-overflow.
set -euo pipefail
cd "$(dirname "$0")/../.."
work=$(mktemp -d "${TMPDIR:-/tmp}/runner-asan-XXXXXX")
trap 'rm -rf "$work"' EXIT
sources=$(find Sources/RunnerKit -name '*.swift' | sort)
# shellcheck disable=SC2086
if ! swiftc -sanitize=address -Onone -parse-as-library -enable-bare-slash-regex -module-name RunnerKit -package-name runner $sources \
    Tests/Sanitizer/FolderReadingCheck.swift -o "$work/check" > "$work/build.log" 2>&1; then
    grep -v "Cannot export local symbol" "$work/build.log" >&2
    exit 1
fi
ASAN_OPTIONS=detect_leaks=0:abort_on_error=0 "$work/check" "$work/folders"
