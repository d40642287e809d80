#!/usr/bin/env bash
# The live page of `runner watch --listen` in a real browser (headless chromium, driven over its
# DevTools protocol by browser.py): loaded while a slow job runs, the rendered DOM holds the job's
# key and phase and the page's event stream is connected; without a reload, once the job ended the
# page shows it among the finished. With scripts off the page is a snapshot of the same. A watcher
# with --listen-token is opened once at /?token=T: the page is shown at / (the token gone from the
# address, kept in an HttpOnly cookie) and its event stream connects with that cookie. Logged in
# so, the page itself may submit a job with the cookie; pages of the same site but another origin
# (another port, a sibling name) may not.
#
#   RUNNER_BIN=.build/debug/runner bash Tests/Live/page-in-chromium.sh [SCREENSHOT.png]
#
# With SCREENSHOT, a picture of the page while the job runs is written there.
set -euo pipefail
cd "$(dirname "$0")/../.."
runner=${RUNNER_BIN:-.build/debug/runner}
screenshot=${1:-}
browser=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$browser" ]; then
    echo "page-in-chromium: chromium is not installed (Debian's chromium package)"
    exit 1
fi

work=$(mktemp -d)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

fail() {
    echo "page-in-chromium: FAILED: $*"
    echo "--- watcher log"; cat "$work/watch.err" || true
    exit 1
}

wait_for() {  # wait_for SECONDS COMMAND...
    local until=$((SECONDS + $1)); shift
    until "$@"; do
        [ $SECONDS -lt $until ] || return 1
        sleep 0.1
    done
}

"$runner" fixture-server --port 0 > "$work/fixture.out" 2>&1 &
pids+=($!)
wait_for 10 grep -q "listening on" "$work/fixture.out" || fail "the fixture server did not start"
base=$(grep -o 'http://127.0.0.1:[0-9]*' "$work/fixture.out" | head -1)

"$runner" watch --spool "$work/spool" --out "$work/out" --listen 127.0.0.1:0 2> "$work/watch.err" &
pids+=($!)
wait_for 10 grep -q "live page and API at" "$work/watch.err" || fail "the watcher did not serve"
page=$(grep -o 'http://127.0.0.1:[0-9]*/' "$work/watch.err" | head -1)

cat > "$work/slow.json" <<EOF
{"kind": "entry", "key": "page:slow", "id": "imgly.A.1", "url": "$base/entries/{id}.json?delay=12000", "timeout": 30}
EOF
"$runner" submit --spool "$work/spool" "$work/slow.json" > /dev/null

api_has() {  # api_has PYTHON-CONDITION-ON-status
    python3 - "$page" "$1" <<'EOF'
import json, sys, urllib.request
status = json.load(urllib.request.urlopen(sys.argv[1] + "api/status", timeout=5))
sys.exit(0 if eval(sys.argv[2]) else 1)
EOF
}
wait_for 15 api_has 'any(j["key"] == "page:slow" and j.get("phase") == "running" for j in status["running"])' \
    || fail "the job never ran"

browse() {  # browse [browser.py options...]
    python3 Tests/Live/browser.py --browser "$browser" --profile "$work/profile" --url "$page" "$@" \
        2> "$work/browser.err" || { cat "$work/browser.err"; fail "the page did not come to show it"; }
}

# One page, loaded while the job runs and never reloaded: first the running job with its phase,
# then (the page follows the event stream) the job among the finished.
running='document.querySelector("#running tr[data-key=\"page:slow\"] td.phase") && document.getElementById("live").className === "on" && document.body.hasAttribute("data-updated")'
finished='document.querySelector("#finished tr[data-key=\"page:slow\"] td.succeeded") && !document.getElementById("running")'
browse --timeout 30 --step "$running" "$work/running.html" --step "$finished" "$work/after.html" ${screenshot:+--screenshot "$screenshot"}
grep -q '<tr data-key="page:slow"><td>page:slow</td><td>entry</td><td class="phase">running' "$work/running.html" \
    || fail "the running job and its phase are not in the rendered page"
echo "page-in-chromium: the running job and its phase are in the rendered page; its event stream is connected"
grep -q '<tr data-key="page:slow"><td>page:slow</td><td>entry</td><td class="succeeded">succeeded' "$work/after.html" \
    || fail "the finished job is not in the rendered page"
grep -q 'No job is running' "$work/after.html" || fail "the page still shows a running job"
echo "page-in-chromium: after it ended the page showed the job among the finished, without a reload"
if [ -n "$screenshot" ]; then echo "page-in-chromium: screenshot in $screenshot"; fi

# Scripts off: the snapshot the server drew, the job among the finished.
rm -rf "$work/profile"
browse --no-scripts --step 'document.querySelector("#finished")' "$work/noscript.html"
grep -q '<tr data-key="page:slow"><td>page:slow</td><td>entry</td><td class="succeeded">' "$work/noscript.html" \
    || fail "without scripts the page shows no finished job"
grep -q 'data-updated="' "$work/noscript.html" && fail "scripts were meant to be off"
grep -q 'id="live">snapshot' "$work/noscript.html" || fail "without scripts the page should say it is a snapshot"
echo "page-in-chromium: with scripts off the page is a snapshot of the same; passed"

