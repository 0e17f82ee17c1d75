#!/usr/bin/env bash
# SLURM test lane: a real single-node SLURM (Debian's slurm-wlm + munge) on this machine,
# then tests/test_slurm_lane.py submits a small target of the default workflow through it.
#
# Run as root, no systemd needed; idempotent (reinstalls nothing that is there, restarts
# daemons it left behind in an earlier run, rewrites its config). Every daemon it starts is
# stopped on exit, by the pid in its pid file, newest first. Exits non-zero if a test fails.
#
#   bash .ci/slurm_lane.sh                 # uses $VIRTUAL_ENV, else <repo>/.venv, else python3
#   PYTHON=/path/to/python bash .ci/slurm_lane.sh
#   SLURM_LANE_SCRATCH=/tmp/x bash ...     # state, spool and logs (default /tmp/convrag-slurm-lane)
# Facts behind each step: ../shared/reference/local-slurm.md
set -euo pipefail
REPO="$(cd "$(dirname "$0")/.." && pwd)"
cd "$REPO"
SCRATCH="${SLURM_LANE_SCRATCH:-/tmp/convrag-slurm-lane}"
T0=$(date +%s)
log() { echo "[slurm-lane +$(($(date +%s) - T0))s] $*"; }

if [ "$(id -u)" != 0 ]; then
  echo "slurm_lane: must run as root (installs packages, starts munged/slurmctld/slurmd)" >&2
  exit 2
fi

if [ -z "${PYTHON:-}" ]; then
  if [ -n "${VIRTUAL_ENV:-}" ] && [ -x "$VIRTUAL_ENV/bin/python" ]; then PYTHON="$VIRTUAL_ENV/bin/python"
  elif [ -x "$REPO/.venv/bin/python" ]; then PYTHON="$REPO/.venv/bin/python"
  else PYTHON="$(command -v python3)"; fi
fi

