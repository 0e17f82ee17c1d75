#!/usr/bin/env bash
# The lanes CI runs beside pytest, one after another (.ci/run starts this script in the background,
# at nice 10, in its own process group, so that a failing pytest ends it):
#   1. the miniature lane for the studies given (.ci/miniature_lane.sh);
#   2. the vLLM lane (.ci/vllm_lane.sh; its venv is built by `.ci/vllm_lane.sh prepare`, started
#      first, beside the miniature lane: pip is mostly I/O);
#   3. the SLURM lane (.ci/slurm_lane.sh; its paper config in miniature: $CONVRAG_SLURM_MINIATURE).
# Why one after another and not after pytest: pytest keeps about one of the two cores busy before
# the default's build and two thirds of the machine during it (measured on this 2-core host), and
# the three lanes together take about as long as pytest, so CI's time is about pytest's.
#
#   bash .ci/background_lanes.sh LOG_DIR [study ...]
#
# Each lane's whole output goes to LOG_DIR/<lane>.log; every lane runs even when an earlier one
# failed, so one CI run shows them all. Printed: one line per lane (exit, seconds, and its end as
# seconds after $CI_T0, CI's start); exit 1 when any lane failed.
set -uo pipefail
cd "$(dirname "$0")/.."
LOGS="${1:?usage: background_lanes.sh LOG_DIR [study ...]}"
shift
mkdir -p "$LOGS"
CI_T0="${CI_T0:-$(date +%s)}"
FAILED=0
say() { echo "[lanes +$(($(date +%s) - CI_T0))s] $*"; }

bash .ci/vllm_lane.sh prepare > "$LOGS/vllm_prepare.log" 2>&1 &
PREPARE=$!

lane() {  # lane NAME COMMAND...: run it, its output to LOGS/NAME.log, and say how it went
  local name=$1 t rc
  shift
  t=$(date +%s)
  say "$name: started"
  "$@" > "$LOGS/$name.log" 2>&1
  rc=$?
  [ "$rc" = 0 ] || FAILED=1
  say "$name: exit $rc after $(($(date +%s) - t)) s"
}

lane miniature bash .ci/miniature_lane.sh "$@"
if wait "$PREPARE"; then
  # its outputs (converted model, simulate jobs with accounting files) outside the repository's
  # results/: pytest is running there, and a test that sizes from a default run in results/
  # (test_estimate_studies) must not find the lane's accounting files
  lane vllm env CONVRAG_VLLM_LANE_OUT="$LOGS/vllm_lane" bash .ci/vllm_lane.sh
else
  FAILED=1
  say "vllm: NOT RUN: its venv failed (the end of $LOGS/vllm_prepare.log follows)"
  tail -n 40 "$LOGS/vllm_prepare.log"
fi
lane slurm bash .ci/slurm_lane.sh
exit "$FAILED"
