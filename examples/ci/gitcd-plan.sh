#!/bin/sh
# Run `gitcd plan` on the checkout in the current directory, as a CI job on
# every pull request (or merge request) does, and write a report to post.
#
# Usage: gitcd-plan.sh [CLUSTERS_DIR]          (default: clusters)
#
# Environment:
#   GITCD                  the gitcd binary (default: gitcd on PATH)
#   GITCD_PLAN_STATE       a copy of the production state database, or "none"
#                          (default): then every cluster is planned as a create
#   GITCD_PLAN_REPORT      the Markdown report to write (default: gitcd-plan.md)
#   GITCD_PLAN_JSON        the JSON plan to write (default: gitcd-plan.json)
#   GITCD_PLAN_FAIL_ON_CHANGES=1   exit 2 when there are changes (default: 0)
#   GITHUB_ACTIONS, GITHUB_STEP_SUMMARY   set by GitHub Actions: every error
#                          becomes an annotation on its file and line, and the
#                          report is added to the job summary
#
# The plan reads the files as they are checked out (--plain-directory), which
# is what a pull request would merge; the state database is only read.
#
# Exit status: 0 the plan is clean (changes or not); 1 a document or a
# transition was rejected, or gitcd failed; 2 changes pending, only with
# GITCD_PLAN_FAIL_ON_CHANGES=1.
set -u

gitcd=${GITCD:-gitcd}
clusters=${1:-clusters}
state=${GITCD_PLAN_STATE:-none}
report=${GITCD_PLAN_REPORT:-gitcd-plan.md}
json=${GITCD_PLAN_JSON:-gitcd-plan.json}

work=$(mktemp -d) || exit 1
trap 'rm -rf "$work"' EXIT INT TERM

if [ "$state" = none ]; then
        state="$work/no-state/state.db" # never created: nothing applied yet
elif [ ! -f "$state" ]; then
        echo "gitcd-plan.sh: GITCD_PLAN_STATE=$state does not exist (use \"none\")" >&2
        exit 1
fi

set -- --source . --plain-directory --path "$clusters" --state "$state"
NO_COLOR=1 "$gitcd" plan "$@" --detailed-exitcode >"$work/plan.txt" 2>"$work/plan.err"
status=$?
"$gitcd" plan "$@" -o json >"$json" 2>/dev/null || true

case $status in
0) verdict="No changes." ;;
2) verdict="Changes pending: applying this revision changes the clusters below." ;;
1) verdict="Rejected: this revision has invalid documents or forbidden changes." ;;
*) verdict="gitcd plan could not run (exit status $status)." ;;
esac

commit=$(git log -1 --format='%h %an: %s' 2>/dev/null || echo "(not a Git checkout)")
{
        echo "### gitcd plan"
        echo
        echo "Commit $commit"
        echo
        echo "**$verdict**"
        echo
        echo '```'
        cat "$work/plan.txt" "$work/plan.err"
        echo '```'
} >"$report"

cat "$work/plan.txt"
cat "$work/plan.err" >&2

if [ "${GITHUB_ACTIONS:-}" = true ]; then
        # "    clusters/a.yaml:8:12: error: message" -> an annotation on that line.
        sed -n 's/^ *\([^ :][^:]*\):\([0-9][0-9]*\):\([0-9][0-9]*\): error: \(.*\)$/::error file=\1,line=\2,col=\3::\4/p' \
                "$work/plan.txt" "$work/plan.err"
        if [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then
                cat "$report" >>"$GITHUB_STEP_SUMMARY"
        fi
fi

case $status in
0) exit 0 ;;
2) [ "${GITCD_PLAN_FAIL_ON_CHANGES:-0}" = 1 ] && exit 2 || exit 0 ;;
*) exit 1 ;;
esac
