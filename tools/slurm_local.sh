#!/usr/bin/env bash
# A throw-away single-node Slurm cluster with job accounting on this machine (Debian's slurm-wlm,
# slurmdbd, munge and MariaDB), for tests/integration/slurm/test_slurm.py and for trying
# `make cluster` without a real cluster.
#
#   tools/slurm_local.sh start [DIR]   start the cluster (munged, MariaDB, slurmdbd, slurmctld,
#                                      slurmd), wait until its node is idle
#   tools/slurm_local.sh stop [DIR]    stop it: its jobs' processes (also those a lost node left
#                                      behind), then its daemons; exit 1 if any process remains
#   tools/slurm_local.sh status [DIR]  exit 0 if the cluster answers, 1 if not
#
# DIR: a cluster of its own, everything in DIR: slurm.conf, slurmdbd.conf and gres.conf, the
#   controller's state, the node's spool, logs, pid files, its own munged (socket and key) and
#   its own MariaDB server (data folder); its own ports (four free ones picked at start, kept in
#   DIR/cluster.env) and its own cluster name. Two clusters in two DIRs share nothing, so two
#   test runs at once cannot see each other's jobs. Clients find it with SLURM_CONF=DIR/slurm.conf
#   (start prints that line); jobs inherit it from sbatch, and its slurmd runs in a mount
#   namespace where /etc/slurm is DIR, for the srun a job's Snakemake starts without it (start).
# No DIR: the machine's cluster: its slurm.conf is /etc/slurm/slurm.conf, where clients look
#   without SLURM_CONF, and its state is in /var/lib/cdgtmll-slurm. `stop` then leaves
#   /etc/slurm/slurm.conf in its stopped form (below); also on a machine with no slurm.conf.
#
# Idempotent: `start` on a running cluster and `stop` on a stopped one do nothing (exit 0);
# `start` prints "started" when it started the cluster, "running" when it was up.
# Needs root (slurmd runs jobs as their submitter) and
#   apt-get install slurm-wlm slurmdbd munge mariadb-server
# The cluster: partition `main` (default), one node with this machine's CPUs; job accounting in
# slurmdbd (sacct works, as on a real cluster: the Slurm executor's default status command),
# associations enforced, with the account `cdgtmll` for root; JobRequeue=0 (a job is requeued
# after a node failure only when it asks, sbatch --requeue: profiles/slurm's `requeue: true`),
# and a requeued job may start again 10 s later (AuthInfo cred_expire; Slurm's default is
# 120 s; the scheduler looks every 5 s, SchedulerParameters); one GPU per CPU declared without a device (SLURM_LOCAL_GPUS): jobs that ask for GPUs,
# as profiles/slurm's neural training jobs do, are scheduled as on a GPU cluster and run on CPUs.
# It never touches a slurm.conf it did not write (the first line carries a marker).
#
# A job's processes are tracked by process group (ProctrackType=proctrack/pgid): when a job ends,
# also on a node failure, Slurm signals its whole group, so a process whose parent died first
# goes too. (proctrack/linuxproc follows parent pids only: after a node failure the batch
# script's shell died first and the Snakemake it had started, reparented to init, kept running
# beside the requeued job. proctrack/cgroup would name each job's cgroup by its job id alone,
# which two clusters on one machine share.) The processes of a cluster: its daemons carry
# CDGTMLL_SLURM_CLUSTER=<state folder> in their environment (slurmstepd inherits it from
# slurmd), its jobs' processes SLURM_CLUSTER_NAME=<its unique name> (Slurm sets it); `stop`
# ends every process with either, also one that left its job's process group.
#
# The stopped form of /etc/slurm/slurm.conf adds MessageTimeout=1: a Slurm client then fails at
# once when no slurmctld answers, instead of retrying for MessageTimeout - 1 s (9 s by default;
# with no slurm.conf at all it looks for a configless controller in DNS, 10-60 s). Snakemake
# pays that on every start while snakemake-executor-plugin-slurm is installed: the plugin runs
# `scontrol show config` when Snakemake imports it (2.8.0, __init__.py,
# _get_status_command_help), for any executor. `start` writes the config without it.
set -euo pipefail
export PATH="$PATH:/usr/sbin:/sbin"

