#!/usr/bin/env bash
# A throw-away single-node Slurm cluster on this machine (Debian's slurm-wlm + munge), for
# tests/integration/slurm/test_slurm.py and for trying `make cluster` without a real cluster.
#
#   tools/slurm_local.sh start    write /etc/slurm/slurm.conf, start munged,
#                                 slurmctld and slurmd, wait until the node is idle
#   tools/slurm_local.sh stop     stop them again (by the pids in their pid files; munged
#                                 only if `start` started it), and leave slurm.conf in its
#                                 stopped form (below); also on a machine with no slurm.conf
#   tools/slurm_local.sh status   exit 0 if the cluster answers, 1 if not
#
# Idempotent: `start` on a running cluster and `stop` on a stopped one do nothing (exit 0);
# `start` prints "started" when it started slurmctld itself, "running" when it was up.
# Needs root (slurmd runs jobs as their submitter) and `apt-get install slurm-wlm munge`.
# The cluster: partition `main` (default), one node with this machine's CPUs, no
# accounting database (so run the Slurm executor with `--slurm-status-command squeue
# --slurm-no-account`), MinJobAge 3600 s (squeue shows finished jobs for an hour), and
# one GPU per CPU declared without a device (SLURM_LOCAL_GPUS): jobs that ask for GPUs, as
# profiles/slurm's neural training jobs do, are scheduled as on a GPU cluster and run on CPUs.
# It never touches a slurm.conf it did not write (the first line carries a marker).
#
# The stopped form adds MessageTimeout=1: a Slurm client then fails at once when no
# slurmctld answers, instead of retrying for MessageTimeout - 1 s (9 s by default; with no
# slurm.conf at all it looks for a configless controller in DNS, 10-60 s). Snakemake pays
# that on every start while snakemake-executor-plugin-slurm is installed: the plugin runs
# `scontrol show config` when Snakemake imports it (2.8.0, __init__.py,
# _get_status_command_help), for any executor. `start` writes the config without it.
set -euo pipefail

CONF=${SLURM_CONF:-/etc/slurm/slurm.conf}
GRES=$(dirname "$CONF")/gres.conf
GPUS=${SLURM_LOCAL_GPUS:-$(nproc)}  # declared GPUs, none real (write_conf)
FAKE_GPUS=/run/cdgtmll-slurm-gpus
MARK="# written by cdgtmll tools/slurm_local.sh"
CTLD_PID=/run/slurmctld.pid
SLURMD_PID=/run/slurmd.pid
MUNGE_PID=/run/munge/munged.pid
OWN_MUNGE=/run/cdgtmll-slurm-local.munged   # exists while a munged started here runs

die() { echo "slurm_local: $*" >&2; exit "${2:-1}"; }
alive() { [ -f "$1" ] && running "$(pid_of "$1")"; }
ours() { [ -f "$CONF" ] && [ "$(head -n1 "$CONF")" = "$MARK" ]; }
up() { scontrol ping 2>/dev/null | grep -q "is UP"; }

write_conf() {  # [stopped]: with MessageTimeout=1 (above)
  local host mem
  host=$(hostname -s)
  # Memory is not a consumable resource here (CR_Core) and slurmd does not check the
  # node against the declared size (config_overrides): requests like the train rule's
  # mem_mb=8000 are accepted on small CI machines too.
  mem=$(awk '/MemTotal/ {print int($2 / 1024)}' /proc/meminfo)
  [ "$mem" -ge 32000 ] || mem=32000
  mkdir -p "$(dirname "$CONF")"
  cat > "$CONF" <<CONF
$MARK
ClusterName=local
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=$CTLD_PID
SlurmdPidFile=$SLURMD_PID
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
ReturnToService=2
MinJobAge=3600
KillWait=5
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
GresTypes=gpu
NodeName=$host NodeAddr=127.0.0.1 CPUs=$(nproc) RealMemory=$mem Gres=gpu:$GPUS State=UNKNOWN
PartitionName=main Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
  if [ "${1:-}" = stopped ]; then
    echo "MessageTimeout=1  # stopped (tools/slurm_local.sh stop): clients fail at once" >> "$CONF"
  fi
  # GPUs the node declares with empty files for devices: `sbatch --gpus=1` is accepted and
  # scheduled as on a GPU cluster, and the job trains on the CPU (torch finds no CUDA)
  mkdir -p "$FAKE_GPUS"
  for i in $(seq 0 $((GPUS - 1))); do : > "$FAKE_GPUS/gpu$i"; done
  cat > "$GRES" <<CONF
$MARK
AutoDetect=off
NodeName=$host Name=gpu File=$FAKE_GPUS/gpu[0-$((GPUS - 1))]
CONF
}

