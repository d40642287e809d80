#!/usr/bin/env bash
# Runs the shell examples of README.md and docs/*.md that are marked as tests, and compares what
# each command prints with what the page shows, as rustdoc runs a crate's doc examples: a changed
# flag or message breaks CI, not the reader.
#
#   RUNNER=.build/debug/runner bash Tests/Docs/examples.sh [PAGE.md…]     (pages as paths in the checkout)
#
# RUNNER (or RUNNER_BIN) names the runner binary. Without pages, every page runs.
#
# How a page marks an example (docs/contributing.md, "How the examples are tested", says the same
# for writers):
#
#   ```console test              a block that runs: "$ " starts a command, "> " continues it,
#   $ runner validate jobs.json  any other line is what the command prints (stdout and stderr
#   jobs.json: 2 jobs, valid     together). "[..]" in a line stands for any text, a line "..."
#   ```                          for any number of lines, and "[exit N]" ends the output of a
#                                command that exits N (not 0).
#   ```json file=jobs.json       a file the examples after it use, written where they run.
#
# More words after "test": "unordered" compares each command's lines in any order (for jobs that
# end in any order; each expected line takes the first got line it matches, and "..." lets got
# lines be left over), "postgres" runs the block only where PostgreSQL's initdb is found (a
# server is started for it), "needs=TOOL,TOOL" only where those programs are installed. A skipped
# block is named at the end.
#
# Each page runs in a new empty folder, in one bash session, in the order of the page: the
# commands of one page share their folder, variables and background jobs. The folder holds a
# link `Jobs` to the checkout's Jobs/, as a checkout's root would. The pages' addresses are
# fixed so that a reader can type them; here each one is mapped to a real one:
#
#   127.0.0.1:8080                        the fixture server, which this script starts on a
#                                         free loopback port ("runner fixture-server --port 8080"
#                                         on the page)
#   127.0.0.1:8081                        a free loopback port, for a watcher's --listen
#   postgresql://runner@db.example/jobs   a PostgreSQL server in a temporary folder, on a
#                                         unix socket only
#
# The page's folder is also its HOME, and is shown as "~" in what the commands print.
#
# Nothing here talks to anything but loopback and that socket. Whatever the script started
# (the fixture server, each page's session and what it left in the background, PostgreSQL) is
# stopped when it exits, whether it fails or is interrupted. Exit status: 0 when every example
# printed what its page shows, 1 otherwise (a unified diff of expected and got for each), 2 for
# a usage error.
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
runner=${RUNNER:-${RUNNER_BIN:-}}
if [ -z "$runner" ] || [ ! -x "$runner" ]; then
    echo "examples.sh: set RUNNER to the runner binary (RUNNER=.build/debug/runner bash Tests/Docs/examples.sh)" >&2
    exit 2
fi
runner=$(realpath "$runner")

if [ $# -gt 0 ]; then
    pages=("$@")
else
    pages=(README.md)
    shopt -s nullglob
    for page in "$root"/docs/*.md; do pages+=("docs/${page##*/}"); done
    shopt -u nullglob
fi

page_timeout=${DOCS_PAGE_TIMEOUT:-60}   # seconds a page's session may take

tmp=$(mktemp -d "${TMPDIR:-/tmp}/runner-docs-XXXXXX") || exit 2
cd "$tmp" || exit 2   # what the script starts works in its folder, and is told by it
keep=${DOCS_KEEP:-}   # set: the sessions and their outputs stay, for a look at what ran
chmod 755 "$tmp"   # PostgreSQL's own user reaches its folder inside
groups=()          # process groups this script started, ended at exit
pg_dir=""          # PostgreSQL's folder, once it runs
pg_bin=""
pg_url=""
postgres_missing=""   # why PostgreSQL cannot run here