MARK="# written by cdgtmll tools/slurm_local.sh"
LOCK=/run/cdgtmll-slurm-local.lock   # held while a cluster picks its ports and starts
DB_NAME=slurm_acct_db
ACCOUNT=cdgtmll

die() { echo "slurm_local: $1" >&2; exit "${2:-1}"; }

layout() {  # [DIR]: where everything of the cluster lives
  if [ -n "${1:-}" ]; then
    case "$1" in
      *[[:space:]=,\#]*) die "DIR '$1' holds a space, '=', ',' or '#', which slurm.conf cannot carry in a path" 64 ;;
    esac
    STATE=$(realpath -m "$1")
    CONF=$STATE/slurm.conf
    MACHINE=
  else
    STATE=/var/lib/cdgtmll-slurm
    CONF=/etc/slurm/slurm.conf
    MACHINE=1
  fi
  ETC=$(dirname "$CONF")
  RUN=$STATE/run; LOG=$STATE/log; MUNGE=$STATE/munge; DB=$STATE/db
  SOCK=$MUNGE/munge.socket
  export SLURM_CONF=$CONF CDGTMLL_SLURM_CLUSTER=$STATE
}

ours() { [ -f "$1" ] && [ "$(head -n1 "$1")" = "$MARK" ]; }
up() { scontrol ping 2>/dev/null | grep -q "is UP"; }
pid_of() { cat "$1" 2>/dev/null || true; }
running() {  # pid: alive and not a zombie
  [ -n "$1" ] && kill -0 "$1" 2>/dev/null && ! awk '{exit !($3 == "Z")}' "/proc/$1/stat" 2>/dev/null
}
alive() { running "$(pid_of "$1")"; }

port_free() {  # port: nothing on this machine uses it (any TCP state, IPv4 or IPv6)
  local hex
  hex=$(printf '%04X' "$1")
  ! awk -v p=":$hex" 'NR > 1 && substr($2, length($2) - 4) == p {found = 1} END {exit !found}' \
    /proc/net/tcp /proc/net/tcp6 2>/dev/null
}

pick_ports() {  # four free ports below the ephemeral range, for ctld, slurmd, slurmdbd, MariaDB
  local base i ok
  for _ in $(seq 200); do
    base=$((10000 + (RANDOM % 5000) * 4))
    ok=1
    for i in 0 1 2 3; do port_free $((base + i)) || { ok=; break; }; done
    if [ -n "$ok" ]; then
      CTLD_PORT=$base; SLURMD_PORT=$((base + 1)); DBD_PORT=$((base + 2)); DB_PORT=$((base + 3))
      return 0
    fi
  done
  die "no four free TCP ports found in 10000-30000"
}

write_env() {
  local tmp=$STATE/cluster.env.tmp
  cat > "$tmp" <<ENV
NAME=$NAME
CTLD_PORT=$CTLD_PORT
SLURMD_PORT=$SLURMD_PORT
DBD_PORT=$DBD_PORT
DB_PORT=$DB_PORT
DB_PASS=$DB_PASS
ENV
  chmod 600 "$tmp"
  mv "$tmp" "$STATE/cluster.env"
}

read_env() { [ -f "$STATE/cluster.env" ] && . "$STATE/cluster.env"; }

write_file() {  # path mode: stdin to path, through a temporary file
  local tmp
  tmp="$1.tmp.$$"
  cat > "$tmp"
  chmod "$2" "$tmp"
  mv "$tmp" "$1"
}

write_conf() {  # [stopped]: with MessageTimeout=1 (above)
  local host mem gpus
  host=$(hostname -s)
  gpus=${SLURM_LOCAL_GPUS:-$(nproc)}  # declared GPUs, none real
  # Memory is not a consumable resource here (CR_Core) and slurmd does not check the
  # node against the declared size (config_overrides): requests like the train rule's
  # mem_mb=8000 are accepted on small CI machines too.
  mem=$(awk '/MemTotal/ {print int($2 / 1024)}' /proc/meminfo)
  [ "$mem" -ge 32000 ] || mem=32000
  mkdir -p "$ETC"
  {
    cat <<CONF
$MARK
ClusterName=$NAME
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
AuthType=auth/munge
AuthInfo=socket=$SOCK,cred_expire=10
ProctrackType=proctrack/pgid
TaskPlugin=task/none
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=5,sched_interval=5
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/slurmd
SlurmctldPidFile=$RUN/slurmctld.pid
SlurmdPidFile=$RUN/slurmd.pid
SlurmctldLogFile=$LOG/slurmctld.log
SlurmdLogFile=$LOG/slurmd.log
ReturnToService=2
JobRequeue=0
MinJobAge=3600
KillWait=5
JobAcctGatherType=jobacct_gather/linux
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=$DBD_PORT
AccountingStoragePass=$SOCK
AccountingStorageEnforce=associations
GresTypes=gpu
NodeName=$host NodeAddr=127.0.0.1 Port=$SLURMD_PORT CPUs=$(nproc) RealMemory=$mem Gres=gpu:$gpus State=UNKNOWN
PartitionName=main Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
    if [ "${1:-}" = stopped ]; then
      echo "MessageTimeout=1  # stopped (tools/slurm_local.sh stop): clients fail at once"
    fi
  } | write_file "$CONF" 644
  # GPUs the node declares with empty files for devices: `sbatch --gpus=1` is accepted and
  # scheduled as on a GPU cluster, and the job trains on the CPU (torch finds no CUDA)
  mkdir -p "$STATE/gpus"
  for i in $(seq 0 $((gpus - 1))); do : > "$STATE/gpus/gpu$i"; done
  write_file "$ETC/gres.conf" 644 <<CONF
$MARK
AutoDetect=off
NodeName=$host Name=gpu File=$STATE/gpus/gpu[0-$((gpus - 1))]
CONF
  write_file "$ETC/slurmdbd.conf" 600 <<CONF
$MARK
AuthType=auth/munge
AuthInfo=socket=$SOCK
DbdHost=$host
DbdAddr=127.0.0.1
DbdPort=$DBD_PORT
SlurmUser=root
PidFile=$RUN/slurmdbd.pid
LogFile=$LOG/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=slurm
StoragePass=$DB_PASS
StorageLoc=$DB_NAME
CONF
}

wait_for() {  # seconds what command...: until the command succeeds
  local secs=$1 what=$2 end=$((SECONDS + $1))
  shift 2
  until "$@" >/dev/null 2>&1; do
    [ "$SECONDS" -lt "$end" ] || die "$what did not come up in $secs s; see $LOG/"
    sleep 0.25
  done
}

start_munge() {
  mkdir -p "$MUNGE"
  chmod 0700 "$MUNGE"
  [ -s "$MUNGE/munge.key" ] || mungekey --create --keyfile="$MUNGE/munge.key" >/dev/null
  chmod 0600 "$MUNGE/munge.key"
  alive "$MUNGE/munged.pid" || munged --force --socket="$SOCK" --key-file="$MUNGE/munge.key" \
    --pid-file="$MUNGE/munged.pid" --log-file="$LOG/munged.log" --seed-file="$MUNGE/munged.seed" 2>>"$LOG/munged.log" 9>&-
  wait_for 10 munged munge --socket="$SOCK" --no-input --output=/dev/null
}

mariadb_cmd() { mariadb --no-defaults --socket="$DB/mysqld.sock" -u root "$@"; }

start_mariadb() {
  if [ ! -d "$DB/mysql" ]; then
    rm -rf "$DB"
    mariadb-install-db --no-defaults --datadir="$DB" --user=root --skip-test-db --skip-name-resolve \
      > "$LOG/mariadb-install.log" 2>&1 || die "mariadb-install-db failed; see $LOG/mariadb-install.log"
  fi
  if ! alive "$RUN/mariadbd.pid"; then
    # its own data folder, socket and port, on 127.0.0.1 only; small and without fsync per
    # commit: a throw-away accounting database
    setsid mariadbd --no-defaults --user=root --datadir="$DB" --socket="$DB/mysqld.sock" \
      --port="$DB_PORT" --bind-address=127.0.0.1 --skip-name-resolve --pid-file="$RUN/mariadbd.pid" \
      --log-error="$LOG/mariadbd.log" --innodb-buffer-pool-size=32M --innodb-log-file-size=16M \
      --innodb-flush-log-at-trx-commit=0 --innodb-doublewrite=0 --performance-schema=OFF \
      --max-connections=40 </dev/null >/dev/null 2>&1 9>&- &
  fi
  wait_for 60 MariaDB mariadb_cmd -e "select 1"
  mariadb_cmd -e "CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY '$DB_PASS';
    ALTER USER 'slurm'@'127.0.0.1' IDENTIFIED BY '$DB_PASS';
    GRANT ALL ON $DB_NAME.* TO 'slurm'@'127.0.0.1';"
}

start() {
  local cmd
  for cmd in slurmctld slurmd slurmdbd munged mariadbd mariadb-install-db sacctmgr; do
    command -v "$cmd" >/dev/null || die "$cmd not installed (apt-get install slurm-wlm slurmdbd munge mariadb-server)" 2
  done
  [ "$(id -u)" = 0 ] || die "must run as root" 2
  for f in "$CONF" "$ETC/slurmdbd.conf" "$ETC/gres.conf"; do
    if [ -f "$f" ] && ! ours "$f"; then
      die "$f exists and was not written by this script: not touching this machine's Slurm" 3
    fi
  done
  mkdir -p "$RUN" "$LOG" "$STATE/ctld" "$STATE/slurmd"
  chmod 0700 "$STATE"
  # one cluster at a time picks its ports and starts (seconds); the daemons do not inherit the
  # lock's descriptor (9>&-), so it ends with this script
  exec 9>"$LOCK"
  flock 9
  if read_env && ours "$CONF" && up && alive "$RUN/slurmd.pid"; then echo running; return 0; fi
  if ! read_env || ! alive "$RUN/slurmctld.pid"; then
    # (re)written only while no slurmctld runs on it
    if [ -n "$MACHINE" ]; then NAME=local; else NAME=c$(( $(od -An -N4 -tu4 /dev/urandom) % 1000000 )); fi
    pick_ports
    DB_PASS=$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')
    write_env
    write_conf
  fi
  start_munge
  start_mariadb
  alive "$RUN/slurmdbd.pid" || slurmdbd 9>&-
  wait_for 60 slurmdbd sacctmgr -n show cluster
  if [ -z "$(sacctmgr -n -P show cluster format=cluster "cluster=$NAME")" ]; then
    sacctmgr -i add cluster "$NAME" >/dev/null
    sacctmgr -i add account "$ACCOUNT" cluster="$NAME" description="cdgtmll test jobs" organization=cdgtmll >/dev/null
    sacctmgr -i add user root account="$ACCOUNT" defaultaccount="$ACCOUNT" cluster="$NAME" >/dev/null
  fi
  alive "$RUN/slurmctld.pid" || slurmctld 9>&-
  if ! alive "$RUN/slurmd.pid"; then
    if [ -n "$MACHINE" ]; then
      slurmd 9>&-
    else
      # the node sees this cluster's config at /etc/slurm (a mount namespace of its own): inside
      # a job, snakemake-executor-plugin-slurm-jobstep 0.6.1 starts srun without SLURM_CONF (it
      # drops every SLURM_* variable but the job's identity), so srun reads /etc/slurm/slurm.conf
      mkdir -p /etc/slurm
      unshare --mount --propagation private sh -c 'mount --bind "$1" /etc/slurm && exec slurmd' sh "$ETC" 9>&- \
        || die "could not start slurmd in a mount namespace of its own (unshare --mount; see $LOG/slurmd.log)"
    fi
  fi
  local state=
  for _ in $(seq 120); do
    state=$(sinfo -h -o %t 2>/dev/null || true)
    case "$state" in
      idle|mix|alloc)
        echo started
        [ -n "$MACHINE" ] || echo "SLURM_CONF=$CONF"
        return 0 ;;
      drain*|down*) scontrol update nodename="$(hostname -s)" state=resume 2>/dev/null || true ;;
    esac
    sleep 0.25
  done
  die "node not idle after 30 s (state '${state:-?}'); see $LOG/"
}

