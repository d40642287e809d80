#!/usr/bin/env bash
# The binary to ship: builds and installs runner under a temporary prefix with .ci/install.sh,
# then checks that
#   - ldd lists no Swift runtime or Foundation library, only the system's;
#   - with a cleared environment (env -i), from a folder outside the checkout, `runner demo`
#     runs every demo job and `runner --version` names libcurl and libcrypto for SHA-256;
#   - with libpq hidden (a bind mount in a mount namespace of one command), `--version` says so
#     and `--queue` is one line, exit 2;
#   - the man page and the completion scripts are installed and pass mandoc and the shells.
# A release build takes a minute or two. $SWIFT names another swift driver.
set -euo pipefail
checkout=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix="$work/prefix"

fail() { echo "static-binary: FAIL: $*" >&2; exit 1; }

bash "$checkout/.ci/install.sh" "$prefix" > "$work/install.log" 2>&1 || { tail -20 "$work/install.log"; fail "install.sh failed"; }
runner="$prefix/bin/runner"
[ -x "$runner" ] || fail "no $runner"

libraries=$(ldd "$runner")
echo "$libraries" | grep -Ei 'libswift|libFoundation|libdispatch|libBlocksRuntime|lib_Foundation|libicu.*swift' \
    && fail "the binary needs Swift libraries at run time"
echo "$libraries" | grep -q 'libcurl' || fail "the binary does not link the system's libcurl"
echo "$libraries" | grep -q 'not found' && fail "a library is missing: $libraries"

outside="$work/elsewhere"
mkdir -p "$outside"
cd "$outside"
version=$(env -i "$runner" --version) || fail "runner --version failed"
echo "$version" | grep -Eq '^libcurl [0-9.]+, TLS ' || fail "runner --version does not name libcurl: $version"
# libcurl's OpenSSL build brings libcrypto, and the installed binary hashes payloads with it.
echo "$version" | grep -Eq '^sha256: libcrypto\.so\.[0-9.]+ \(OpenSSL\)$' || fail "runner --version does not hash with libcrypto: $version"
# Without libpq (hidden by a bind mount in a mount namespace of this one command): --version
# says so, and --queue is one line, exit 2.
# (awk reads to the end: leaving early would kill ldconfig with SIGPIPE, which pipefail and set -e
# turn into a silent exit 141.)
libpq=$(ldconfig -p | awk '/libpq\.so\.5 / && !found { print $NF; found = 1 }')
if [ -n "$libpq" ] && unshare -m --propagation private true 2>/dev/null; then
    without() { unshare -m --propagation private sh -c 'mount --bind /dev/null "$1" && shift && exec env -i "$@"' sh "$libpq" "$@"; }
    without "$runner" --version | grep -q '^libpq: not loaded' || fail "runner --version does not say libpq is missing"
    code=0
    message=$(without "$runner" status --queue postgresql:///jobs 2>&1) || code=$?
    [ "$code" -eq 2 ] || fail "without libpq, status --queue exits $code: $message"
    [ "$(echo "$message" | wc -l)" -eq 1 ] && echo "$message" | grep -q 'libpq.so.5 could not be loaded' \
        || fail "without libpq, not one line naming it: $message"
else
    echo "static-binary: libpq not installed or no mount namespaces here; the missing-libpq check is skipped"
fi
env -i "$runner" demo > demo.log 2>&1 || { cat demo.log; fail "runner demo failed"; }
grep -Eq '^[0-9]+ jobs: [0-9]+ succeeded[.,]' demo.log || { cat demo.log; fail "the demo did not succeed"; }
grep -q 'failed\|offline\|timedOut' demo.log && { cat demo.log; fail "a demo job did not succeed"; }
[ -d out/results ] || fail "the demo wrote no out/results in the current folder"

man="$prefix/share/man/man1/runner.1"
lint=$(mandoc -T lint -W warning "$man" 2>&1) || fail "mandoc: $lint"
bash -n "$prefix/share/bash-completion/completions/runner" || fail "bash -n"
zsh -n "$prefix/share/zsh/site-functions/_runner" || fail "zsh -n"
fish -n "$prefix/share/fish/vendor_completions.d/runner.fish" || fail "fish -n"

size=$(du -h "$runner" | cut -f1)
echo "static-binary: ok ($size, $(echo "$version" | head -1); $(echo "$libraries" | wc -l) system libraries; demo: $(grep -E '^[0-9]+ jobs:' demo.log | cut -d. -f1))"
