#!/usr/bin/env bash
# Proves the connectivity policy end to end on the real kernel, with the real binary.
#
# Two network namespaces of its own (client and server), joined by a veth pair, no default
# route in either; the root namespace is never touched. `runner fixture-server` serves in the
# server namespace (on an IPv4 and an IPv6 address); `runner run --json` runs one image job
# (timeout 2 s, noticeAfter 0.5 s) in the client namespace while the script sets the client
# end of the link down and up:
#
#   up          link up              → succeeded, waitedForNetworkMs < 100, no notice, exit 0
#   down        link down throughout → offline, durationMs 1900–2600, notice, exit 4 (nothing was fetched)
#   down→up     link up 1 s after the job started
#                                    → succeeded, waitedForNetworkMs 900–1400, notice, exit 0,
#                                      and the fetch started within FLIP_LIMIT_MS of the link
#   down→up v6  the same against the server's IPv6 address (with RUNNER_HTTP=urlsession,
#               URLSession on Linux fails IPv6-literal URLs with NSURLErrorBadURL, a
#               Foundation bug: that fetch failure is reported as a known issue; the policy
#               is still checked)
#
# The verdicts come from the result records on stdout and the notices on stderr (each stamped
# with the time it arrived). The veth ends get distinct interface indexes (see monitor-flip.sh).
#
# Usage: Tests/Netns/runner-offline.sh   (as root; RUNNER_BIN defaults to .build/debug/runner)
# Exit: 0 passed or skipped (prints "SKIP: reason"), 1 failed.

set -u

RUNNER_BIN=${RUNNER_BIN:-.build/debug/runner}
FLIP_LIMIT_MS=${FLIP_LIMIT_MS:-150}
PORT=8080