# --- daemons we start, stopped on exit (newest first) ------------------------------------
STARTED=()   # pid files, in start order
stop_pidfile() {   # stop the process named in pid file $1, if it is still the daemon it names
  local f="$1" pid i
  [ -s "$f" ] || return 0
  pid="$(tr -dc 0-9 < "$f")"
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 0
  # a stale pid file from an earlier run may name a recycled pid: only stop our daemon
  [ "$(cat /proc/"$pid"/comm 2>/dev/null)" = "$(basename "$f" .pid)" ] || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for i in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.2; done
  echo "slurm_lane: pid $pid ($f) ignored SIGTERM for 10 s; SIGKILL" >&2
  kill -KILL "$pid" 2>/dev/null || true
}
cleanup() {
  local rc=$? i
  for ((i = ${#STARTED[@]} - 1; i >= 0; i--)); do
    log "stopping $(basename "${STARTED[$i]}" .pid) (pid $(cat "${STARTED[$i]}" 2>/dev/null || echo '?'))"
    stop_pidfile "${STARTED[$i]}"
  done
  if [ "$rc" != 0 ] && [ -d "$SCRATCH" ]; then
    for f in "$SCRATCH"/slurmctld.log "$SCRATCH"/slurmd.log; do
      [ -f "$f" ] && { echo "--- tail $f"; tail -n 30 "$f"; }
    done
  fi
  log "done, exit $rc"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Daemons left by an earlier run of this lane (e.g. killed before its trap ran): stop them by
# their pid files first, so the fresh config and state take effect.
for f in "$SCRATCH/slurmd.pid" "$SCRATCH/slurmctld.pid" "$SCRATCH/munge/munged.pid"; do stop_pidfile "$f"; done

# --- 1. packages, without letting their post-install scripts start services -------------
if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v sinfo >/dev/null \
   || ! command -v munged >/dev/null || ! command -v mungekey >/dev/null; then
  log "installing slurmctld slurmd slurm-client munge"
  POLICY=/usr/sbin/policy-rc.d
  SAVED=""
  if [ -e "$POLICY" ]; then SAVED="$(mktemp)"; cp -p "$POLICY" "$SAVED"; fi
  printf '#!/bin/sh\nexit 101\n' > "$POLICY"; chmod 755 "$POLICY"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends slurmctld slurmd slurm-client munge >/dev/null
  if [ -n "$SAVED" ]; then cp -p "$SAVED" "$POLICY"; rm -f "$SAVED"; else rm -f "$POLICY"; fi
fi
log "$(sinfo --version 2>/dev/null), $(munged --version 2>&1 | awk '{print $1}')"

# The executor plugin is a Python dependency (pyproject); install it if this env lacks it.
if ! "$PYTHON" -c "import importlib.util as u, sys; sys.exit(u.find_spec('snakemake_executor_plugin_slurm') is None)"; then
  log "snakemake-executor-plugin-slurm missing from $PYTHON's environment: installing it"
  "$PYTHON" -m pip install -q "snakemake-executor-plugin-slurm>=2.8,<3"
fi

# --- 2. munge ----------------------------------------------------------------------------
case "$SCRATCH" in /|"") echo "slurm_lane: bad SLURM_LANE_SCRATCH '$SCRATCH'" >&2; exit 2;; esac
rm -rf "$SCRATCH/ctld" "$SCRATCH/d" "$SCRATCH/munge" "$SCRATCH"/*.log "$SCRATCH"/*.pid
mkdir -p "$SCRATCH/ctld" "$SCRATCH/d" "$SCRATCH/munge"
chown munge:munge "$SCRATCH/munge"   # munged runs as user munge and writes its pid file here
if [ ! -s /etc/munge/munge.key ]; then
  mungekey -c -f -k /etc/munge/munge.key
fi
chown munge:munge /etc/munge/munge.key; chmod 400 /etc/munge/munge.key
mkdir -p /run/munge /var/log/munge /var/lib/munge
chown munge:munge /run/munge /var/log/munge /var/lib/munge
chmod 755 /run/munge
if munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
  log "munged already running (not ours: left running)"
else
  rm -f /run/munge/munge.socket.2 /run/munge/munge.socket.2.lock
  runuser -u munge -- /usr/sbin/munged --pid-file="$SCRATCH/munge/munged.pid"
  STARTED+=("$SCRATCH/munge/munged.pid")
  for i in $(seq 1 50); do munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && break; sleep 0.2; done
  munge -n | unmunge >/dev/null
  log "munged up (pid $(cat "$SCRATCH/munge/munged.pid"))"
fi

# --- 3. slurm.conf: one node, state and logs in $SCRATCH ----------------------------------
# The node also declares one fake GPU (GRES gpu, type a100, File=/dev/null): no real GPU is
# used, but SLURM schedules and records `--gpus=a100:1` requests, so the test can check that
# a GPU model's jobs ask for what the model registry says.
HOST="$(hostname -s)"
NCPU="$(nproc)"
MEM_MB="${SLURM_LANE_MEM_MB:-20000}"
mkdir -p /etc/slurm
cat > /etc/slurm/slurm.conf <<EOF
# written by .ci/slurm_lane.sh (ConvRAG-Grid SLURM test lane); rewritten on every run
ClusterName=ci
SlurmctldHost=$HOST
SlurmUser=root
AuthType=auth/munge
StateSaveLocation=$SCRATCH/ctld
SlurmdSpoolDir=$SCRATCH/d
SlurmctldPidFile=$SCRATCH/slurmctld.pid
SlurmdPidFile=$SCRATCH/slurmd.pid
SlurmctldLogFile=$SCRATCH/slurmctld.log
SlurmdLogFile=$SCRATCH/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/linux
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
ReturnToService=2
MinJobAge=3600
# CI runs this lane at nice 10 beside pytest, which keeps both cores busy: SLURM's defaults (10 s
# for a message, 10 s for a batch job to start, else it is "missing" and its allocation released)
# are for idle nodes. Longer limits, and the daemons back at nice 0 (below); each job takes the nice
# value of the sbatch that submitted it (PropagatePrioProcess=1), so jobs stay below pytest.
MessageTimeout=60
BatchStartTimeout=120
SlurmdTimeout=600
PropagatePrioProcess=1
MpiDefault=none
GresTypes=gpu
NodeName=$HOST CPUs=$NCPU RealMemory=$MEM_MB Gres=gpu:a100:1 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
cat > /etc/slurm/gres.conf <<EOF
# written by .ci/slurm_lane.sh: one fake GPU for scheduling tests (nothing runs on it)
NodeName=$HOST Name=gpu Type=a100 File=/dev/null
EOF

# --- 4. slurmctld, slurmd; wait for the node to be idle -----------------------------------
wait_pidfile() {
  local f="$1" i
  for i in $(seq 1 50); do [ -s "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null && return 0; sleep 0.2; done
  echo "slurm_lane: no live pid in $f" >&2; return 1
}
slurmctld
STARTED+=("$SCRATCH/slurmctld.pid")
wait_pidfile "$SCRATCH/slurmctld.pid"
slurmd
STARTED+=("$SCRATCH/slurmd.pid")
wait_pidfile "$SCRATCH/slurmd.pid"
state=""
for i in $(seq 1 120); do
  state="$(sinfo -h -o %t 2>/dev/null | head -n1 || true)"
  [ "$state" = idle ] && break
  sleep 0.5
done
if [ "$state" != idle ]; then
  echo "slurm_lane: node not idle after 60 s (sinfo state: '${state:-no answer}')" >&2
  exit 1
fi
log "slurmctld (pid $(cat "$SCRATCH/slurmctld.pid")) and slurmd (pid $(cat "$SCRATCH/slurmd.pid")) up; node idle"
# the daemons answer at normal priority even when the lane itself runs niced (CI: nice 10); only
# a daemon this lane started, and only where this shell was niced (root may lower a nice value)
for f in "${STARTED[@]}"; do
  pid="$(tr -dc 0-9 < "$f" 2>/dev/null || true)"
  [ -n "$pid" ] && renice -n 0 -p "$pid" >/dev/null 2>&1 || true
done
sinfo -o "%P %a %l %D %t %N %G"

# --- 5. the test -------------------------------------------------------------------------
log "pytest tests/test_slurm_lane.py with $PYTHON"
set +e
CONVRAG_SLURM_LANE=1 "$PYTHON" -m pytest -q -p no:cacheprovider -rs tests/test_slurm_lane.py "$@"
rc=$?
set -e
log "pytest exit $rc"
exit "$rc"
