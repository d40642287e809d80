# Shared by the namespace tests: two network namespaces of the test's own (client and server),
# unique per run, joined by a veth pair, with no default route in either, removed on exit even
# after a failure. The root namespace's links, addresses and routes are never touched.
#
# Source it (it skips the test unless root with iproute2), then call `make_namespaces OCTET` (the second octet of the test's 10.OCTET.x.0/24
# and fd00:OCTET:x::/64 networks). It sets CLIENT, SERVER, WORK, V4_SERVER, V6_SERVER, NET, the
# helpers C / S (ip -n CLIENT / SERVER) and now_ms, and kills the pids in BACKGROUND on exit.
#
# The veth ends get distinct interface indexes on purpose: the kernel publishes a carrier change
# at once only for "urgent" devices (a veth whose peer has another index); two namespaces that
# each number their veth 2 would see a carrier loss up to 1 s late, in the kernel itself.

skip() { echo "SKIP: $*"; exit 0; }
fail() { echo "FAIL: $*" >&2; exit 1; }
now_ms() { date +%s%3N; }

[ "$(id -u)" -eq 0 ] || skip "network namespaces need root"
command -v ip >/dev/null 2>&1 || skip "iproute2 ('ip') is not installed"

BACKGROUND=()

cleanup_namespaces() {
    for pid in "${BACKGROUND[@]}"; do kill "$pid" 2>/dev/null; done
    wait 2>/dev/null
    [ -n "${CLIENT:-}" ] && ip netns del "$CLIENT" 2>/dev/null
    [ -n "${SERVER:-}" ] && ip netns del "$SERVER" 2>/dev/null
    [ -n "${WORK:-}" ] && rm -rf "$WORK"
}

C() { ip -n "$CLIENT" "$@"; }
S() { ip -n "$SERVER" "$@"; }

make_namespaces() {
    local octet=$1

    CLIENT="rn-c-$$-$RANDOM"
    SERVER="rn-s-$$-$RANDOM"
    WORK=$(mktemp -d)
    trap cleanup_namespaces EXIT
    trap 'exit 1' INT TERM

    if ! ip netns add "$CLIENT" 2>"$WORK/err"; then
        CLIENT=""
        skip "cannot create a network namespace: $(cat "$WORK/err")"
    fi
    ip netns add "$SERVER" || fail "cannot create the server namespace"

    NET=$((RANDOM % 250 + 1))
    V4_SERVER="10.$octet.$NET.2"
    V6_SERVER="fd00:$octet:$NET::2"

    C link add veth-c index 3 type veth peer name veth-s index 4 netns "$SERVER" || fail "cannot create the veth pair"
    # Keep static IPv6 addresses when a link goes down, so that "up" restores the routes.
    ip netns exec "$CLIENT" sysctl -qw net.ipv6.conf.veth-c.keep_addr_on_down=1
    ip netns exec "$SERVER" sysctl -qw net.ipv6.conf.veth-s.keep_addr_on_down=1
    C addr add "10.$octet.$NET.1/24" dev veth-c
    S addr add "$V4_SERVER/24" dev veth-s
    C -6 addr add "fd00:$octet:$NET::1/64" dev veth-c nodad
    S -6 addr add "$V6_SERVER/64" dev veth-s nodad
    for ns in "$CLIENT" "$SERVER"; do ip -n "$ns" link set lo up; done
    C link set veth-c up
    S link set veth-s up

    for ns in "$CLIENT" "$SERVER"; do
        if [ -n "$(ip -n "$ns" route show default)$(ip -n "$ns" -6 route show default)" ]; then
            fail "namespace $ns has a default route"
        fi
    done
}
