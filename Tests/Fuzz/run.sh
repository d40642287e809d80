#!/usr/bin/env bash
# Builds the libFuzzer targets and runs each for a fixed budget (not part of `swift test`).
#
#   bash Tests/Fuzz/run.sh [SECONDS_PER_TARGET [TARGET…]]     (default 60, every target)
#
# jobfile      JSONParser, JSONWriter and JobFileReader/JobDescriptor.decode on arbitrary bytes
# imageheader  ImageHeader.parse / isComplete / describe on arbitrary bytes, every format
#              (PNG, JPEG, GIF, WebP, BMP, TIFF, ICO, CUR, HEIC, AVIF, JPEG XL)
# kindfile     KindFile.decode (declarative and executable kind files), then the kind's job
#              decoding, templates and JSON Pointers on arbitrary bytes
#
# Seeds and the inputs that once found a bug live in corpus/<target>/ (the regression test
# FuzzCorpusTests feeds them to the same code); new findings are written as crash-* files into
# the build folder, to be minimized and moved into corpus/ once fixed.
set -euo pipefail
cd "$(dirname "$0")/../.."
budget=${1:-60}
targets=("${@:2}")
[ ${#targets[@]} -gt 0 ] || targets=(jobfile imageheader kindfile)
build=.build/fuzz
mkdir -p "$build"

flags=(-sanitize=fuzzer,address -parse-as-library -O -g -swift-version 6
       -enable-upcoming-feature ExistentialAny -enable-upcoming-feature MemberImportVisibility)

# The linker's notes about sanitizer symbols are noise.
quiet() { "$@" 2> >(grep -v "Cannot export local symbol" >&2); }
for target in "${targets[@]}"; do
    echo "building $target…"
    case $target in
    jobfile)
        quiet swiftc "${flags[@]}" -module-name JobFileFuzz -o "$build/jobfile" \
            $(find Sources/RunnerKit -name '*.swift' | sort) Tests/Fuzz/JobFileFuzzer.swift ;;
    imageheader)
        quiet swiftc "${flags[@]}" -module-name ImageHeaderFuzz -o "$build/imageheader" \
            Sources/RunnerKinds/ImageHeader*.swift Sources/RunnerKinds/ImageFormat.swift \
            Sources/RunnerKinds/ImageByteReader.swift Tests/Fuzz/ImageHeaderFuzzer.swift ;;
    kindfile)
        # RunnerKinds imports RunnerKit: RunnerKit is built as a module of its own first.
        mkdir -p "$build/kit"
        quiet swiftc "${flags[@]}" -module-name RunnerKit -emit-module -emit-module-path "$build/kit/RunnerKit.swiftmodule" \
            -emit-library -static -o "$build/kit/libRunnerKit.a" $(find Sources/RunnerKit -name '*.swift' | sort)
        quiet swiftc "${flags[@]}" -module-name RunnerKinds -I "$build/kit" -L "$build/kit" -lRunnerKit -o "$build/kindfile" \
            $(find Sources/RunnerKinds -name '*.swift' | sort) Tests/Fuzz/KindFileFuzzer.swift ;;
    *) echo "unknown target $target (jobfile, imageheader, kindfile)"; exit 2 ;;
    esac
done

status=0
for target in "${targets[@]}"; do
    work="$build/corpus-$target"
    mkdir -p "$work"
    echo "fuzzing $target for ${budget}s…"
    # Findings go to the build folder; the checked-in corpus is read, never written.
    if ! "$build/$target" -max_total_time="$budget" -max_len=4096 -timeout=10 -rss_limit_mb=2048 \
        -artifact_prefix="$build/$target-" -print_final_stats=1 "$work" "Tests/Fuzz/corpus/$target" \
        2>"$build/$target.log"; then
        echo "$target: found a problem; see $build/$target.log and $build/$target-crash-*"
        status=1
    fi
    grep -E "stat::number_of_executed_units|stat::peak_rss_mb|cov:" "$build/$target.log" | tail -3 || true
done
exit $status