procs() {  # the pids of this cluster's processes: its daemons and its jobs' (header, above)
  local p
  for p in /proc/[0-9]*; do
    p=${p#/proc/}
    [ "$p" = $$ ] && continue
    if { [ -n "${NAME:-}" ] && grep -qzx "SLURM_CLUSTER_NAME=$NAME" "/proc/$p/environ"; } 2>/dev/null ||
       grep -qzx "CDGTMLL_SLURM_CLUSTER=$STATE" "/proc/$p/environ" 2>/dev/null; then
      running "$p" && echo "$p"
    fi
  done
}

stop_pid() {  # pid: wait up to 20 s for it to exit (after a SIGTERM if $2 = term), then SIGKILL
  running "$1" || return 0
  [ "${2:-}" = term ] && kill "$1" 2>/dev/null
  for _ in $(seq 80); do running "$1" || return 0; sleep 0.25; done
  kill -9 "$1" 2>/dev/null || true
}

stop() {
  local f left pids
  for f in "$CONF" "$ETC/slurmdbd.conf"; do
    if [ -f "$f" ] && ! ours "$f"; then
      die "$f was not written by this script: not stopping this machine's Slurm" 3
    fi
  done
  read_env || true
  # the jobs first, while slurmctld still answers: their records end in the database too
  if [ -f "$CONF" ] && alive "$RUN/slurmctld.pid"; then
    scancel --full --user=root >/dev/null 2>&1 || true
    scontrol shutdown >/dev/null 2>&1 || true   # slurmctld and slurmd
  fi
  for f in slurmctld slurmd slurmdbd mariadbd; do stop_pid "$(pid_of "$RUN/$f.pid")" term; done
  if [ -n "$MACHINE" ]; then  # a cluster started by an earlier version of this script
    for f in /run/slurmctld.pid /run/slurmd.pid; do stop_pid "$(pid_of "$f")" term; rm -f "$f"; done
    if [ -f /run/cdgtmll-slurm-local.munged ]; then  # the machine's munged, when that version started it
      stop_pid "$(pid_of /run/munge/munged.pid)" term
      rm -f /run/cdgtmll-slurm-local.munged
    fi
  fi
  stop_pid "$(pid_of "$MUNGE/munged.pid")" term
  # what is left: a job's processes, a slurmstepd, anything a lost node left behind
  pids=$(procs)
  if [ -n "$pids" ]; then
    kill $pids 2>/dev/null || true
    for p in $pids; do stop_pid "$p"; done
  fi
  rm -f "$RUN"/*.pid "$MUNGE/munged.pid"
  if [ -n "$MACHINE" ] && [ "$(id -u)" = 0 ]; then
    : "${NAME:=local}" "${CTLD_PORT:=6817}" "${SLURMD_PORT:=6818}" "${DBD_PORT:=6819}" "${DB_PORT:=6820}" "${DB_PASS:=}"
    write_conf stopped
  fi
  left=$(procs)
  [ -z "$left" ] || die "still running after stop: $(echo $left | xargs -n1 -I{} sh -c 'echo "{} $(tr "\0" " " < /proc/{}/cmdline | cut -c1-80)"' 2>/dev/null)"
  echo stopped
}

case "${1:-}" in
  start) layout "${2:-}"; start ;;
  stop) layout "${2:-}"; stop ;;
  status) layout "${2:-}"; read_env && ours "$CONF" && up ;;
  *) echo "usage: $0 start|stop|status [DIR]" >&2; exit 64 ;;
esac
