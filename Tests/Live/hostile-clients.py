#!/usr/bin/env python3
"""Hostile clients against `runner watch --listen`, all at once for --seconds:

- 10 000 connections that send nothing (idle);
- 50 requests sent one byte every half second (slowloris);
- a POST announcing a 1 GiB body, its body sent as fast as the server takes it;
- meanwhile GET /api/status every half second, timed.

Prints one JSON object: idleOpened, slowOpened, slowClosed, bigPostStatus, bigPostSentMiB,
statusAnswered, statusFailed, statusWorstMs. Standard library only.
"""
import argparse
import json
import resource
import select
import socket
import threading
import time

parser = argparse.ArgumentParser()
parser.add_argument("--port", type=int, required=True)
parser.add_argument("--token", default=None)
parser.add_argument("--seconds", type=float, default=12)
parser.add_argument("--idle", type=int, default=10_000)
args = parser.parse_args()

# Room for the idle connections (raising the hard limit needs root; otherwise as many as allowed).
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
for wanted in (args.idle + 512, hard):
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, max(wanted, hard)))
        break
    except (ValueError, OSError):
        continue

ADDRESS = ("127.0.0.1", args.port)
AUTH = f"Authorization: Bearer {args.token}\r\n" if args.token else ""
end = time.monotonic() + args.seconds
results = {}


def idle():
    sockets = []
    for _ in range(args.idle):
        try:
            sockets.append(socket.create_connection(ADDRESS, timeout=5))
        except OSError:
            time.sleep(0.01)
    results["idleOpened"] = len(sockets)
    while time.monotonic() < end:
        time.sleep(0.1)
    for s in sockets:
        s.close()


def slow():
    head = b"GET /api/status HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"z" * 200
    sockets = [socket.create_connection(ADDRESS, timeout=5) for _ in range(50)]
    results["slowOpened"] = len(sockets)
    closed = set()
    position = 0
    while time.monotonic() < end and len(closed) < len(sockets):
        for index, s in enumerate(sockets):
            if index in closed:
                continue
            try:
                ready, _, _ = select.select([s], [], [], 0)
                if ready and s.recv(65536, socket.MSG_DONTWAIT) == b"":
                    closed.add(index)
                    continue
                s.send(head[position % len(head):position % len(head) + 1])
            except OSError:
                closed.add(index)
        position += 1
        time.sleep(0.5)
    results["slowClosed"] = len(closed)
    for s in sockets:
        s.close()


def big_post():
    s = socket.create_connection(ADDRESS, timeout=5)
    s.sendall(f"POST /api/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\n{AUTH}Content-Length: {1 << 30}\r\n\r\n".encode())
    s.setblocking(False)
    chunk = b"x" * (1 << 20)
    sent = 0
    answer = b""
    while time.monotonic() < end and sent < (1 << 30):
        readable, writable, _ = select.select([s], [s], [], 0.5)
        if readable:
            try:
                data = s.recv(65536)
            except OSError:
                break
            if not data:
                break
            answer += data
            if b"\r\n\r\n" in answer:
                break
        if writable:
            try:
                sent += s.send(chunk)
            except BlockingIOError:
                pass
            except OSError:
                break
    status = None
    if answer.startswith(b"HTTP/1.1 "):
        status = int(answer[9:12])
    results["bigPostStatus"] = status
    results["bigPostSentMiB"] = sent >> 20
    s.close()


def probe():
    answered = failed = 0
    worst = 0.0
    while time.monotonic() < end:
        began = time.monotonic()
        try:
            with socket.create_connection(ADDRESS, timeout=5) as s:
                s.sendall(f"GET /api/status HTTP/1.1\r\nHost: 127.0.0.1\r\n{AUTH}\r\n".encode())
                data = b""
                while True:
                    part = s.recv(65536)
                    if not part:
                        break
                    data += part
            if data.startswith(b"HTTP/1.1 200"):
                answered += 1
                worst = max(worst, time.monotonic() - began)
            else:
                failed += 1
        except OSError:
            failed += 1
        time.sleep(0.5)
    results["statusAnswered"] = answered
    results["statusFailed"] = failed
    results["statusWorstMs"] = int(worst * 1000)


threads = [threading.Thread(target=target) for target in (idle, slow, big_post, probe)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
print(json.dumps(results))
