#!/usr/bin/env bash
# Starts NRANKS processes of the interposer check program, each its own NCCL "host", under
# LD_PRELOAD=PLUGIN, on a topology with one GPU per host written by the program itself
# (BiGraph; TOPOLOGY_ARGS="--kind nap" for NAP), and waits for all of them. Rank r runs as
# the r-th host the topology lists (NCCL_HOSTID=s<r> on BiGraph).
#
#   run_ranks.sh DIR PLUGIN CHECK NRANKS MODE ALGO [CHECK's options...]
#
# DIR gets topology.json, hosts.txt, rank<r>.log and decisions.txt (topocoll's log lines of
# rank 0). Exit 0 only if every rank exited 0 and rank 0 logged that topocoll served the
# communicator (a check that silently fell back to NCCL proves nothing). Used by
# perf/gpu/run_all.sh on the GPU machine and by the host emulation's tests (tests/emu).
# RANK_TIMEOUT_S (default 300) bounds each process (SIGKILL 10 s after its SIGTERM); after the
# first rank fails, the others get RANK_GRACE_S (default 15) to end before they are killed,
# rather than waiting out their whole timeout for it. Extra environment passes through.
# FACES (default "preload") names how NCCL meets PLUGIN, comma-separated: preload
# (LD_PRELOAD, the interposer), net (NCCL_NET_PLUGIN: all inter-rank traffic over topocoll's
# net plugin; NCCL_TUNER_PLUGIN=none unless tuner is named too, as NCCL would otherwise take
# the tuner from the same library), tuner (NCCL_TUNER_PLUGIN). With net, rank 0 must log "Using network topocoll"
# and no rank may log that its host is missing from the topology.
# With TOPOCOLL_STEP_TIMES=1 every rank must log step times (exec/step_timeline.h) and none
# may warn that it dropped some. EXPECT_RANK0_LOG (when set) is text rank 0's log must hold:
# proof that what a run sets up (an injected failure) happened.
set -uo pipefail
if [ $# -lt 6 ]; then
  echo "usage: run_ranks.sh DIR PLUGIN CHECK NRANKS MODE ALGO [options...]" >&2
  exit 2
fi
dir=$1 plugin=$2 check=$3 n=$4 mode=$5 algo=$6
shift 6
mkdir -p "$dir"
# shellcheck disable=SC2086  # TOPOLOGY_ARGS is a word list
"$check" topology --nranks "$n" --out "$dir/topology.json" ${TOPOLOGY_ARGS:-} > "$dir/hosts.txt" || exit 1
mapfile -t hosts < <(cut -d' ' -f1 "$dir/hosts.txt")
if [ "${#hosts[@]}" -lt "$n" ]; then
  echo "run_ranks.sh: the topology has ${#hosts[@]} GPUs, fewer than $n ranks" >&2
  exit 1
fi
faces=${FACES:-preload}
face_env=()
for face in ${faces//,/ }; do
  case $face in
    preload) face_env+=(LD_PRELOAD="$plugin") ;;
    # NCCL 2.28 unloads the net plugin with its last communicator and forgets its name
    # (src/plugin/net.cc): a reference count of 1 keeps every communicator of the run on it.
    net) face_env+=(NCCL_NET_PLUGIN="$plugin" NCCL_NET_PLUGIN_REF_COUNT=1) ;;
    tuner) face_env+=(NCCL_TUNER_PLUGIN="$plugin") ;;
    *) echo "run_ranks.sh: FACES=$faces: unknown face '$face' (preload, net, tuner)" >&2; exit 2 ;;
  esac
done
has_face() { [[ ",$faces," == *",$1,"* ]]; }
# NCCL takes the tuner from the net plugin's library when NCCL_TUNER_PLUGIN is unset
# (src/plugin/tuner.cc): without the tuner face, say none, so the faces are exactly those named.
if has_face net && ! has_face tuner; then face_env+=(NCCL_TUNER_PLUGIN=none); fi
rm -f "$dir/id"
pids=()
for ((r = 0; r < n; r++)); do
  # shellcheck disable=SC2054  # the commas are in one value (NCCL_DEBUG_SUBSYS)
  cmd=(env NCCL_HOSTID="${hosts[$r]}" NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1 NCCL_DEBUG=INFO
       NCCL_DEBUG_SUBSYS=INIT,COLL,TUNING,ENV,NET TOPOCOLL_TOPO_FILE="$dir/topology.json"
       TOPOCOLL_ALGO="$algo" "${face_env[@]}" timeout -k 10 "${RANK_TIMEOUT_S:-300}"
       "$check" "$mode" --rank "$r" --nranks "$n" --id-file "$dir/id" "$@")
  [ "$r" -eq 0 ] && echo "(x$n, rank r: NCCL_HOSTID=<host r of hosts.txt> --rank <r>) ${TOPOLOGY_ARGS:+TOPOLOGY_ARGS=\"$TOPOLOGY_ARGS\" }${cmd[*]}" > "$dir/command.txt"
  "${cmd[@]}" > "$dir/rank$r.log" 2>&1 &
  pids+=($!)
