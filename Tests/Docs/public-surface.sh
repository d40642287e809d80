#!/usr/bin/env bash
# The libraries' public API is what docs/library.md lists, and every public declaration written in
# Sources has a doc comment. Reads the symbol graphs of the built modules (run after `swift build`):
#
#   bash Tests/Docs/public-surface.sh            # check; prints the counts
#   bash Tests/Docs/public-surface.sh --list     # also every undocumented declaration, file:line
set -euo pipefail
cd "$(dirname "$0")/../.."

modules=(RunnerKit RunnerKinds RunnerTesting)
build=${BUILD_DIR:-.build/debug}
extract=$(command -v swift-symbolgraph-extract || true)
if [ -z "$extract" ]; then
    extract="$(dirname "$(readlink -f "$(command -v swift)")")/swift-symbolgraph-extract"
fi
[ -x "$extract" ] || { echo "public-surface: swift-symbolgraph-extract not found beside swift" >&2; exit 1; }
[ -d "$build/Modules" ] || { echo "public-surface: $build/Modules is missing: build first (swift build)" >&2; exit 1; }

graphs=$(mktemp -d)
trap 'rm -rf "$graphs"' EXIT
triple=$(uname -m)-unknown-linux-gnu
for module in "${modules[@]}"; do
    "$extract" -module-name "$module" -I "$build/Modules" -target "$triple" \
        -minimum-access-level public -output-dir "$graphs" >/dev/null
done

python3 - "$graphs" "$PWD" "${1:-}" "${modules[@]}" <<'PY'
import json, re, sys
graphs, root, flag, modules = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
type_kinds = {"swift.struct", "swift.class", "swift.enum", "swift.protocol", "swift.typealias", "swift.actor"}

# The types docs/library.md lists, module by module, under "## The public API".
page = open(f"{root}/docs/library.md", encoding="utf-8").read()
section = page.split("\n## The public API", 1)
if len(section) < 2:
    sys.exit("public-surface: docs/library.md has no '## The public API' section")
section = section[1].split("\n## ", 1)[0]
listed, module = {}, None
for line in section.splitlines():
    heading = re.match(r"^### `?(\w+)`?", line)
    if heading:
        module = heading.group(1)
        listed[module] = set()
    elif module and line.startswith("|"):
        listed[module].update(re.findall(r"`(\w+)`", line.split("|")[1]))

failed = False
for module in modules:
    symbols = json.load(open(f"{graphs}/{module}.symbols.json"))["symbols"]
    top = {s["names"]["title"] for s in symbols if len(s["pathComponents"]) == 1 and s["kind"]["identifier"] in type_kinds}
    # Declarations written here: synthesized and inherited ones (`!=`, `hashValue`) have no location.
    own = [s for s in symbols if f"/Sources/{module}/" in s.get("location", {}).get("uri", "")]
    undocumented = [s for s in own if "docComment" not in s]
    print(f"{module}: {len(top)} public types, {len(own)} public declarations, {len(undocumented)} without a doc comment")
    for s in undocumented if flag == "--list" or len(undocumented) <= 40 else undocumented[:40]:
        where = s["location"]["uri"].split(f"{root}/", 1)[-1]
        print(f"  undocumented: {where}:{s['location']['position']['line'] + 1}: {'.'.join(s['pathComponents'])}")
    if undocumented:
        failed = True
    names = listed.get(module)
    if names is None:
        print(f"  docs/library.md lists no types of {module} (a '### {module}' table)")
        failed = True
        continue
    for name in sorted(top - names):
        print(f"  public but not listed in docs/library.md: {module}.{name}")
        failed = True
    for name in sorted(names - top):
        print(f"  listed in docs/library.md but not public: {module}.{name}")
        failed = True
sys.exit(1 if failed else 0)
PY
