"""The `gopher` kind: fetches gopher://host[:port]/<type><selector> itself (RFC 1436) and hands
the runner the item to store. A menu (type 1) reports its entries; a refused or reset
connection exits 75, so the runner retries it like any transient failure."""
import json
import os
import socket
import sys
from datetime import datetime
from urllib.parse import unquote, urlsplit

TEMPFAIL = 75


def main():
    request = json.load(sys.stdin)
    url = urlsplit(request["url"])
    if url.scheme != "gopher" or not url.hostname:
        print(json.dumps({"status": "failed", "error": "expected a gopher:// URL, not %s" % request["url"]}))
        return
    path = unquote(url.path)
    item_type = path[1] if len(path) > 1 else "1"
    selector = path[2:] if len(path) > 2 else ""
    deadline = datetime.fromisoformat(request["deadline"].replace("Z", "+00:00"))
    remaining = max(0.1, (deadline - datetime.now(deadline.tzinfo)).total_seconds())
    limit = request["job"]["maxBytes"]
    received = bytearray()
    try:
        with socket.create_connection((url.hostname, url.port or 70), timeout=remaining) as connection:
            connection.sendall(selector.encode("utf-8") + b"\r\n")
            while True:
                chunk = connection.recv(65536)
                if not chunk:
                    break
                received += chunk
                if len(received) > limit:
                    print(json.dumps({"status": "failed", "error": "the item is larger than maxBytes (%d bytes)" % limit}))
                    return
    except (ConnectionRefusedError, ConnectionResetError, socket.timeout) as error:
        sys.stderr.write("%s:%s: %s\n" % (url.hostname, url.port or 70, error))
        sys.exit(TEMPFAIL)
    if item_type == "1":
        lines = [line for line in received.decode("utf-8", "replace").split("\r\n") if line and line != "."]
        if lines and lines[0].startswith("3"):
            print(json.dumps({"status": "notFound", "error": lines[0][1:].split("\t")[0]}))
            return
        details = {"type": "menu", "entries": len(lines)}
    else:
        details = {"type": "text" if item_type == "0" else item_type, "bytes": len(received)}
    with open(os.path.join(request["workdir"], "item"), "wb") as item:
        item.write(received)
    print(json.dumps({"status": "succeeded", "payload": "item", "details": details}))


main()