done
rc=0
reaped=()
left=$n
deadline=
while [ "$left" -gt 0 ]; do
  # Bash's own list of its running children: an ended rank leaves it at once (its status kept
  # for `wait`), and unlike `kill -0` a pid reused by another process never looks like a rank.
  running=" $(jobs -rp | tr '\n' ' ') "
  for ((r = 0; r < n; r++)); do
    [ -z "${reaped[$r]:-}" ] || continue
    [[ $running == *" ${pids[$r]} "* ]] && continue
    reaped[r]=1
    left=$((left - 1))
    if ! wait "${pids[$r]}"; then
      echo "rank $r failed: $dir/rank$r.log" >&2
      rc=1
      [ -n "$deadline" ] || deadline=$((SECONDS + ${RANK_GRACE_S:-15}))
    fi
  done
  [ "$left" -gt 0 ] || break
  if [ -n "$deadline" ] && [ "$SECONDS" -ge "$deadline" ]; then
    # timeout passes SIGTERM to the rank, and SIGKILL 10 s later (-k).
    echo "run_ranks.sh: $left rank(s) still running ${RANK_GRACE_S:-15} s after the first failure: stopping them" >&2
    for ((r = 0; r < n; r++)); do [ -n "${reaped[$r]:-}" ] || kill -TERM "${pids[$r]}" 2>/dev/null; done
    deadline=$((SECONDS + 3600))
  fi
  sleep 0.2
done
grep -h "topocoll:" "$dir/rank0.log" > "$dir/decisions.txt" 2>/dev/null
if has_face preload && ! grep -q "served on topology" "$dir/rank0.log"; then
  echo "communicator not served (see $dir/rank0.log)" | tee -a "$dir/decisions.txt" >&2
  rc=1
fi
if has_face net; then
  if ! grep -q "Using network topocoll" "$dir/rank0.log"; then
    echo "NCCL did not use the topocoll net plugin (see $dir/rank0.log)" | tee -a "$dir/decisions.txt" >&2
    rc=1
  fi
  if grep -l "is not in topology" "$dir"/rank*.log >&2; then
    echo "the net plugin did not find its host in the topology (NCCL_HOSTID=<host>)" | tee -a "$dir/decisions.txt" >&2
    rc=1
  fi
fi
if [ "${TOPOCOLL_STEP_TIMES:-0}" = 1 ]; then
  for ((r = 0; r < n; r++)); do
    if ! grep -q "step times of" "$dir/rank$r.log"; then
      echo "rank $r logged no step times with TOPOCOLL_STEP_TIMES=1 (see $dir/rank$r.log)" | tee -a "$dir/decisions.txt" >&2
      rc=1
    fi
  done
  if grep -l "step-timing problems" "$dir"/rank*.log >&2; then
    echo "a rank dropped step times (see the logs above)" | tee -a "$dir/decisions.txt" >&2
    rc=1
  fi
fi
if [ -n "${EXPECT_RANK0_LOG:-}" ] && ! grep -qF "$EXPECT_RANK0_LOG" "$dir/rank0.log"; then
  echo "rank 0 did not log \"$EXPECT_RANK0_LOG\" (see $dir/rank0.log)" | tee -a "$dir/decisions.txt" >&2
  rc=1
fi
if has_face tuner && ! grep -q "TUNER/Plugin: Using topocoll" "$dir/rank0.log"; then
  echo "NCCL did not load the topocoll tuner (see $dir/rank0.log)" | tee -a "$dir/decisions.txt" >&2
  rc=1
fi
if [ $rc -ne 0 ]; then
  for ((r = 0; r < n; r++)); do
    echo "--- rank $r (last lines) ---" >&2
    tail -n 15 "$dir/rank$r.log" >&2
  done
fi
exit $rc
