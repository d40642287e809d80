"""The `feed` kind: reads an RSS 2.0 or Atom feed the runner fetched, reports its title and
item count, and returns one `image` job per enclosure (RSS <enclosure>, Atom rel="enclosure")."""
import hashlib
import json
import sys
import xml.etree.ElementTree as ET
from urllib.parse import urljoin

ATOM = "{http://www.w3.org/2005/Atom}"


def answer(**fields):
    json.dump(fields, sys.stdout)
    sys.stdout.write("\n")
    sys.exit(0)


def main():
    request = json.load(sys.stdin)
    base = request["url"]
    try:
        root = ET.parse(request["payload"]).getroot()
    except ET.ParseError as error:
        answer(status="failed", error="expected an RSS or Atom feed, but the payload is not XML: %s" % error)
    enclosures = []
    if root.tag == "rss":
        channel = root.find("channel")
        if channel is None:
            answer(status="failed", error="expected an RSS feed, but <rss> has no <channel>")
        title = channel.findtext("title", "")
        items = channel.findall("item")
        for item in items:
            for enclosure in item.findall("enclosure"):
                if enclosure.get("url") and enclosure.get("type", "image/").startswith("image/"):
                    enclosures.append(enclosure.get("url"))
    elif root.tag == ATOM + "feed":
        title = root.findtext(ATOM + "title", "")
        items = root.findall(ATOM + "entry")
        for item in items:
            for link in item.findall(ATOM + "link"):
                if link.get("rel") == "enclosure" and link.get("href") and link.get("type", "image/").startswith("image/"):
                    enclosures.append(link.get("href"))
    else:
        answer(status="failed", error="expected an RSS or Atom feed, but the document's root is <%s>" % root.tag)
    children = []
    for url in enclosures:
        absolute = urljoin(base, url)
        digest = hashlib.sha256(absolute.encode()).hexdigest()[:16]
        children.append({"kind": "image", "key": "image:%s" % digest, "url": absolute})
    answer(status="succeeded", details={"title": title.strip(), "items": len(items), "enclosures": len(children)},
           children=children)


main()