start() {
  command -v slurmctld >/dev/null || die "slurmctld not installed (apt-get install slurm-wlm munge)" 2
  [ "$(id -u)" = 0 ] || die "must run as root" 2
  if [ -f "$CONF" ] && ! ours; then
    die "$CONF exists and was not written by this script: not touching this machine's Slurm" 3
  fi
  if ours && up && alive "$SLURMD_PID"; then echo running; return 0; fi
  up || write_conf  # (re)written only while no slurmctld runs on it
  mkdir -p /var/spool/slurmctld /var/spool/slurmd /var/log/slurm /run/munge /etc/munge
  if ! alive "$MUNGE_PID"; then
    [ -s /etc/munge/munge.key ] || mungekey -c
    chown -R munge: /etc/munge /var/lib/munge /var/log/munge /run/munge
    chmod 0700 /etc/munge
    su -s /bin/sh munge -c munged
    touch "$OWN_MUNGE"
  fi
  alive "$CTLD_PID" || slurmctld
  alive "$SLURMD_PID" || slurmd
  for _ in $(seq 60); do
    state=$(sinfo -h -o %t 2>/dev/null || true)
    case "$state" in
      idle|mix|alloc) echo started; return 0 ;;
      drain*|down*) scontrol update nodename="$(hostname -s)" state=resume 2>/dev/null || true ;;
    esac
    sleep 0.5
  done
  die "node not idle after 30 s (state '${state:-?}'); see /var/log/slurm/"
}

pid_of() { cat "$1" 2>/dev/null || true; }
running() {  # pid: alive and not a zombie
  [ -n "$1" ] && kill -0 "$1" 2>/dev/null && ! awk '{exit !($3 == "Z")}' "/proc/$1/stat" 2>/dev/null
}
stop_pid() {  # pid: wait up to 20 s for it to exit (after a SIGTERM if $2 = term), then SIGKILL
  running "$1" || return 0
  [ "${2:-}" = term ] && kill "$1" 2>/dev/null
  for _ in $(seq 40); do running "$1" || return 0; sleep 0.5; done
  kill -9 "$1" 2>/dev/null || true
}

stop() {
  if [ -f "$CONF" ] && ! ours; then
    die "$CONF was not written by this script: not stopping this machine's Slurm" 3
  fi
  local ctld slurmd munged
  ctld=$(pid_of "$CTLD_PID"); slurmd=$(pid_of "$SLURMD_PID"); munged=$(pid_of "$MUNGE_PID")
  # `scontrol shutdown` stops slurmctld and every slurmd; plain signals if it cannot
  if running "$ctld"; then scontrol shutdown >/dev/null 2>&1 || kill "$ctld" 2>/dev/null || true; fi
  stop_pid "$ctld"
  stop_pid "$slurmd" term
  if [ -f "$OWN_MUNGE" ]; then stop_pid "$munged" term; fi  # never a munged this script did not start
  rm -f "$CTLD_PID" "$SLURMD_PID" "$OWN_MUNGE"
  [ "$(id -u)" != 0 ] || write_conf stopped
  echo stopped
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) ours && up ;;
  *) echo "usage: $0 start|stop|status" >&2; exit 64 ;;
esac
