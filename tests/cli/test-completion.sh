#!/bin/bash
# gitcd completion: the bash script `gitcd completion bash` prints parses
# (bash -n), registers itself (complete -p gitcd) and, driven through
# bash's own completion variables (COMP_WORDS, COMP_CWORD, COMPREPLY),
# completes commands (pl<TAB> -> plan), a command's options from its
# option table (plan --sin<TAB> -> --since, diff --su<TAB> -> --summary),
# a choice's values (plan -o <TAB>), a verb (snapshot <TAB>) and the shell
# of completion itself. The zsh script is checked for its #compdef line, with
# `zsh -n`, and its dispatch with zsh's completion functions replaced by ones
# that print what they get (scripts/setup installs zsh; without it only the
# line is checked, and the test says so).
set -eu
: "${GITCD_BIN:?}"
fail() { echo "FAIL: $*"; exit 1; }
tmp=$(mktemp -d -t gitcd-completion.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

"$GITCD_BIN" completion bash >"$tmp/gitcd.bash"
bash -n "$tmp/gitcd.bash" || fail "bash -n refuses the script"

# complete WORDS...: what the script offers for the last word
complete_words() {
  bash -c '
    source "$1"; shift
    complete -p gitcd | grep -q -- "-F _gitcd" || { echo "NOT REGISTERED"; exit 1; }
    COMP_WORDS=("$@"); COMP_CWORD=$(( $# - 1 ))
    COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}
    _gitcd
    printf "%s\n" "${COMPREPLY[@]}"
  ' complete "$tmp/gitcd.bash" "$@"
}

expect() { # expect "WANT" WORDS...
  want=$1; shift
  got=$(complete_words "$@" | sort | tr '\n' ' ' | sed 's/ $//')
  [ "$got" = "$want" ] || fail "completing '$*': got '$got', want '$want'"
  echo "ok: '$*' -> $got"
}

expect "plan" gitcd pl
expect "diff" gitcd di
expect "completion" gitcd --log-level debug comp
expect "debug" gitcd --log-level de
expect "--since" gitcd plan --sin
expect "--summary" gitcd diff --su
expect "json text" gitcd plan -o ""
expect "--follow" gitcd log --fol
expect "list" gitcd snapshot li
expect "bash zsh" gitcd completion ""
# an option that takes a file completes file names
touch "$tmp/state-here.db"
expect "$tmp/state-here.db" gitcd log --state "$tmp/state-h"

"$GITCD_BIN" completion zsh >"$tmp/_gitcd"
head -n 1 "$tmp/_gitcd" | grep -qx '#compdef gitcd' || fail "the zsh script has no #compdef line"
grep -q "'--since\[" "$tmp/_gitcd" || fail "the zsh script lacks plan --since"
if command -v zsh >/dev/null 2>&1; then
  zsh -n "$tmp/_gitcd" || fail "zsh -n refuses the zsh script"
  echo "ok: zsh -n"
  # The script's dispatch, with zsh's completion functions replaced by ones
  # that print what they are given: the commands at the second word, and a
  # command's own options after it.
  cat >"$tmp/dispatch.zsh" <<'ZSH'
_describe() { local arr=$4; print -l -- ${(P)arr} }
_arguments() { print -l -- "$@" }
source $1
words=(gitcd pl); CURRENT=2; _gitcd
print -- ----
words=(gitcd plan --sin); CURRENT=3; _gitcd
ZSH
  zsh "$tmp/dispatch.zsh" "$tmp/_gitcd" >"$tmp/zsh-out" || fail "the zsh script's function failed"
  sed -n '1,/^----$/p' "$tmp/zsh-out" | grep -q '^plan:' || fail "zsh: no plan among the commands"
  sed -n '/^----$/,$p' "$tmp/zsh-out" | grep -q -- '^--since\[' || fail "zsh: plan's options lack --since"
  echo "ok: zsh completes commands and a command's options"
else
  echo "zsh is not installed (scripts/setup installs it): the zsh script's syntax is not checked"
fi

# bad usage
if "$GITCD_BIN" completion fish >/dev/null 2>"$tmp/err"; then fail "completion fish succeeded"; fi
grep -q "give the shell: bash or zsh" "$tmp/err" || fail "completion fish: $(cat "$tmp/err")"
echo "all completion checks passed"
