#!/usr/bin/env bash
# Miniature lane (issue 44): each study's paper config run for real, in miniature, by
# `convrag miniature <study>` (config/miniatures/<study>.yaml over config/studies/<study>.yaml;
# a loopback download mirror of ../shared/data and a loopback OpenAI-compatible endpoint), each
# in a fresh folder, with the hub switched off (HF_HUB_OFFLINE=1, TRANSFORMERS_OFFLINE=1: the
# loopback servers are the only ones a run reaches).
#
#   bash .ci/miniature_lane.sh                    # all five studies
#   bash .ci/miniature_lane.sh coral worse_labels # these
#   MINIATURE_LANE_SCRATCH=/tmp/x bash ...        # run folders and logs (default /tmp/convrag-miniature-lane)
#   MINIATURE_LANE_CORES=4 bash ...               # convrag miniature --cores (default: nproc)
#   MINIATURE_LANE_START_BY=<epoch s> bash ...    # start no study after this time (CI's 90-minute
#                                                 # limit: .ci/run sets it); one not started is
#                                                 # listed 'NOT RUN (CI clock)', it does not fail
#
# Each study's whole output goes to <scratch>/<study>.log (its last 60 lines are printed when it
# fails). Printed per study: its exit code, `executed E of P rules` and its wall time; then a
# summary. The lane fails (exit 1) when a run exits non-zero, its last line is not
# `miniature <study>: executed E of P rules` with E = P (P: the rules of the paper config's own
# dry-run), or its reproduction page gives any verdict but "not comparable" (a miniature's rows
# are never compared with the paper: convrag.report.reproduction.miniature_reason). It runs every
# study it is given before failing, so one CI run shows them all.
set -euo pipefail
REPO="$(cd "$(dirname "$0")/.." && pwd)"
cd "$REPO"
SCRATCH="${MINIATURE_LANE_SCRATCH:-/tmp/convrag-miniature-lane}"
CORES="${MINIATURE_LANE_CORES:-$(nproc)}"
ALL=(lic_rag mtrag_un coral worse_labels cross)
STUDIES=("$@")
[ ${#STUDIES[@]} -gt 0 ] || STUDIES=("${ALL[@]}")
T0=$(date +%s)
log() { echo "[miniature-lane +$(($(date +%s) - T0))s] $*"; }

if [ -n "${VIRTUAL_ENV:-}" ] && [ -x "$VIRTUAL_ENV/bin/convrag" ]; then CONVRAG="$VIRTUAL_ENV/bin/convrag"
elif [ -x "$REPO/.venv/bin/convrag" ]; then CONVRAG="$REPO/.venv/bin/convrag"
else CONVRAG="$(command -v convrag || true)"; fi
if [ -z "$CONVRAG" ]; then
  echo "miniature_lane: no convrag (activate the venv: pip install -e \".[test]\")" >&2
  exit 2
fi
# the shared samples sit beside the repository (../shared/data): the mirror serves them
if [ ! -d "$REPO/../shared/data" ]; then
  echo "miniature_lane: the shared samples are not at $REPO/../shared/data: the miniatures' mirror serves them" >&2
  exit 2
fi
for s in "${STUDIES[@]}"; do
  [ -f "config/miniatures/$s.yaml" ] || { echo "miniature_lane: no config/miniatures/$s.yaml" >&2; exit 2; }
done
case "$SCRATCH" in /|"") echo "miniature_lane: bad MINIATURE_LANE_SCRATCH '$SCRATCH'" >&2; exit 2;; esac
mkdir -p "$SCRATCH"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
PATH="$(dirname "$CONVRAG"):$PATH"   # the jobs' `convrag` and `snakemake`: this venv's

SUMMARY=()
FAILED=0
NOT_RUN=0
for s in "${STUDIES[@]}"; do
  if [ -n "${MINIATURE_LANE_START_BY:-}" ] && [ "$(date +%s)" -ge "$MINIATURE_LANE_START_BY" ]; then
    NOT_RUN=$((NOT_RUN + 1))
    log "$s: NOT RUN: the CI clock passed MINIATURE_LANE_START_BY ($(date -u -d "@$MINIATURE_LANE_START_BY" +%T) UTC)"
    SUMMARY+=("$(printf '%-13s NOT RUN (CI clock past MINIATURE_LANE_START_BY)' "$s")")
    continue
  fi
  dir="$SCRATCH/$s"
  rm -rf "$dir"
  mkdir -p "$dir"
  log "$s: convrag miniature $s --cores $CORES --directory $dir (output: $SCRATCH/$s.log)"
  t=$(date +%s)
  set +e
  "$CONVRAG" miniature "$s" --cores "$CORES" --directory "$dir" > "$SCRATCH/$s.log" 2>&1
  rc=$?
  set -e
  secs=$(($(date +%s) - t))
  last="$(grep -v '^[[:space:]]*$' "$SCRATCH/$s.log" | tail -n 1)"
  why=""
  if [ "$rc" != 0 ]; then why="exit $rc"; fi
  if [[ "$last" =~ ^miniature\ $s:\ executed\ ([0-9]+)\ of\ ([0-9]+)\ rules$ ]]; then
    e="${BASH_REMATCH[1]}"; p="${BASH_REMATCH[2]}"
    [ "$e" = "$p" ] || why="${why:+$why; }E $e != P $p ($(grep -m1 "^miniature $s: not executed" "$SCRATCH/$s.log" || true))"
    counts="executed $e of $p rules"
  else
    why="${why:+$why; }last line is not 'miniature $s: executed E of P rules': '$last'"
    counts="no rule count"
  fi
  page="$dir/results/miniature_$s/$s/tables/reproduction.md"
  verdicts="no reproduction table"
  if [ -f "$page" ]; then
    verdicts="$(head -n 1 "$page")"
    if ! [[ "$verdicts" =~ ^([0-9]+)\ published\ numbers?:\ 0\ reproduced,\ 0\ not\ reproduced,\ 0\ inconclusive,\ ([0-9]+)\ not\ comparable$ ]] \
       || [ "${BASH_REMATCH[1]}" != "${BASH_REMATCH[2]}" ]; then
      why="${why:+$why; }a verdict other than 'not comparable' ($page: $verdicts)"
    fi
  elif [ -f "resources/published/$s.yaml" ]; then
    why="${why:+$why; }no reproduction page $page (the study has published numbers)"
  fi
  if [ -n "$why" ]; then
    FAILED=1
    log "$s: FAILED after ${secs} s: $why; the end of $SCRATCH/$s.log:"
    tail -n 60 "$SCRATCH/$s.log" | cut -c1-400
    SUMMARY+=("$(printf '%-13s FAILED  %5d s  %s (%s)' "$s" "$secs" "$counts" "$why")")
  else
    log "$s: ok in ${secs} s: $counts; $verdicts"
    SUMMARY+=("$(printf '%-13s ok      %5d s  %s' "$s" "$secs" "$counts")")
  fi
done

log "summary (${#STUDIES[@]} miniatures, $NOT_RUN not run for time, $CORES cores, $(($(date +%s) - T0)) s in all):"
printf '  %s\n' "${SUMMARY[@]}"
exit "$FAILED"
