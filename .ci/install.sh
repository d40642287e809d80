#!/usr/bin/env bash
# Builds runner as one binary that needs no Swift toolchain at run time (the Swift runtime and
# Foundation linked in; the system's libc and libcurl stay shared) and installs it under PREFIX
# with its man page and shell completions:
#
#   bash .ci/install.sh [PREFIX]        (default /usr/local)
#
#   PREFIX/bin/runner
#   PREFIX/share/man/man1/runner.1
#   PREFIX/share/bash-completion/completions/runner
#   PREFIX/share/zsh/site-functions/_runner
#   PREFIX/share/fish/vendor_completions.d/runner.fish
#
# Building needs the Swift toolchain and libcurl's development files (Debian:
# libcurl4-openssl-dev): FoundationNetworking's static archive links libcurl. $SWIFT names
# another swift driver; $RUNNER_SCRATCH_PATH another build folder than .build (so that the build
# can run while another swift command uses .build).
set -euo pipefail
prefix=${1:-/usr/local}
swift=${SWIFT:-swift}
cd "$(dirname "$0")/.."

flags=(-c release --static-swift-stdlib -Xlinker -lcurl ${RUNNER_SCRATCH_PATH:+--scratch-path "$RUNNER_SCRATCH_PATH"})
if ! "$swift" build "${flags[@]}" --product runner; then
    echo "install: the build failed; the static build links libcurl: is its development package installed (Debian: apt-get install libcurl4-openssl-dev)?" >&2
    exit 1
fi
binary="$("$swift" build "${flags[@]}" --show-bin-path)/runner"

install -d "$prefix/bin" "$prefix/share/man/man1" "$prefix/share/bash-completion/completions" \
    "$prefix/share/zsh/site-functions" "$prefix/share/fish/vendor_completions.d"
install -m 755 "$binary" "$prefix/bin/runner"
strip "$prefix/bin/runner" 2>/dev/null || true
"$prefix/bin/runner" help --man > "$prefix/share/man/man1/runner.1"
"$prefix/bin/runner" completions bash > "$prefix/share/bash-completion/completions/runner"
"$prefix/bin/runner" completions zsh > "$prefix/share/zsh/site-functions/_runner"
"$prefix/bin/runner" completions fish > "$prefix/share/fish/vendor_completions.d/runner.fish"
echo "installed $prefix/bin/runner ($("$prefix/bin/runner" --version | head -1)), its man page and completions for bash, zsh and fish"
