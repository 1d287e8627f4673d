#!/bin/bash
# check_page.sh: one man page against the program it documents.
#   check_page.sh PAGE [--help-cmd "PROGRAM ARGS..."]... [--header-dir DIR]
# 1. `groff -man -ww -z PAGE` prints nothing (no warning of any kind).
# 2. With --help-cmd (repeatable): the long options the commands print
#    (every "--name" in their output) are exactly the options the page
#    documents (every "\-\-name" in the tag line of a .TP entry), both ways;
#    each difference is one line naming the option, the page and what to do.
#    A placeholder the help spells like an option (seckilld's "--name
#    value") is declared in the page: .\" check_page: not an option: --name
# 3. With --header-dir (the library's page): every dlock_err code of
#    dlock.h and every header of DIR is named in the page, and the page names
#    no DLOCK_E* code the header lacks.
# A section 1 or 8 page given no --help-cmd fails: register its program in
# tests/man/CMakeLists.txt.
set -uo pipefail

page=$1
shift
helps=()
header_dir=""
while [ $# -gt 0 ]; do
    case $1 in
        --help-cmd) helps+=("$2"); shift 2 ;;
        --header-dir) header_dir=$2; shift 2 ;;
        *) echo "check_page.sh: unknown argument '$1'" >&2; exit 2 ;;
    esac
done
name=$(basename "$page")
fails=0
fail() { echo "FAIL $name: $*"; fails=$((fails + 1)); }

warnings=$(groff -man -ww -z "$page" 2>&1)
[ -z "$warnings" ] || fail "groff -man -ww -z warns:"$'\n'"$warnings"

# The long options a page documents: those in .TP tag lines, with roff's
# \- and font escapes undone. Prints "option line" pairs.
page_options() {
    awk '
        tag { t = $0; gsub(/\\-/, "-", t); gsub(/\\f[BIRP]/, "", t)
              while (match(t, /--[a-z][a-z0-9-]*/)) {
                  print substr(t, RSTART, RLENGTH), NR; t = substr(t, RSTART + RLENGTH) }
              tag = 0; next }
        /^\.TP/ { tag = 1 }' "$1" | sort -u -k1,1
}

check_help() {
    local documented listed cmd opt where
    documented=$(page_options "$page")
    listed=""
    for cmd in "${helps[@]}"; do
        local out
        # shellcheck disable=SC2086  # the command is a word list by design
        if ! out=$($cmd 2>&1); then fail "'$cmd' failed:"$'\n'"$out"; continue; fi
        listed+=$(grep -o -- '--[a-z][a-z0-9-]*' <<<"$out")$'\n'
    done
    local placeholders
    placeholders=$(sed -n 's/^\.\\" check_page: not an option: //p' "$page" | tr ' ' '\n')
    listed=$(sort -u <<<"$listed" | sed '/^$/d' | grep -vxF -e "${placeholders:-//}")
    local shown
    shown=$(printf "'%s' " "${helps[@]##*/}")
    for opt in $listed; do
        grep -q -- "^$opt " <<<"$documented" ||
            fail "option $opt is in the output of ${shown}but not documented in $page: add a .TP entry for it"
    done
    while read -r opt where; do
        [ -n "$opt" ] || continue
        grep -qx -- "$opt" <<<"$listed" ||
            fail "option $opt is documented in $page (line $where) but the output of ${shown}lacks it: remove the entry, or add the option to --help"
    done <<<"$documented"
}

check_header() {
    local h code
    for h in "$header_dir"/*.h; do
        grep -q "dlock/$(basename "$h")" "$page" || fail "header dlock/$(basename "$h") is not named in $page"
    done
    for code in $(grep -o 'DLOCK_E[A-Z]*' "$header_dir/dlock.h" | sort -u); do
        grep -q "$code\\b" "$page" || fail "error code $code (dlock.h) is not described in $page"
    done
    for code in $(grep -o 'DLOCK_E[A-Z]*' "$page" | sort -u); do
        grep -q "$code\\b" "$header_dir/dlock.h" || fail "$page names $code, which dlock.h does not define"
    done
}

case $name in *.1 | *.8) [ ${#helps[@]} -gt 0 ] ||
    fail "no --help command is registered for this page: add it to tests/man/CMakeLists.txt" ;;
esac
[ ${#helps[@]} -eq 0 ] || check_help
[ -z "$header_dir" ] || check_header
if [ $fails -gt 0 ]; then
    echo "$name: $fails problem(s)"
    exit 1
fi
echo "ok $name"