source "$(dirname "$0")/namespaces.bash"
command -v python3 >/dev/null 2>&1 || fail "python3 is needed to read the result records"
[ -x "$RUNNER_BIN" ] || fail "no runner binary at $RUNNER_BIN (build it, or set RUNNER_BIN)"
case $RUNNER_BIN in /*) ;; *) RUNNER_BIN="$PWD/$RUNNER_BIN" ;; esac
make_namespaces 214

# MARK: - Fixture servers (server namespace)


# Polls (bounded; this only synchronises, it measures nothing) until the command succeeds.
wait_for() {
    local deadline=$(($(now_ms) + 5000))
    until "$@"; do
        [ "$(now_ms)" -lt "$deadline" ] || return 1
        sleep 0.01
    done
}

for host in "$V4_SERVER" "$V6_SERVER"; do
    log="$WORK/server-${host//:/_}.log"
    ip netns exec "$SERVER" "$RUNNER_BIN" fixture-server --host "$host" --port "$PORT" >"$log" 2>&1 &
    BACKGROUND+=($!)
    wait_for grep -qs "Fixture server listening on http://" "$log" \
        || fail "the fixture server on $host did not start: $(cat "$log")"
done

# MARK: - Scenarios (client namespace)

ROWS=()
FAILED=0

# scenario NAME HOST LINK: LINK is "up", "down" or "down-then-up".
scenario() {
    local name=$1 host=$2 link=$3
    local dir="$WORK/$name" url_host=$host
    [[ $host == *:* ]] && url_host="[$host]"
    mkdir -p "$dir"
    cat >"$dir/job.json" <<EOF
{"kind": "image", "key": "img-$name", "url": "http://$url_host:$PORT/images/png.png", "timeout": 2, "noticeAfter": 0.5}
EOF
    [ "$link" = up ] || C link set veth-c down || fail "cannot set the client link down"

    local up_pid=
    if [ "$link" = down-then-up ]; then
        # About a second after the job started, the link comes up: half a second after its
        # "no network connection" notice, which comes half a second in (noticeAfter 0.5).
        (
            wait_for grep -qs "no network connection" "$dir/stderr" || exit 1
            sleep 0.5
            now_ms >"$dir/up-at"
            C link set veth-c up
        ) &
        up_pid=$!
    fi

    # stdout: the records; stderr: each line stamped with the time it arrived.
    { ip netns exec "$CLIENT" env -u http_proxy -u HTTP_PROXY -u https_proxy -u HTTPS_PROXY -u all_proxy -u ALL_PROXY \
        "$RUNNER_BIN" run "$dir/job.json" --out "$dir/out" --json 2>&1 >"$dir/stdout" \
        | while IFS= read -r line; do echo "$(now_ms) $line"; done >"$dir/stderr"; }
    local rc=${PIPESTATUS[0]}

    [ -z "$up_pid" ] || wait "$up_pid" || echo "note: the link-up subshell failed" >>"$dir/stderr"
    C link set veth-c up
    # Let the routes come back before the next scenario.
    wait_for ip netns exec "$CLIENT" ip route get "$host" >/dev/null 2>&1 || fail "no route to $host after link up"

    local row
    row=$(python3 - "$name" "$host" "$link" "$rc" "$dir" "$FLIP_LIMIT_MS" <<'EOF'
import json, os, sys
from datetime import datetime

name, host, link, folder = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[5]
rc, flip_limit = int(sys.argv[4]), int(sys.argv[6])

def ms(stamp):
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() * 1000

problems = []
records = [json.loads(line) for line in open(os.path.join(folder, "stdout")) if line.strip()]
err_lines = [line.rstrip("\n") for line in open(os.path.join(folder, "stderr"))]
if len(records) != 1:
    print(f"{name:<12} {'-':<10} {'-':>8} {'-':>8} {'-':>8} {'-':>8}  FAIL (expected 1 record, got {len(records)}; "
          f"exit {rc}; stderr: {' | '.join(err_lines)})")
    sys.exit(1)
r = records[0]
status, waited, duration = r["status"], r["waitedForNetworkMs"], r["durationMs"]
started = ms(r["startedAt"])

notices = [line for line in err_lines if line.split(" ", 1)[1] == f"runner: {r['key']}: no network connection"]
notice_ms = round(int(notices[0].split(" ", 1)[0]) - started) if notices else None
# With --json, the run's closing counts go to stderr too ("runner: 1 job: 1 succeeded. …").
summaries = [line for line in err_lines if line.split(" ", 1)[1].startswith("runner: 1 job: ")]
others = [line for line in err_lines if line not in notices and line not in summaries]
if others:
    problems.append("unexpected stderr: " + " | ".join(others))
if len(notices) > 1:
    problems.append(f"{len(notices)} notices")
if r["attempts"] != 1:
    problems.append(f"attempts {r['attempts']}")

lag = None
known = None
if link == "up":
    if status != "succeeded": problems.append(f"status {status} ({r.get('error')})")
    if not waited < 100: problems.append(f"waited {waited} ms")
    if notices: problems.append("a notice was printed")
    if rc != 0: problems.append(f"exit {rc}")
elif link == "down":
    if status != "offline": problems.append(f"status {status} ({r.get('error')})")
    if not 1900 <= duration <= 2600: problems.append(f"duration {duration} ms")
    if not notices: problems.append("no notice")
    if rc != 4: problems.append(f"exit {rc} (nothing was fetched: 4)")
else:
    # swift-corelibs-foundation's URLSession fails every IPv6-literal URL at once with
    # NSURLErrorBadURL (swiftlang/swift-corelibs-foundation#5496, fixed upstream by #5498).
    # The policy is still measured (the fetch must start when the link comes up); the fetch
    # itself is then reported as a known failure instead of a failed test.
    # Only the URLSession client has this bug; the default curl client must fetch it.
    if status == "failed" and "IPv6 address literal" in (r.get("error") or "") and ":" in host \
            and __import__("os").environ.get("RUNNER_HTTP") == "urlsession":
        known = "fetch failed: IPv6-literal URLs are a known URLSession bug (corelibs-foundation#5496)"
        if rc != 4: problems.append(f"exit {rc} (nothing was fetched: 4)")
    else:
        if status != "succeeded": problems.append(f"status {status} ({r.get('error')})")
        if rc != 0: problems.append(f"exit {rc}")
    if not 900 <= waited <= 1400: problems.append(f"waited {waited} ms")
    if not notices: problems.append("no notice")
    try:
        up_at = int(open(os.path.join(folder, "up-at")).read())
        # How long after the `ip link set up` the fetch started (slightly under: the attempt
        # starts a few ms after startedAt).
        lag = round(started + waited - up_at)
        if not -50 <= lag <= flip_limit: problems.append(f"fetch started {lag} ms after link up")
    except (OSError, ValueError):
        problems.append("the link was not set up")
if notices and not 450 <= notice_ms <= 900:
    problems.append(f"notice at {notice_ms} ms")

def show(value):
    return "-" if value is None else str(value)

verdict = "FAIL (" + "; ".join(problems) + ")" if problems else f"ok, known issue ({known})" if known else "ok"
print(f"{name:<12} {status:<10} {waited:>8} {duration:>8} {show(notice_ms):>8} {show(lag):>8}  {verdict}")
sys.exit(1 if problems else 0)
EOF
    ) || FAILED=1
    ROWS+=("$row")
}

scenario up "$V4_SERVER" up
scenario down "$V4_SERVER" down
scenario down-up "$V4_SERVER" down-then-up
scenario down-up-v6 "$V6_SERVER" down-then-up

printf '%-12s %-10s %8s %8s %8s %8s  %s\n' scenario status "waited" "duration" "notice" "up→fetch" verdict
for row in "${ROWS[@]}"; do echo "$row"; done
echo "waited: waitedForNetworkMs; duration: durationMs; notice: ms from startedAt to the 'no network connection'"
echo "line on stderr; up→fetch: ms from 'ip link set up' to the start of the fetch (limit ${FLIP_LIMIT_MS} ms)."

if [ "$FAILED" -ne 0 ]; then
    echo "FAIL: the runner did not follow the policy on the real kernel"
    exit 1
fi
echo "PASS"
