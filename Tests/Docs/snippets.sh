#!/usr/bin/env bash
# Compiles every ```swift block of the docs as an adopter's code would be compiled: in a package
# of its own that depends on this checkout by path, so that only the public API is seen. The
# package is a copy of the example app (Examples/FeedService) with one more target, DocSnippets,
# holding one file per block; one `swift build --build-tests` compiles the app and the blocks.
# Then the app runs once, on the fixture server, and must cancel its slow job and exit 0.
#
#   bash Tests/Docs/snippets.sh [PAGE.md…]     (pages as paths in the checkout)
#
# Without pages, README.md and every page of docs/ are read. SNIPPETS_DIR=FOLDER makes the
# package there and keeps it, so a second run builds only what changed (the first builds
# RunnerKit and the rest of the runner again, in the package's own .build).
#
# How a block is placed (docs/contributing.md, "The Swift blocks", says the same for writers):
#
#   - The `import` lines at the top of a block are its file's imports. A block without any gets
#     those of the blocks before it on its page.
#   - A block whose code is only declarations (each line at the fence's indentation starts a
#     struct, class, enum, actor, protocol, extension, func or typealias, with its attributes
#     and modifiers, or closes one) is compiled at file scope, as written. Every block is in the
#     same module, so a type one block declares is seen by the others (and no two declare one
#     name).
#   - Any other block is statements: the body of a function that is `async throws`.
#   - A block that uses names an earlier block made (a fragment) names them, with their types,
#     on the line just before its fence, as the parameters of that function (`inout` for a
#     value it changes):
#
#       <!-- swift given: engine: JobEngine, ids: [String] -->
#       ```swift
#
# A block that cannot be placed (statements beside declarations that belong at file scope, an
# import below its code, `given` on declarations, a swift comment that is not `given` or not
# just before a swift fence) is an error naming the page and the line. A fence's indentation
# (a block in a list item) is taken off its lines. Each file carries `#sourceLocation` lines, so
# the compiler's errors name the page and its line; the blocks that do not compile are listed
# at the end. Warnings fail too. Exit status: 0 when every block compiled and the app ran, 1
# otherwise, 2 for a usage error.
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root" || exit 2

