#!/usr/bin/env bash
# Proves the address policy end to end on the real kernel, with the real binary: what a job, a
# redirect or a DNS answer can make the runner connect to.
#
# Two network namespaces of its own, joined by a veth pair, no default route in either; the root
# namespace is never touched and nothing is sent from it. The server namespace holds, on its veth:
#   169.254.169.254  a "metadata service" (link-local)
#   203.0.113.2      a "public" server that redirects (a documentation address, namespace-internal)
#   10.215.N.2       a "private" server
# and the client namespace a server on its own loopback (127.0.0.1:8082). Every server is a small
# Python HTTP server that logs each request it receives, so "nothing was sent" is checked on the
# server's side. In the client namespace, host names resolve through /etc/netns/CLIENT/hosts
# (which `ip netns exec` mounts over /etc/hosts), removed on exit: metadata.test names the
# link-local address, so a DNS answer cannot get around the policy.
#
# https→http redirects are refused too; that rule is tested in AddressPolicyTests (a TLS server
# the runner trusts cannot be set up here without changing the system's trust store).
#
# Usage: Tests/Netns/address-policy.sh   (as root; RUNNER_BIN defaults to .build/debug/runner)
# Exit: 0 passed or skipped (prints "SKIP: reason"), 1 failed.

set -u

RUNNER_BIN=${RUNNER_BIN:-.build/debug/runner}

