#!/usr/bin/env bash
# Runs the interposer check's one-process mode (check-all: NDEV communicators from
# ncclCommInitAll driven from one thread, as nccl-tests -g NDEV) under LD_PRELOAD=PLUGIN,
# on a BiGraph topology whose server s0 holds the NDEV GPUs (the process is NCCL_HOSTID=s0,
# communicator i is on GPU i), written by the program itself.
#
#   run_all_in_one.sh DIR PLUGIN CHECK NDEV ALGO [CHECK's options...]
#
# DIR gets topology.json, hosts.txt, all.log and decisions.txt (topocoll's log lines).
# Exit 0 only if the check passed and topocoll served all NDEV communicators (a check that
# silently fell back to NCCL proves nothing). For the host emulation (tests/emu) and
# multi-GPU machines: on one GPU NCCL refuses two ranks of a communicator on one device.
# RANK_TIMEOUT_S (default 300) bounds the process; extra environment passes through.
set -uo pipefail
if [ $# -lt 5 ]; then
  echo "usage: run_all_in_one.sh DIR PLUGIN CHECK NDEV ALGO [options...]" >&2
  exit 2
fi
dir=$1 plugin=$2 check=$3 n=$4 algo=$5
shift 5
mkdir -p "$dir"
"$check" topology --nranks "$n" --gpus-per-host "$n" --out "$dir/topology.json" > "$dir/hosts.txt" || exit 1
cmd=(env NCCL_HOSTID=s0 NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1 NCCL_DEBUG=INFO
     NCCL_DEBUG_SUBSYS=INIT,COLL,TUNING,ENV TOPOCOLL_TOPO_FILE="$dir/topology.json"
     TOPOCOLL_ALGO="$algo" LD_PRELOAD="$plugin" timeout "${RANK_TIMEOUT_S:-300}"
     "$check" check-all --ndev "$n" "$@")
echo "${cmd[*]}" > "$dir/command.txt"
"${cmd[@]}" > "$dir/all.log" 2>&1
rc=$?
[ $rc -ne 0 ] && echo "check-all failed (exit $rc): $dir/all.log" >&2
grep -h "topocoll:" "$dir/all.log" > "$dir/decisions.txt" 2>/dev/null
served=$(grep -c "served on topology" "$dir/all.log")
if [ "$served" -lt "$n" ]; then
  echo "$served of $n communicators served (see $dir/all.log)" | tee -a "$dir/decisions.txt" >&2
  rc=1
fi
if [ $rc -ne 0 ]; then
  echo "--- last lines of $dir/all.log ---" >&2
  tail -n 25 "$dir/all.log" >&2
fi
[ $rc -eq 0 ]
