#!/usr/bin/env python3
"""Drive headless chromium over the DevTools protocol (standard library only): open URL once,
then for each step wait until its JavaScript expression is true in the page (the page is never
reloaded) and write the rendered DOM to the step's file; a screenshot after the first step if asked.

    browser.py --browser chromium --profile DIR --url URL --step 'EXPRESSION' FILE [--step ...]
               [--timeout 20] [--screenshot FILE] [--no-scripts] [--browser-arg ARG ...]

A step 'navigate:URL' goes to URL (in the same browser, its cookies kept) and waits until it
is loaded. --browser-arg passes ARG to chromium (e.g. --host-resolver-rules=...).

Exit 0 when every step came true; exit 1, saying which did not (its file holds the DOM then).
"""
import argparse
import base64
import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request

parser = argparse.ArgumentParser()
parser.add_argument("--browser", required=True)
parser.add_argument("--url", required=True)
parser.add_argument("--step", nargs=2, action="append", metavar=("EXPRESSION", "FILE"), required=True)
parser.add_argument("--timeout", type=float, default=20)
parser.add_argument("--screenshot")
parser.add_argument("--no-scripts", action="store_true")
parser.add_argument("--profile", required=True)
parser.add_argument("--browser-arg", action="append", default=[])
args = parser.parse_args()


class WebSocket:
    """A client of RFC 6455, text frames only: enough for the DevTools protocol."""

    def __init__(self, url):
        match = re.match(r"ws://([^/:]+):(\d+)(/.*)", url)
        host, port, path = match.group(1), int(match.group(2)), match.group(3)
        self.sock = socket.create_connection((host, port), timeout=30)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall(
            f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n".encode())
        head = b""
        while b"\r\n\r\n" not in head:
            part = self.sock.recv(1)
            if not part:
                raise RuntimeError("the browser closed the DevTools connection")
            head += part
        if b" 101 " not in head.split(b"\r\n")[0]:
            raise RuntimeError("no WebSocket upgrade: " + head.decode(errors="replace"))

    def send(self, text):
        payload = text.encode()
        header = bytes([0x81])
        if len(payload) < 126:
            header += bytes([0x80 | len(payload)])
        elif len(payload) < 65536:
            header += bytes([0x80 | 126]) + len(payload).to_bytes(2, "big")
        else:
            header += bytes([0x80 | 127]) + len(payload).to_bytes(8, "big")
        mask = os.urandom(4)
        self.sock.sendall(header + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))

    def exactly(self, count):
        data = b""
        while len(data) < count:
            part = self.sock.recv(count - len(data))
            if not part:
                raise RuntimeError("the browser closed the DevTools connection")
            data += part
        return data

    def receive(self):
        message = b""
        while True:
            first, second = self.exactly(2)
            length = second & 0x7F
            if length == 126:
                length = int.from_bytes(self.exactly(2), "big")
            elif length == 127:
                length = int.from_bytes(self.exactly(8), "big")
            payload = self.exactly(length)
            if first & 0x0F == 0x8:
                raise RuntimeError("the browser closed the DevTools connection")
            if first & 0x0F in (0x9, 0xA):
                continue
            message += payload
            if first & 0x80:
                return message.decode()


browser = subprocess.Popen(
    [args.browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars",
     "--window-size=1100,900", f"--user-data-dir={args.profile}", "--remote-debugging-port=0", *args.browser_arg, "about:blank"],
    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
try:
    endpoint = None
    started = time.monotonic()
    while endpoint is None and time.monotonic() - started < 30:
        line = browser.stderr.readline()
        if not line:
            break
        match = re.search(r"DevTools listening on ws://127\.0\.0\.1:(\d+)/", line)
        if match:
            endpoint = int(match.group(1))
    if endpoint is None:
        sys.exit("browser.py: chromium did not open its DevTools port")
    targets = json.load(urllib.request.urlopen(f"http://127.0.0.1:{endpoint}/json/list", timeout=10))
    page = next(t for t in targets if t.get("type") == "page")
    ws = WebSocket(page["webSocketDebuggerUrl"])
    counter = 0

    def call(method, **params):
        global counter
        counter += 1
        ws.send(json.dumps({"id": counter, "method": method, "params": params}))
        while True:
            reply = json.loads(ws.receive())
            if reply.get("id") == counter:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})

    def evaluate(expression):
        return call("Runtime.evaluate", expression=expression, returnByValue=True).get("result", {}).get("value")

    if args.no_scripts:
        call("Emulation.setScriptExecutionDisabled", value=True)
    call("Page.enable")
    call("Page.navigate", url=args.url)
    for number, (expression, output) in enumerate(args.step):
        if expression.startswith("navigate:"):
            url = expression[len("navigate:"):]
            call("Page.navigate", url=url)
            expression = f"location.href === {json.dumps(url)}"
        deadline = time.monotonic() + args.timeout
        ok = False
        while time.monotonic() < deadline:
            try:
                # Scripts may be off for the page, not for the protocol.
                ok = evaluate(f"document.readyState === 'complete' && !!({expression})")
            except RuntimeError:
                ok = False
            if ok:
                break
            time.sleep(0.1)
        with open(output, "w") as file:
            file.write(evaluate("document.documentElement.outerHTML") or "")
        if number == 0 and args.screenshot:
            data = call("Page.captureScreenshot", format="png")["data"]
            with open(args.screenshot, "wb") as file:
                file.write(base64.b64decode(data))
        if not ok:
            sys.exit(f"browser.py: '{expression}' was not true within {args.timeout} s")
finally:
    browser.kill()
    browser.wait()