# With a token: opened once at /?token=T, the page comes at / with its event stream connected.
token=$(python3 -c 'import secrets; print(secrets.token_hex(16))')
printf '%s\n' "$token" > "$work/token"
chmod 600 "$work/token"
"$runner" watch --spool "$work/spool2" --out "$work/out2" --listen 127.0.0.1:0 --listen-token "$work/token" 2> "$work/watch2.err" &
pids+=($!)
wait_for 10 grep -q "live page and API at" "$work/watch2.err" || fail "the watcher with a token did not serve"
page2=$(grep -o 'http://127.0.0.1:[0-9]*/' "$work/watch2.err" | head -1)
code=$(python3 -c 'import sys, urllib.request, urllib.error
try: print(urllib.request.urlopen(sys.argv[1], timeout=5).status)
except urllib.error.HTTPError as e: print(e.code)' "$page2")
[ "$code" = 401 ] || fail "without the token the page answered $code, not 401"
rm -rf "$work/profile"
python3 Tests/Live/browser.py --browser "$browser" --profile "$work/profile" --url "${page2}?token=$token" \
    --step 'document.getElementById("live").className === "on" && location.search === "" && location.pathname === "/"' "$work/token.html" \
    2> "$work/browser.err" || { cat "$work/browser.err"; fail "the page did not open with the token"; }
grep -q 'id="live"' "$work/token.html" || fail "the page with a token was not rendered"
grep -q "$token" "$work/token.html" && fail "the token is in the rendered page"
echo "page-in-chromium: opened once with /?token=, the page came at / without it, its event stream connected by the cookie; passed"

# Cross-site request forgery: the browser is logged in to the page (its cookie set) as
# runner.example.com; pages of the same site but another origin make it post jobs to the page's
# API: one on another port of the same host, one on a sibling name (evil.example.com). Both names
# lead to loopback in this browser only. The cookie goes with their requests (SameSite is a site
# boundary, not an origin), and nothing may be queued. The page itself may.
port2=${page2#http://127.0.0.1:}; port2=${port2%/}
mkdir -p "$work/attack"
cat > "$work/attack/serve.py" <<'PY'
import http.server, sys
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), lambda *a: http.server.SimpleHTTPRequestHandler(*a, directory=sys.argv[1]))
print(server.server_address[1], flush=True)
server.serve_forever()
PY
python3 "$work/attack/serve.py" "$work/attack" > "$work/attack.port" 2> "$work/attack.err" &
pids+=($!)
wait_for 10 grep -q '[0-9]' "$work/attack.port" || fail "the attacking pages were not served"
attack=$(head -1 "$work/attack.port")
cat > "$work/attack/csrf.html" <<EOF2
<!doctype html><title>attacking</title>
<script>
// The job names the page that sent it (its host and port).
var from = location.host;
fetch("http://runner.example.com:$port2/api/jobs?name=csrf-fetch.json", {
  method: "POST", mode: "no-cors", credentials: "include",
  body: '{"kind": "image", "key": "csrf:fetch:' + from + '", "url": "$base/images/png.png"}'
}).then(function () { document.title = "sent"; }, function (error) { document.title = "fetch failed: " + error; });
</script>
EOF2
own='{"kind": "image", "key": "page:own", "url": "'"$base"'/images/png.png"}'
rm -rf "$work/profile"
python3 Tests/Live/browser.py --browser "$browser" --profile "$work/profile" --timeout 20 \
    --browser-arg "--host-resolver-rules=MAP runner.example.com 127.0.0.1, MAP evil.example.com 127.0.0.1" \
    --url "http://runner.example.com:$port2/?token=$token" \
    --step 'document.getElementById("live").className === "on" && location.pathname === "/"' "$work/csrf-login.html" \
    --step "(window.sent || (window.sent = fetch('/api/jobs?name=own.json', {method: 'POST', body: JSON.stringify($own)}).then(function (r) { document.title = 'own: ' + r.status; }))) && document.title === 'own: 202'" "$work/csrf-own.html" \
    --step "navigate:http://runner.example.com:$attack/csrf.html" "$work/csrf-port.html" \
    --step 'document.title === "sent"' "$work/csrf-port-sent.html" \
    --step "navigate:http://evil.example.com:$attack/csrf.html" "$work/csrf-sibling.html" \
    --step 'document.title === "sent"' "$work/csrf-sibling-sent.html" \
    2> "$work/browser.err" || { cat "$work/browser.err"; tail -5 "$work"/csrf-*.html; fail "the forgery pages did not run"; }
wait_for 20 grep -rqsE '"key": ?"page:own"' "$work/out2/results" || fail "the page's own submission was not run"
sleep 1
forged=$(grep -rhosE 'csrf:[a-z]+:[a-z.]+:[0-9]+' "$work/spool2" "$work/out2" | sort -u | tr '\n' ' ' || true)
[ -z "$forged" ] || fail "pages of another origin queued jobs with the browser's cookie: $forged"
echo "page-in-chromium: the page itself submitted with its cookie; pages on another port and on a sibling name could not; passed"