if [ $# -gt 0 ]; then
    pages=("$@")
else
    pages=(README.md)
    for page in docs/*.md; do pages+=("$page"); done
fi
for page in "${pages[@]}"; do
    [ -f "$page" ] || { echo "snippets.sh: no page $page" >&2; exit 2; }
done

if [ -n "${SNIPPETS_DIR:-}" ]; then
    tmp=""
    package=$(mkdir -p "$SNIPPETS_DIR" && cd "$SNIPPETS_DIR" && pwd) || exit 2
else
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/runner-snippets-XXXXXX") || exit 2
    trap 'rm -rf "$tmp"' EXIT
    package=$tmp/FeedService
fi

# --- The package ----------------------------------------------------------------------------

# The example app, its dependency pointed at this checkout, and a target for the blocks.
mkdir -p "$package"
rm -rf "$package/Sources" "$package/Tests"
(cd Examples/FeedService && tar --exclude=./.build --exclude=./.swiftpm -cf - .) | (cd "$package" && tar -xf -) || exit 1
manifest=$package/Package.swift
if ! grep -q 'path: "\.\./\.\."' "$manifest"; then
    echo "snippets.sh: Examples/FeedService/Package.swift does not depend on the runner by path \"../..\"" >&2
    exit 1
fi
escaped_root=${root//\\/\\\\}
escaped_root=${escaped_root//\"/\\\"}
manifest_text=$(<"$manifest")
manifest_text=${manifest_text//'path: "../.."'/"path: \"$escaped_root\""}
cat >"$manifest" <<EOF
$manifest_text

// The Swift blocks of the docs, one file each (made by Tests/Docs/snippets.sh).
package.targets.append(
    .testTarget(
        name: "DocSnippets",
        dependencies: [
            .product(name: "RunnerKit", package: "runner"),
            .product(name: "RunnerKinds", package: "runner"),
            .product(name: "RunnerTesting", package: "runner"),
            .product(name: "FixtureServer", package: "runner"),
        ],
        path: "Tests/DocSnippets",
        swiftSettings: [.enableUpcomingFeature("ExistentialAny"), .enableUpcomingFeature("MemberImportVisibility")]
    )
)
EOF
snippets=$package/Tests/DocSnippets
mkdir -p "$snippets"

# --- Reading the pages ----------------------------------------------------------------------

attribute='@[A-Za-z_][A-Za-z0-9_.]*(\([^)]*\))?'
modifier='(public|private|fileprivate|internal|package|open|final|nonisolated|indirect|static|mutating|nonmutating|convenience|required|override)'
declaration_re="^(${attribute}[[:space:]]+)*(${modifier}[[:space:]]+)*(struct|class|enum|actor|protocol|extension|func|typealias)[[:space:]]"
attribute_re="^${attribute}[[:space:]]*$"
# Lines at column 0 that only a file's scope takes: in a block of statements they cannot be placed.
file_scope_re="^(@(Test|Suite|main)|(public|private|fileprivate|internal|package|open)[[:space:]]|(extension|protocol)[[:space:]])"

blocks=()          # "page:line" of every block written
failures=0

fail() {
    echo "$1: $2" >&2
    failures=$((failures + 1))
}

# Writes the block of page $1 whose fence is at line $2 ($3: the `given` parameters, or "-" for
# none; $4: the imports of the page's earlier blocks) as a file of the package, and adds the
# block's imports to page_imports.
write_block() {
    local page=$1 fence=$2 given=$3 earlier=$4
    local -a lines=("${block_lines[@]}")
    local i line first_code=-1 statements="" imports=""
    # The imports at the top (blank lines and comments among them), then the code.
    for i in "${!lines[@]}"; do
        line=${lines[i]}
        if [[ $line =~ ^import[[:space:]] ]]; then
            [ "$first_code" -ge 0 ] && { fail "$page:$((fence + 1 + i))" "this swift block cannot be placed: an import below its code"; return; }
            imports+="$line"$'\n'
        elif [[ $line =~ ^[[:space:]]*$ || $line == //* ]]; then
            :
        elif [ "$first_code" -lt 0 ]; then
            first_code=$i
        fi
    done
    [ "$first_code" -ge 0 ] || { fail "$page:$fence" "this swift block has no code"; return; }
    for ((i = first_code; i < ${#lines[@]}; i++)); do
        line=${lines[i]}
        [[ $line =~ ^[[:space:]] || -z $line || $line == //* || $line == /\** || $line =~ ^[\]\)\}] ]] && continue
        if [[ ! $line =~ $declaration_re && ! $line =~ $attribute_re ]]; then
            statements=$((fence + 1 + i))
            break
        fi
    done
    if [ -n "$statements" ]; then
        for ((i = first_code; i < ${#lines[@]}; i++)); do
            if [[ ${lines[i]} =~ $file_scope_re ]]; then
                fail "$page:$((fence + 1 + i))" "this swift block cannot be placed: it has statements (line $statements) and a declaration that belongs at file scope; split it in two blocks"
                return
            fi
        done
    elif [ "$given" != "-" ]; then
        fail "$page:$fence" "this swift block is declarations, compiled at file scope: it takes no 'given'"
        return
    fi

    local name=snippet_${page//[^A-Za-z0-9]/_}_$fence
    local file=$snippets/$name.swift
    {
        if [ -n "$imports" ]; then
            echo "#sourceLocation(file: \"$page\", line: $((fence + 1)))"
            for ((i = 0; i < first_code; i++)); do echo "${lines[i]}"; done
        else
            printf '%s' "$earlier"
        fi
        if [ -n "$statements" ]; then
            echo "#sourceLocation(file: \"$page\", line: $((fence > 1 ? fence - 1 : 1)))"
            echo "func $name(${given#-}) async throws {"
        fi
        echo "#sourceLocation(file: \"$page\", line: $((fence + 1 + first_code)))"
        for ((i = first_code; i < ${#lines[@]}; i++)); do echo "${lines[i]}"; done
        echo "#sourceLocation()"
        [ -n "$statements" ] && echo "}"
    } >"$file"
    blocks+=("$page:$fence")
    while IFS= read -r line; do
        [ -n "$line" ] && [[ $'\n'$page_imports != *$'\n'"$line"$'\n'* ]] && page_imports+="$line"$'\n'
    done <<<"$imports"
}

# A fence: its indentation, its backticks, its language. A block ends at a line of at least as
# many backticks; the fence's indentation is taken off its lines (a block in a list item).
fence_re='^( *)(```+) *([^ `]*)'
closing_re='^ *(```+) *$'
marker_re='^ *<!-- *swift'
given_re='^ *<!-- *swift +given: *(.*[^ ]) *--> *$'
for page in "${pages[@]}"; do
    number=0 in_block="" given="-" marker_line=0 page_imports=""
    block_lines=()
    while IFS= read -r line || [ -n "$line" ]; do
        number=$((number + 1))
        if [ -n "$in_block" ]; then
            if [[ $line =~ $closing_re ]] && [ ${#BASH_REMATCH[1]} -ge "$fence_length" ]; then
                [ "$in_block" = swift ] && write_block "$page" "$fence" "$given" "$page_imports"
                in_block="" given="-"
            elif [ "$in_block" = swift ]; then
                for ((i = 0; i < fence_indent; i++)); do [[ $line == " "* ]] && line=${line# }; done
                block_lines+=("$line")
            fi
            continue
        fi
        if [[ $line =~ $fence_re ]]; then
            fence=$number fence_indent=${#BASH_REMATCH[1]} fence_length=${#BASH_REMATCH[2]} block_lines=()
            in_block=other
            [ "${BASH_REMATCH[3]}" = swift ] && in_block=swift
            if [ "$marker_line" -gt 0 ] && { [ "$in_block" != swift ] || [ "$marker_line" -ne $((number - 1)) ]; }; then
                fail "$page:$marker_line" "this swift comment is not on the line just before a \`\`\`swift fence"
                given="-"
            fi
            [ "$marker_line" -eq $((number - 1)) ] || given="-"
            marker_line=0
        elif [[ $line =~ $marker_re ]]; then
            [ "$marker_line" -gt 0 ] && fail "$page:$marker_line" "this swift comment is not on the line just before a \`\`\`swift fence"
            if [[ $line =~ $given_re ]]; then
                given=${BASH_REMATCH[1]} marker_line=$number
            else
                fail "$page:$number" "unknown swift comment (the only one is '<!-- swift given: NAME: TYPE, … -->')"
                marker_line=0
            fi
        fi
    done <"$page"
    [ "$marker_line" -gt 0 ] && fail "$page:$marker_line" "this swift comment is not on the line just before a \`\`\`swift fence"
    [ -n "$in_block" ] && fail "$page:$fence" "this code block is not closed"
done

[ "$failures" -eq 0 ] || exit 1
if [ ${#blocks[@]} -eq 0 ]; then
    # The target needs a file; the app is still built and run.
    echo "// No page holds a swift block." >"$snippets/None.swift"
fi

# --- Building -------------------------------------------------------------------------------

log=$package/build-log.txt
start=$SECONDS
swift build --build-tests --package-path "$package" >"$log" 2>&1
status=$?
elapsed=$((SECONDS - start))

# The compiler's diagnostics of kind $1 (error, warning) in the log, each once, with the lines
# it shows.
diagnostics() {
    awk -v kind="$1" '
        /^[^ ]+:[0-9]+:[0-9]+: [a-z]+: / { show = index($0, ": " kind ": ") > 0 && !seen[$0]++ }
        /^\[[0-9]+\/[0-9]+\]/ { show = 0 }
        show' "$log"
}

# The compiler's errors, with the lines it shows; each block they fall in is named at the end.
if [ "$status" -ne 0 ]; then
    diagnostics error >&2
    declare -A failed=()
    while IFS=: read -r file line _; do
        best=""
        for block in "${blocks[@]}"; do
            [ "${block%:*}" = "$file" ] && [ "${block##*:}" -le $((line + 1)) ] && best=$block
        done
        [ -n "$best" ] && failed[$best]=1
    done < <(grep -o -E '^[^ :]+\.md:[0-9]+:[0-9]+: error' "$log")
    echo >&2
    if [ ${#failed[@]} -gt 0 ]; then
        printf '%s: this swift block does not compile\n' "${!failed[@]}" | sort -t: -k1,1 -k2,2n >&2
    else
        echo "snippets.sh: the package did not build (the example app, or the runner itself)" >&2
        grep -q -E ': error: ' "$log" || tail -20 "$log" >&2
    fi
    exit 1
fi

# The app and the blocks build without warnings, as the runner does.
if grep -q -E 'warning: ' "$log"; then
    diagnostics warning >&2
    echo "snippets.sh: the example app or a swift block has warnings" >&2
    exit 1
fi

# --- Running the app ------------------------------------------------------------------------

run_dir=$package/run
rm -rf "$run_dir" && mkdir -p "$run_dir"
output=$(cd "$run_dir" && timeout 60 "$package/.build/debug/FeedService" 2>&1)
status=$?
if [ "$status" -ne 0 ] || ! grep -q '^report:slow cancelled' <<<"$output"; then
    echo "$output" >&2
    echo "snippets.sh: the example app exited $status; it must cancel 'report:slow' and exit 0" >&2
    exit 1
fi

echo "snippets.sh: ${#blocks[@]} swift blocks (of ${#pages[@]} pages read) and the example app compiled in ${elapsed}s; the app ran"
