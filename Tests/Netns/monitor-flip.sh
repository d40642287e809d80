#!/usr/bin/env bash
# Proves on the real kernel that the connectivity monitor flips within 100 ms of a link change.
#
# Two network namespaces of its own (client and server), joined by a veth pair, no default
# route in either; the root namespace is never touched. `runner connectivity ADDRESS --watch`
# runs in the client namespace for an IPv4 and an IPv6 address of the server, while the script
# takes the link down and up both ways: the client end set down (the kernel removes the routes),
# and the server end set down (the client end loses carrier, its IPv4 routes stay). Each flip
# must be reported within LIMIT_MS (default 100) of the moment just before the `ip` command;
# the polling fallback (`--polling`) is measured too, against POLL_LIMIT_MS (default 200).
#
# The veth ends get distinct interface indexes on purpose. The kernel publishes a carrier change
# (operstate, IFF_RUNNING, the routes' linkdown flag, the RTM_NEWLINK event) from its linkwatch
# work, which is immediate for "urgent" devices (a veth whose peer has another index) but
# otherwise runs at most once a second: two namespaces that each number their veth 2 would see
# the carrier loss up to 1 s late, in the kernel itself, whatever the monitor does.
#
# Usage: Tests/Netns/monitor-flip.sh   (as root; RUNNER_BIN defaults to .build/debug/runner)
# Exit: 0 passed or skipped (prints "SKIP: reason"), 1 failed.

set -u

RUNNER_BIN=${RUNNER_BIN:-.build/debug/runner}
LIMIT_MS=${LIMIT_MS:-100}
POLL_LIMIT_MS=${POLL_LIMIT_MS:-200}

source "$(dirname "$0")/namespaces.bash"
[ -x "$RUNNER_BIN" ] || fail "no runner binary at $RUNNER_BIN (build it, or set RUNNER_BIN)"
make_namespaces 213

# MARK: - Helpers


# Milliseconds since the epoch of a line "2026-11-22T10:00:00.123Z state".
line_ms() { date -u -d "${1%% *}" +%s%3N; }

# Waits (bounded; this only synchronises, it measures nothing) until FILE has N lines.
wait_lines() {
    local file=$1 count=$2 deadline=$(($(now_ms) + 3000))
    while [ "$(wc -l <"$file")" -lt "$count" ]; do
        [ "$(now_ms)" -lt "$deadline" ] || return 1
        sleep 0.01
    done
}

ROWS=()
FAILED=0

# Runs one change: "label" "expected state" command…; checks every watcher's next line.
flip() {
    local label=$1 expected=$2
    shift 2
    local before=() file
    for file in "${FILES[@]}"; do before+=("$(wc -l <"$file")"); done
    local t0 t1
    t0=$(now_ms)
    "$@" || fail "command failed: $*"
    t1=$(now_ms)
    local i
    for i in "${!FILES[@]}"; do
        file=${FILES[$i]}
        local want=$((before[i] + 1)) target=${TARGETS[$i]} status latency line
        if ! wait_lines "$file" "$want"; then
            ROWS+=("$(printf '%-9s %-26s %-22s %-12s %9s %7s  %s' "$MODE" "$label" "$target" "$expected" "-" "$((t1 - t0))" "FAIL (no change reported)")")
            FAILED=1
            continue
        fi
        line=$(sed -n "${want}p" "$file")
        latency=$(($(line_ms "$line") - t0))
        status=ok
        if [ "${line#* }" != "$expected" ]; then
            status="FAIL (reported ${line#* })"
        elif [ "$latency" -lt 0 ]; then
            status="FAIL (reported before the change)"
        elif [ "$latency" -gt "$LIMIT" ]; then
            status="FAIL (over ${LIMIT} ms)"
        fi
        [ "$status" = ok ] || FAILED=1
        ROWS+=("$(printf '%-9s %-26s %-22s %-12s %9s %7s  %s' "$MODE" "$label" "$target" "$expected" "$latency" "$((t1 - t0))" "$status")")
    done
}

# MARK: - Runs

run_mode() {
    MODE=$1
    LIMIT=$2
    local options=()
    [ "$MODE" = polling ] && options=(--polling)
    TARGETS=("$V4_SERVER" "$V6_SERVER")
    FILES=()
    local target file
    for target in "${TARGETS[@]}"; do
        file="$WORK/$MODE-${target//:/_}.log"
        : >"$file"
        ip netns exec "$CLIENT" "$RUNNER_BIN" connectivity "$target" --watch 60 "${options[@]}" >"$file" 2>"$file.err" &
        BACKGROUND+=($!)
        FILES+=("$file")
    done
    for file in "${FILES[@]}"; do
        wait_lines "$file" 1 || fail "$MODE: the watcher printed nothing ($(cat "$file.err"))"
        [ "$(sed -n 1p "$file" | cut -d' ' -f2)" = reachable ] || fail "$MODE: the server is not reachable at the start: $(cat "$file")"
    done

    flip "client link set down" unreachable C link set veth-c down
    flip "client link set up" reachable C link set veth-c up
    flip "server down (no carrier)" unreachable S link set veth-s down
    flip "server up (carrier back)" reachable S link set veth-s up

    for pid in "${BACKGROUND[@]}"; do kill "$pid" 2>/dev/null; done
    wait 2>/dev/null
    BACKGROUND=()
    for file in "${FILES[@]}"; do
        if [ "$(wc -l <"$file")" -ne 5 ]; then
            ROWS+=("$MODE: $(basename "$file"): expected 5 lines (start + 4 flips), got: $(tr '\n' '|' <"$file")")
            FAILED=1
        fi
    done
}

run_mode netlink "$LIMIT_MS"
run_mode polling "$POLL_LIMIT_MS"

printf '%-9s %-26s %-22s %-12s %9s %7s  %s\n' mode change target reported "flip(ms)" "ip(ms)" result
for row in "${ROWS[@]}"; do echo "$row"; done
echo "flip(ms): from just before the ip command to the change the monitor reported; ip(ms): how long the command took."
echo "limits: netlink ${LIMIT_MS} ms, polling ${POLL_LIMIT_MS} ms"

if [ "$FAILED" -ne 0 ]; then
    echo "FAIL: the monitor missed a flip or was too slow"
    exit 1
fi
echo "PASS"
