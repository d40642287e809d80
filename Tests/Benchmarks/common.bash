# What the benchmark scripts share; sourced by them after they define say() and fail() and set
# $work (their temporary folder).

# A loopback port below the kernel's ephemeral range (so no outgoing connection holds it) that
# nobody answers on right now.
free_port() {
    local low port
    low=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
    [ "$low" -gt 12000 ] || low=32768
    for _ in $(seq 1 50); do
        port=$((10000 + RANDOM % (low - 10000)))
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then echo "$port"; return; fi
    done
    fail "no free loopback port found"
}

# Sets $runner: the binary given ($1, may be empty), else .build/release/runner, built first
# unless $2 is 0.
release_runner() {
    runner=$1
    if [ -n "$runner" ]; then
        [ -x "$runner" ] || fail "--runner $runner: not an executable file"
        return
    fi
    runner=.build/release/runner
    if [ "${2:-1}" -eq 1 ]; then
        say "building the runner in release"
        swift build -c release --product runner >"$work/build.log" 2>&1 || { cat "$work/build.log" >&2; fail "swift build -c release"; }
    fi
    [ -x "$runner" ] || fail "$runner is missing (drop --no-build)"
}

# Ends the processes whose pids are given (empty ones skipped), each with SIGTERM, and waits for
# them: for the scripts' clean-up traps.
stop_pids() {
    local pid
    for pid in "$@"; do
        if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
            kill -TERM "$pid" 2>/dev/null || true
            wait "$pid" 2>/dev/null || true
        fi
    done
}
