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
# 3. Every "--name" the page names anywhere (prose and examples included, but
#    not what follows a lone "--" on a line: that is COMMAND's, as dlock
#    passes it on) is one the page's program accepts (its --help lists it),
#    a declared placeholder, or declared as another program's option:
#      .\" check_page: options of PROGRAM: --a --b
#    which holds only if `PROGRAM --help` lists each of them.
#    And the URL forms: every scheme ("redis-cluster://") the --help output
#    names is named in the page, and every server scheme the page names
#    (Redis, Sentinel, Cluster, unix, etcd, SQLite, PostgreSQL) is in --help.
# 4. The documents a page sends readers to are installed: it names no
#    docs/X of the source tree, and every /usr/share/doc/PKG/X it names is
#    one cmake/packaging.cmake installs (PKG:X in deb_docs, or README.md).
# 5. With --header-dir (the library's page): every dlock_err code of
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
        help_text+=$out$'\n'
    done
    local placeholders
    placeholders=$(sed -n 's/^\.\\" check_page: not an option: //p' "$page" | tr ' ' '\n')
    listed=$(sort -u <<<"$listed" | sed '/^$/d' | grep -vxF -e "${placeholders:-//}")
    listed_all=$listed
    placeholders_all=$placeholders
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

# Every long option named anywhere in page $1, outside comments and after
# roff's \- and font escapes are undone. Prints "option line" pairs.
named_options() {
    awk '
        /^\.\\"/ { next }
        { t = $0; gsub(/\\-/, "-", t); gsub(/\\f[BIRP]/, "", t); gsub(/\\f\(../, "", t)
          sub(/(^| )--( .*)?$/, "", t)
          while (match(t, /--[a-z][a-z0-9-]*/)) {
              print substr(t, RSTART, RLENGTH), NR; t = substr(t, RSTART + RLENGTH) } }' "$1"
}

# Options the page declares as another program's; each must be in that
# program's --help. The accepted ones go to $foreign (one a line).
foreign=""
foreign_options() {
    local prog opts out opt
    while IFS=: read -r prog opts; do
        [ -n "$prog" ] || continue
        if ! out=$($prog --help 2>&1); then
            fail "'$prog --help' (declared in $page) failed"; continue
        fi
        for opt in $opts; do
            if grep -qw -- "$opt" <<<"$out"; then foreign+=$opt$'\n'
            else fail "$page declares $opt an option of $prog, but '$prog --help' lacks it"; fi
        done
    done < <(sed -n 's/^\.\\" check_page: options of \([^:]*\):/\1:/p' "$page")
}

# 3. above: an option the page names that nothing accepts is a lie.
check_named() {
    local accepted opt where
    foreign_options
    accepted=$(printf '%s\n' "$listed_all" "$foreign" "$placeholders_all")
    while read -r opt where; do
        [ -n "$opt" ] || continue
        grep -qx -- "$opt" <<<"$accepted" ||
            fail "$page names $opt (line $where), which its program does not accept (not in its --help): remove or correct it"
    done < <(named_options "$page" | sort -u -k1,1)
}

# Every scheme ("xyz://") in text, once.
schemes() { grep -oE '[a-z][a-z+-]*://' | sort -u; }
server_scheme() { grep -qxE '(redis|rediss|unix|redis-sentinel|redis-cluster|etcd|etcds|sqlite|postgresql)://' <<<"$1"; }

check_urls() {
    local text in_help in_page sch
    text=$(sed '/^\.\\"/d; s/\\-/-/g; s/\\f[BIRP]//g' "$page")
    in_page=$(schemes <<<"$text")
    in_help=$(schemes <<<"$help_text")
    for sch in $in_help; do
        grep -qxF -- "$sch" <<<"$in_page" ||
            fail "the --help output names the URL form $sch, $page does not: add it where the URL option is described"
    done
    for sch in $in_page; do
        server_scheme "$sch" || continue
        grep -qxF -- "$sch" <<<"$in_help" ||
            fail "$page names the URL form $sch, the --help output does not: add it to the URL option's help"
    done
}

check_docs() {
    local text ref pkg rel packaging
    packaging=$(dirname "$0")/../../cmake/packaging.cmake
    text=$(sed '/^\.\\"/d; s/\\-/-/g; s/\\f[BIRP]//g' "$page")
    for ref in $(grep -oE '(^|[^a-z/])docs/[A-Za-z0-9._/-]*[A-Za-z0-9]' <<<"$text" | sed 's/^[^d]*//' | sort -u); do
        fail "$page sends readers to $ref of the source tree, which a package does not have: name its installed /usr/share/doc/PACKAGE/ path"
    done
    for ref in $(grep -oE '/usr/share/doc/[A-Za-z0-9._/-]*[A-Za-z0-9/]' <<<"$text" | sort -u); do
        pkg=${ref#/usr/share/doc/}
        rel=${pkg#*/}
        pkg=${pkg%%/*}
        [ "$rel" = "$pkg" ] || [ -z "$rel" ] || [ "$rel" = README.md ] && continue
        grep -qE "(^|[[:space:]])$pkg:$rel([[:space:]]|\)|$)" "$packaging" ||
            fail "$page names $ref, which cmake/packaging.cmake does not install (add $pkg:$rel to deb_docs)"
    done
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
listed_all=""
placeholders_all=""
help_text=""
[ ${#helps[@]} -eq 0 ] || { check_help; check_urls; }
check_named
check_docs
[ -z "$header_dir" ] || check_header
if [ $fails -gt 0 ]; then
    echo "$name: $fails problem(s)"
    exit 1
fi
echo "ok $name"