as_postgres() {
    if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

stop_postgres() {
    [ -n "$pg_dir" ] || return 0
    as_postgres "$pg_bin/pg_ctl" -D "$pg_dir/data" -m immediate -w stop >/dev/null 2>&1
    local pid
    pid=$(head -1 "$pg_dir/data/postmaster.pid" 2>/dev/null)
    [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null
    pg_dir=""
}

cleanup() {
    local group
    for group in "${groups[@]}"; do kill -KILL -- "-$group" 2>/dev/null; done
    stop_postgres
    if [ -n "$keep" ]; then echo "examples.sh: kept $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT
# Interrupted: stop at once, without bash's word on each job the cleanup kills.
trap 'exec 2>/dev/null; exit 130' INT
trap 'exec 2>/dev/null; exit 143' TERM
trap 'exec 2>/dev/null; exit 129' HUP

# Starts "$@" in a session (and process group) of its own, in the background; its pid, which is
# also its group's id, is in $started.
start_group() {
    setsid "$@" &
    started=$!
    groups+=("$started")
}

# A loopback port nothing listens on (or connects from) now.
free_port() {
    local port hex
    for _ in $(seq 100); do
        port=$((20000 + RANDOM % 40000))
        printf -v hex ':%04X ' "$port"
        if ! grep -q "$hex" /proc/net/tcp /proc/net/tcp6 2>/dev/null; then
            echo "$port"
            return 0
        fi
    done
    return 1
}

start_postgres() {
    [ -n "$pg_url" ] && return 0
    [ -n "$postgres_missing" ] && return 1
    local candidate
    for candidate in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
        [ -x "$candidate/initdb" ] && { pg_bin=$candidate; break; }
    done
    if [ -z "$pg_bin" ]; then
        postgres_missing="PostgreSQL's initdb is not installed (Debian: apt-get install postgresql)"
        return 1
    fi
    if [ "$(id -u)" -eq 0 ] && ! id postgres >/dev/null 2>&1; then
        postgres_missing="there is no postgres user to run PostgreSQL as"
        return 1
    fi
    local dir=$tmp/postgres
    mkdir -p "$dir"
    [ "$(id -u)" -eq 0 ] && chown postgres "$dir"
    pg_dir=$dir
    if ! as_postgres "$pg_bin/initdb" -D "$dir/data" -U runner -A trust >"$dir/initdb.log" 2>&1 ||
        ! as_postgres "$pg_bin/pg_ctl" -D "$dir/data" -o "-k $dir -c listen_addresses=''" -l "$dir/server.log" -w start >/dev/null 2>&1; then
        echo "examples.sh: PostgreSQL did not start:" >&2
        cat "$dir/initdb.log" "$dir/server.log" >&2 2>/dev/null
        return 2
    fi
    # The socket's folder as the host, percent-encoded: a URL the shell takes as one word.
    pg_url="postgresql://runner@${dir//\//%2F}/postgres"
    pg_server_url=$pg_url
}

# A database of its own for each page that uses PostgreSQL: a page's queue starts empty, whatever
# the pages before it queued, and its output stamp is its own.
pg_pages=0
fresh_database() {
    pg_pages=$((pg_pages + 1))
    "$pg_bin/psql" -X -q -h "$pg_dir" -U runner -d postgres -c "CREATE DATABASE page_$pg_pages" >/dev/null || return 1
    pg_url="${pg_server_url%/postgres}/page_$pg_pages"
}

# The fixture server, on a free loopback port.
start_group "$runner" fixture-server --port 0 >"$tmp/fixture.log" 2>&1
disown "$started"   # ended by its group at exit, without a word from bash
fixture=""
for _ in $(seq 200); do
    fixture=$(sed -n 's|^Fixture server listening on http://||p' "$tmp/fixture.log")
    [ -n "$fixture" ] && break
    kill -0 "$started" 2>/dev/null || break
    sleep 0.05
done
if [ -z "$fixture" ]; then
    echo "examples.sh: the fixture server did not start:" >&2
    cat "$tmp/fixture.log" >&2
    exit 1
fi

mkdir -p "$tmp/bin"
ln -s "$runner" "$tmp/bin/runner"

# --- Reading a page -------------------------------------------------------------------------

# The items of the page being read, in order: a command to run or a file to write.
item_kind=()     # cmd | file
item_line=()     # the line of the page it starts on
item_text=()     # the command, or the file's content
item_name=()     # the file's name
item_expect=()   # what the command prints, as the page shows it
item_skip=()     # why it does not run here ("" when it runs)
item_pg=()       # 1 when the block needs PostgreSQL
item_unordered=() # 1 when the block's lines may come in any order

read_page() {
    local file=$1 file_path=$2 number=0 line in_block="" block_skip="" block_pg="" block_unordered="" current=-1 continuing=""
    item_kind=() item_line=() item_text=() item_name=() item_expect=() item_skip=() item_pg=() item_unordered=()
    while IFS= read -r line || [ -n "$line" ]; do
        number=$((number + 1))
        if [ -z "$in_block" ]; then
            [[ $line == '```'* ]] || continue
            local info=${line#'```'} words word lang
            read -r -a words <<<"$info"
            lang=${words[0]:-}
            in_block=other
            for word in "${words[@]:1}"; do
                case $word in
                    test) [ "$lang" = console ] && in_block=test ;;
                    file=*)
                        in_block=file
                        item_kind+=(file) item_line+=("$number") item_text+=("") item_name+=("${word#file=}")
                        item_expect+=("") item_skip+=("") item_pg+=("") item_unordered+=("")
                        current=$((${#item_kind[@]} - 1))
                        ;;
                esac
            done
            if [ "$in_block" = test ]; then
                block_skip="" block_pg="" block_unordered=""
                for word in "${words[@]:1}"; do
                    case $word in
                        postgres) block_pg=1 ;;
                        unordered) block_unordered=1 ;;
                        needs=*)
                            local tool tools
                            IFS=, read -r -a tools <<<"${word#needs=}"
                            for tool in "${tools[@]}"; do
                                command -v "$tool" >/dev/null 2>&1 || block_skip="$tool is not installed"
                            done
                            ;;
                        test) ;;
                        *) echo "$file:$number: unknown word '$word' after 'console test'" >&2; return 1 ;;
                    esac
                done
                current=-1
            fi
            continue
        fi
        if [ "$line" = '```' ]; then
            in_block="" continuing=""
            continue
        fi
        case $in_block in
            file)
                item_text[current]+="$line"$'\n'
                ;;
            test)
                if [[ $line == '$ '* ]]; then
                    item_kind+=(cmd) item_line+=("$number") item_text+=("${line#'$ '}") item_name+=("")
                    item_expect+=("") item_skip+=("$block_skip") item_pg+=("$block_pg") item_unordered+=("$block_unordered")
                    current=$((${#item_kind[@]} - 1))
                    continuing=1
                elif [ -n "$continuing" ] && [[ $line == '> '* || $line == '>' ]]; then
                    local rest=${line#>}
                    item_text[current]+=$'\n'"${rest# }"
                elif [ "$current" -ge 0 ]; then
                    continuing=""
                    item_expect[current]+="$line"$'\n'
                else
                    echo "$file:$number: output before the block's first command" >&2
                    return 1
                fi
                ;;
        esac
    done <"$file_path"
    if [ -n "$in_block" ]; then
        echo "$file: a code block is not closed" >&2
        return 1
    fi
}

# --- Comparing ------------------------------------------------------------------------------

# The page's addresses, mapped to the real ones (and back, for what the commands print).
# (Quoted, a pattern is literal text, and an "&" in a replacement is not the match.)
to_real() {
    local text=$1
    text=${text//"127.0.0.1:8080"/"$fixture"}
    text=${text//"127.0.0.1:8081"/"127.0.0.1:$listen_port"}
    # Without PostgreSQL, the page's address names a socket that does not exist: never a host.
    text=${text//"postgresql://runner@db.example/jobs"/"${pg_url:-postgresql://runner@%2Fnonexistent/jobs}"}
    printf '%s' "$text"
}
to_page() {
    local text=$1
    [ -n "$pg_url" ] && text=${text//"$pg_url"/"postgresql://runner@db.example/jobs"}
    text=${text//"$fixture"/"127.0.0.1:8080"}
    text=${text//"127.0.0.1:$listen_port"/"127.0.0.1:8081"}
    text=${text//"$work"/"~"}   # the page's folder, which is also its HOME
    printf '%s' "$text"
}

# Whether the got line $2 matches the expected line $1, in which "[..]" stands for any text.
line_matches() {
    local expected=$1 got=$2
    if [[ $expected != *'[..]'* ]]; then
        [[ $got == "$expected" ]]
        return
    fi
    local first=${expected%%'[..]'*} rest=${expected#*'[..]'} part
    [[ $got == "$first"* ]] || return 1
    got=${got:${#first}}
    while [[ $rest == *'[..]'* ]]; do
        part=${rest%%'[..]'*}
        rest=${rest#*'[..]'}
        [ -z "$part" ] && continue
        [[ $got == *"$part"* ]] || return 1
        got=${got#*"$part"}
    done
    [[ $got == *"$rest" ]]
}

# Whether the lines of array got match those of array expected, where a line "..." stands for
# any number of lines: ok[i,j] says whether expected[i…] matches got[j…].
lines_match() {
    local -n e=$1 g=$2
    local m=${#e[@]} n=${#g[@]} i j
    local -A ok=()
    ok[$m,$n]=1
    for ((i = m - 1; i >= 0; i--)); do
        for ((j = n; j >= 0; j--)); do
            if [ "${e[i]}" = "..." ]; then
                if [ -n "${ok[$((i + 1)),$j]:-}" ] || { [ "$j" -lt "$n" ] && [ -n "${ok[$i,$((j + 1))]:-}" ]; }; then ok[$i,$j]=1; fi
            elif [ "$j" -lt "$n" ] && [ -n "${ok[$((i + 1)),$((j + 1))]:-}" ] && line_matches "${e[i]}" "${g[j]}"; then
                ok[$i,$j]=1
            fi
        done
    done
    [ -n "${ok[0,0]:-}" ]
}

# lines_match, in any order: each expected line takes the first got line left that it matches;
# a line "..." lets got lines be left over.
lines_match_unordered() {
    local -n e=$1 g=$2
    local -a taken=()
    local i j found taken_count=0 extra=""
    for ((i = 0; i < ${#e[@]}; i++)); do
        [ "${e[i]}" = "..." ] && { extra=1; continue; }
        found=""
        for ((j = 0; j < ${#g[@]}; j++)); do
            [ -z "${taken[j]:-}" ] && line_matches "${e[i]}" "${g[j]}" && { taken[j]=1; found=1; break; }
        done
        [ -n "$found" ] || return 1
        taken_count=$((taken_count + 1))
    done
    [ -n "$extra" ] || [ "$taken_count" -eq ${#g[@]} ]
}

# The expected lines as a diff should show them: a line with "[..]" that matches a got line (in
# order) is shown as that line, so that the diff marks only what differs.
shown_expected() {
    local -n e=$1 g=$2 into=$3
    local i j=0 k
    into=()
    for ((i = 0; i < ${#e[@]}; i++)); do
        into+=("${e[i]}")
        [ "${e[i]}" = "..." ] && continue
        for ((k = j; k < ${#g[@]}; k++)); do
            if line_matches "${e[i]}" "${g[k]}"; then
                into[-1]=${g[k]}
                j=$((k + 1))
                break
            fi
        done
    done
}

# Splits text into the array named $2: one element a line, trailing blanks of each line and
# blank lines at the end dropped.
split_lines() {
    local -n into=$2
    local line
    into=()
    while IFS= read -r line; do
        into+=("${line%"${line##*[![:space:]]}"}")
    done <<<"$1"
    while [ ${#into[@]} -gt 0 ] && [ -z "${into[-1]}" ]; do unset 'into[-1]'; done
}

# --- Running the pages ----------------------------------------------------------------------

failures=0
commands_run=0
commands_skipped=0
skip_notes=()
started_at=$SECONDS

for page in "${pages[@]}"; do
    page=${page#"$root"/}
    page_path=$page
    [[ $page == /* ]] || page_path=$root/$page
    if [ ! -f "$page_path" ]; then
        echo "examples.sh: no page $page" >&2
        exit 2
    fi
    read_page "$page" "$page_path" || exit 2
    count=${#item_kind[@]}
    has_commands=""
    for ((i = 0; i < count; i++)); do
        [ "${item_kind[i]}" = cmd ] || continue
        has_commands=1
        if [ -n "${item_pg[i]}" ] && [ -z "${item_skip[i]}" ]; then
            start_postgres
            case $? in
                0) ;;
                1) item_skip[i]=$postgres_missing ;;
                *) exit 1 ;;
            esac
        fi
    done
    if [ -n "$pg_url" ] && [[ " ${item_pg[*]} " == *1* ]]; then
        fresh_database || { echo "examples.sh: no database could be made for $page" >&2; exit 1; }
    fi
    [ -n "$has_commands" ] || continue
    # The page's 127.0.0.1:8081, picked free just before its commands run (a port free at the
    # start may be taken by the time a late page listens on it).
    listen_port=$(free_port) || { echo "examples.sh: no free loopback port found" >&2; exit 1; }

    name=${page#/}
    name=${name//\//-}
    work=$tmp/pages/${name%.md}
    results=$tmp/results/${name%.md}
    mkdir -p "$work" "$results"
    ln -s "$root/Jobs" "$work/Jobs"
    session=$results/session.bash
    {
        echo 'cd "$1" || exit 99'
        for ((i = 0; i < count; i++)); do
            [ -z "${item_skip[i]}" ] || continue
            if [ "${item_kind[i]}" = file ]; then
                [[ ${item_name[i]} == */* ]] && printf 'mkdir -p %q\n' "${item_name[i]%/*}"
                printf "cat > %q <<'RUNNER_DOCS_END_OF_FILE'\n%s\nRUNNER_DOCS_END_OF_FILE\n" "${item_name[i]}" "$(to_real "${item_text[i]}")"
            else
                printf '{\n%s\n} >"$2/%d.out" 2>&1 </dev/null\necho $? >"$2/%d.rc"\n' "$(to_real "${item_text[i]}")" "$i" "$i"
            fi
        done
    } >"$session"

    page_started=$SECONDS
    start_group env -u RUNNER_QUEUE -u RUNNER_CONFIG -u RUNNER_KINDS -u RUNNER_HTTP -u NOTIFY_SOCKET -u RUNNER_BIN \
        PATH="$tmp/bin:$PATH" HOME="$work" TZ=UTC LC_ALL=C.UTF-8 \
        timeout -k 5 "$page_timeout" bash "$session" "$work" "$results" </dev/null >"$results/session.log" 2>&1
    session_pid=$started
    wait "$session_pid"
    session_status=$?
    kill -KILL -- "-$session_pid" 2>/dev/null   # what the page left running in the background

    page_failures=0
    page_run=0
    for ((i = 0; i < count; i++)); do
        [ "${item_kind[i]}" = cmd ] || continue
        where="$page:${item_line[i]}"
        first_line=${item_text[i]%%$'\n'*}
        if [ -n "${item_skip[i]}" ]; then
            commands_skipped=$((commands_skipped + 1))
            skip_notes+=("$where: skipped ($first_line): ${item_skip[i]}")
            continue
        fi
        page_run=$((page_run + 1))
        commands_run=$((commands_run + 1))
        if [ ! -f "$results/$i.rc" ]; then
            page_failures=$((page_failures + 1))
            if [ "$session_status" -eq 124 ] || [ "$session_status" -eq 137 ]; then
                echo "FAIL $where: \$ $first_line: did not end within the page's $page_timeout s"
            else
                echo "FAIL $where: \$ $first_line: did not run (the session ended with $session_status)"
            fi
            sed 's/^/    /' "$results/session.log" | tail -5
            continue
        fi
        status=$(<"$results/$i.rc")
        got_text=$(to_page "$(<"$results/$i.out")")
        split_lines "$got_text" got
        [ "$status" -eq 0 ] || got+=("[exit $status]")
        split_lines "${item_expect[i]}" expected
        compare=lines_match
        [ -n "${item_unordered[i]}" ] && compare=lines_match_unordered
        if ! "$compare" expected got; then
            page_failures=$((page_failures + 1))
            echo "FAIL $where: \$ $first_line"
            shown_expected expected got shown
            diff -u --label "expected ($where)" --label "got" <(printf '%s\n' "${shown[@]}") <(printf '%s\n' "${got[@]}") | sed 's/^/    /'
        fi
    done
    failures=$((failures + page_failures))
    if [ "$page_failures" -eq 0 ]; then
        echo "ok   $page: $page_run commands ($((SECONDS - page_started)) s)"
    else
        echo "FAIL $page: $page_failures of $page_run commands differ from the page"
    fi
done

for note in "${skip_notes[@]}"; do echo "     $note"; done
echo "$commands_run commands run, $failures differ from their page, $commands_skipped skipped; $((SECONDS - started_at)) s"
[ "$failures" -eq 0 ]
