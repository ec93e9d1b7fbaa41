#!/usr/bin/env bash
# A one-host Slurm cluster for dlaunch's tests: munged, slurmctld and slurmd on localhost with
# their own key, socket, ports, spool and logs under one state folder, so nothing of a Slurm
# already on the machine is touched.
#
#   slurm_cluster.sh start DIR   starts the daemons and waits until the node is idle; prints
#                                `export SLURM_CONF=...` for the client commands
#   slurm_cluster.sh stop DIR    stops them (SIGTERM, then SIGKILL after 10 s)
#
# Needs root and Debian's slurm-wlm and munge. proctrack/linuxproc and task/none, because the
# cgroup plugins need a cgroup tree a container rarely gives. Every wait is bounded.
set -euo pipefail

action=${1:?usage: slurm_cluster.sh start|stop DIR}
dir=${2:?usage: slurm_cluster.sh start|stop DIR}
ctld_port=${DLAUNCH_SLURMCTLD_PORT:-16817}
slurmd_port=${DLAUNCH_SLURMD_PORT:-16818}
cpus=${DLAUNCH_SLURM_CPUS:-8}

stop_daemon() {  # pidfile
  [ -f "$1" ] || return 0
  local pid
  pid=$(cat "$1")
  kill -TERM "$pid" 2>/dev/null || { rm -f "$1"; return 0; }
  for _ in $(seq 100); do
    kill -0 "$pid" 2>/dev/null || { rm -f "$1"; return 0; }
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
  rm -f "$1"
}

if [ "$action" = stop ]; then
  stop_daemon "$dir/slurmd.pid"
  stop_daemon "$dir/slurmctld.pid"
  stop_daemon "$dir/munged.pid"
  exit 0
fi
[ "$action" = start ] || { echo "slurm_cluster.sh: unknown action '$action'" >&2; exit 2; }

mkdir -p "$dir/ctld" "$dir/spool" "$dir/munge"
chmod 700 "$dir/munge"
[ -f "$dir/munge/munge.key" ] || dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
chmod 600 "$dir/munge/munge.key"
cat >"$dir/slurm.conf" <<CONF
ClusterName=dlaunch-test
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.socket
StateSaveLocation=$dir/ctld
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
ReturnToService=2
KillWait=5
MinJobAge=600
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
CONF
export SLURM_CONF="$dir/slurm.conf"

/usr/sbin/munged --force --socket="$dir/munge/munge.socket" --key-file="$dir/munge/munge.key" \
  --pid-file="$dir/munged.pid" --log-file="$dir/munged.log" --seed-file="$dir/munge/seed"
/usr/sbin/slurmctld -c -f "$SLURM_CONF"
/usr/sbin/slurmd -N localhost -f "$SLURM_CONF"

# Ready when the controller answers and the node takes jobs.
for _ in $(seq 300); do
  state=$(timeout 5 sinfo -h -n localhost -o %t 2>/dev/null || true)
  case "$state" in
    idle*|mix*|alloc*) echo "export SLURM_CONF=$SLURM_CONF"; exit 0 ;;
  esac
  sleep 0.1
done
echo "slurm_cluster.sh: the node never became idle (state '${state:-none}'); logs in $dir" >&2
exit 1