source "$(dirname "$0")/namespaces.bash"
command -v python3 >/dev/null 2>&1 || fail "python3 is needed for the test servers"
[ -x "$RUNNER_BIN" ] || fail "no runner binary at $RUNNER_BIN (build it, or set RUNNER_BIN)"
case $RUNNER_BIN in /*) ;; *) RUNNER_BIN="$PWD/$RUNNER_BIN" ;; esac
make_namespaces 215

HOSTS_DIR=/etc/netns/$CLIENT
cleanup_all() {
    rm -rf "$HOSTS_DIR"
    rmdir /etc/netns 2>/dev/null
    cleanup_namespaces
}
trap cleanup_all EXIT

METADATA=169.254.169.254
PUBLIC=203.0.113.2
PRIVATE=$V4_SERVER
S addr add "$METADATA/16" dev veth-s || fail "cannot add the link-local address"
S addr add "$PUBLIC/24" dev veth-s || fail "cannot add the documentation address"
C addr add 169.254.1.1/16 dev veth-c || fail "cannot add the client's link-local address"
C addr add 203.0.113.1/24 dev veth-c || fail "cannot add the client's documentation address"

mkdir -p "$HOSTS_DIR"
printf '127.0.0.1 localhost\n%s metadata.test\n%s public.test\n%s private.test\n' "$METADATA" "$PUBLIC" "$PRIVATE" >"$HOSTS_DIR/hosts"

cat >"$WORK/server.py" <<'EOF'
# A server that logs every request line and answers an entry object, or a 302 for /redirect?to=URL.
import http.server, json, sys, urllib.parse
host, port, log = sys.argv[1], int(sys.argv[2]), sys.argv[3]
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        with open(log, "a") as f:
            f.write(self.path + "\n")
        url = urllib.parse.urlparse(self.path)
        if url.path == "/redirect":
            self.send_response(302)
            self.send_header("Location", urllib.parse.parse_qs(url.query)["to"][0])
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = json.dumps({"id": url.path.rsplit("/", 1)[-1].split(".")[0], "served": host}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
http.server.ThreadingHTTPServer.allow_reuse_address = True
server = http.server.ThreadingHTTPServer((host, port), Handler)
print("listening", flush=True)
server.serve_forever()
EOF

wait_for() {
    local deadline=$(($(now_ms) + 5000))
    until "$@"; do
        [ "$(now_ms)" -lt "$deadline" ] || return 1
        sleep 0.02
    done
}

# serve NAMESPACE HOST PORT NAME: the request log is $WORK/NAME.log
serve() {
    local ns=$1 host=$2 port=$3 name=$4
    : >"$WORK/$name.log"
    ip netns exec "$ns" python3 "$WORK/server.py" "$host" "$port" "$WORK/$name.log" >"$WORK/$name.out" 2>&1 &
    BACKGROUND+=($!)
    wait_for grep -qs listening "$WORK/$name.out" || fail "the $name server did not start: $(cat "$WORK/$name.out")"
}
serve "$SERVER" "$METADATA" 8080 metadata
serve "$SERVER" "$PUBLIC" 8080 public
serve "$SERVER" "$PRIVATE" 8081 private
serve "$CLIENT" 127.0.0.1 8082 loopback

FAILED=0
ROWS=()

requests() { wc -l <"$WORK/$1.log" | tr -d ' '; }
reset_logs() { local log; for log in metadata public private loopback; do : >"$WORK/$log.log"; done; }

# case NAME CLIENT URL EXPECT_STATUS ERROR_SUBSTRING SERVER_WITH_NO_REQUEST [runner options…]
case_run() {
    local name=$1 http=$2 url=$3 expect=$4 needle=$5 untouched=$6
    shift 6
    local dir="$WORK/case-$name-$http"
    mkdir -p "$dir"
    reset_logs
    printf '{"kind": "entry", "id": "e1", "key": "k", "url": "%s", "timeout": 3}\n' "$url" >"$dir/job.json"
    ip netns exec "$CLIENT" env -u http_proxy -u HTTP_PROXY -u https_proxy -u HTTPS_PROXY -u all_proxy -u ALL_PROXY \
        RUNNER_HTTP="$http" "$RUNNER_BIN" run "$dir/job.json" --out "$dir/out" --json "$@" >"$dir/stdout" 2>"$dir/stderr"
    local verdict
    verdict=$(python3 - "$dir/stdout" "$expect" "$needle" 2>"$dir/error" <<'EOF'
import json, sys
lines = [l for l in open(sys.argv[1]) if l.strip()]
if len(lines) != 1:
    print(f"FAIL (expected one record, got {len(lines)})"); sys.exit()
r = json.loads(lines[0])
problems = []
if r["status"] != sys.argv[2]: problems.append(f"status {r['status']}")
if sys.argv[3] and sys.argv[3] not in (r.get("error") or ""): problems.append(f"error {r.get('error')!r}")
print("FAIL (" + "; ".join(problems) + ")" if problems else "ok")
print((r.get("error") or "-"), file=sys.stderr)
EOF
    )
    if [ -n "$untouched" ] && [ "$(requests "$untouched")" != 0 ]; then
        verdict="FAIL (the $untouched server received: $(tr '\n' ' ' <"$WORK/$untouched.log"))"
    fi
    [ "$verdict" = ok ] || FAILED=1
    ROWS+=("$(printf '%-34s %-10s %-9s %s\n      error: %s' "$name" "$http" "$expect" "$verdict" "$(cat "$dir/error")")")
}

to() { python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1], safe=""))' "$1"; }

for http in curl urlsession; do
    case_run link-local-refused "$http" "http://$METADATA:8080/entries/{id}.json" failed \
        "a link-local address, refused unless allowed with --allow-host" metadata
    case_run link-local-by-name-refused "$http" "http://metadata.test:8080/entries/{id}.json" failed \
        "metadata.test ($METADATA): a link-local address" metadata
    case_run link-local-allowed "$http" "http://$METADATA:8080/entries/{id}.json" succeeded "" "" --allow-host "$METADATA"
    case_run allow-list-refuses-others "$http" "http://$PRIVATE:8081/entries/{id}.json" failed \
        "not matched by any --allow-host" private --allow-host "*.example.org"
    case_run private-allowed-by-default "$http" "http://$PRIVATE:8081/entries/{id}.json" succeeded "" ""
    case_run deny-private-refuses-10/8 "$http" "http://$PRIVATE:8081/entries/{id}.json" failed \
        "a private address, refused by --deny-private" private --deny-private
    case_run deny-private-by-name "$http" "http://private.test:8081/entries/{id}.json" failed \
        "private.test ($PRIVATE): a private address, refused by --deny-private" private --deny-private
    case_run redirect-public-to-private "$http" "http://$PUBLIC:8080/redirect?to=$(to "http://$PRIVATE:8081/entries/e1.json")" failed \
        "refused a redirect from a public address ($PUBLIC) to a private address" private
    case_run redirect-public-to-loopback "$http" "http://public.test:8080/redirect?to=$(to "http://127.0.0.1:8082/entries/e1.json")" failed \
        "refused a redirect from a public address ($PUBLIC) to a loopback address" loopback
    case_run redirect-public-to-link-local "$http" "http://$PUBLIC:8080/redirect?to=$(to "http://metadata.test:8080/entries/e1.json")" failed \
        "a link-local address, refused unless allowed with --allow-host" metadata
    case_run redirect-private-to-private "$http" "http://$PRIVATE:8081/redirect?to=$(to "http://127.0.0.1:8082/entries/e1.json")" succeeded "" ""
    case_run redirect-public-to-public "$http" "http://$PUBLIC:8080/redirect?to=$(to "http://public.test:8080/entries/e1.json")" succeeded "" ""
done

# watch: the same policy for a spool's jobs.
watch_case() {
    local http=$1 dir="$WORK/watch-$http"
    mkdir -p "$dir/spool"
    reset_logs
    ip netns exec "$CLIENT" env RUNNER_HTTP="$http" "$RUNNER_BIN" watch --spool "$dir/spool" --out "$dir/out" --json --deny-private \
        >"$dir/stdout" 2>"$dir/stderr" &
    local pid=$!
    BACKGROUND+=($pid)
    printf '{"kind": "entry", "id": "e1", "key": "w", "url": "http://%s:8081/entries/{id}.json", "timeout": 3}\n' "$PRIVATE" >"$dir/job.json"
    "$RUNNER_BIN" submit "$dir/job.json" --spool "$dir/spool" >/dev/null || fail "submit failed"
    wait_for grep -qs '"key":"w"' "$dir/stdout" || wait_for grep -qs '"key": "w"' "$dir/stdout"
    kill "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    local verdict=ok
    grep -q 'refused by --deny-private' "$dir/stdout" || verdict="FAIL (no refusal in: $(head -c 400 "$dir/stdout"))"
    [ "$(requests private)" = 0 ] || verdict="FAIL (the private server received a request)"
    [ "$verdict" = ok ] || FAILED=1
    ROWS+=("$(printf '%-34s %-10s %-9s %s' "watch-deny-private" "$http" failed "$verdict")")
}
watch_case curl
watch_case urlsession

printf '%-34s %-10s %-9s %s\n' case client expected verdict
for row in "${ROWS[@]}"; do echo "$row"; done
if [ "$FAILED" -ne 0 ]; then
    echo "FAIL: the runner reached an address its policy refuses, or refused one it allows"
    exit 1
fi
echo "PASS"
