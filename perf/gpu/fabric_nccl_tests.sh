#!/usr/bin/env bash
# nccl-tests on GPUs over an emulated fabric: plain NCCL against NCCL with topocoll, the
# headline record (docs/fabric.md, "The GPU record"). On the GPU machine, as root, under
# MPS, every rank its own process, its own NCCL host and its own network namespace of
# `topocoll fabric`, all ranks on the one GPU:
#
#   NCCL_TESTS_SRC=perf/gpu/nccl-tests STAGES=fabric-nccl RESULTS_DIR=/tmp/gpu RESULTS_TAR=$OUT/gpu.tgz \
#     DEADLINE_S=540 bash perf/gpu/run_all.sh
#   bash perf/gpu/fabric_nccl_tests.sh [BUILD_DIR]      (nccl-tests built in BUILD_DIR/nccl-tests)
#   DRY_RUN=1 bash perf/gpu/fabric_nccl_tests.sh build  (no GPU, no root: prints every command,
#                                                        writes the predictions and hostfiles)
#
# For each topology (FABRIC_TOPOLOGIES, default "bigraph-32 nap-4x8") and rank count
# (FABRIC_RANKS, default 16) the fabric comes up at FABRIC_RATE Mbit/s (default 1000) and
# each nccl-tests binary (FABRIC_COLLS: all_reduce reduce_scatter all_gather) runs, under
# mpirun through `topocoll fabric rank-exec`, once per path (FABRIC_PATHS):
#   nccl            plain NCCL, ranks placed as a scheduler places them (the first endpoints)
#   nccl-order      plain NCCL, ranks in the order of the `topocoll order` hostfile
#   tuner           NCCL with NCCL_TUNER_PLUGIN=libnccl-topocoll.so
#   preload-ALGO    LD_PRELOAD=libnccl-topocoll.so with TOPOCOLL_ALGO=ALGO (BiGraph: auto hd
#                   ring-topo nccl-topo-ring; NAP: auto fc hier nccl-topo-ring)
#   PATH+VARIANT    PATH with one NCCL setting changed, a run of its own in the record:
#                   p2p2 = NCCL_NCHANNELS_PER_NET_PEER=2 (two connections per peer for
#                   ncclSend/ncclRecv, as NCCL's ring has two channels; at 16 ranks NCCL
#                   gives point-to-point one, graph/paths.cc ncclTopoGetNchannels);
#                   steps = TOPOCOLL_STEP_TIMES=1 (preload paths only: rank 0 logs every
#                   schedule step's time, and the record fits a fixed cost per step and a
#                   rate to them)
# then, at FABRIC_CHECK_RATE (default half the rate), all_reduce again for FABRIC_CHECK_PATHS
# (default "nccl preload-auto", empty for none): at a rate where the network is the
# bottleneck the time doubles. NT_ARGS (default "-b 256K -e 64M -f 4 -c 1 -w 1 -n 1") go to every binary: -c 1
# checks every result; -w 1 runs each size once untimed first, so the timed iteration does not
# include NCCL connecting its ring at the communicator's first collective (records made with
# -w 0 time one cold iteration per size: device.txt's NT_ARGS says which).
#
# runs.tsv's last column names the call that ran each run (its start, UTC): the record compares
# times only between runs of one call, as times of two calls (fresh machines) do not compare.
# Records made before that column existed have none; the record then says it cannot tell.
#
# The cables' shaper: FABRIC_PEAK_SLACK_US goes to every `fabric up` as --peak-slack-us
# (unset: the fabric's default). The record keeps the value it ran with (peak-slack-us) and a
# resumed call uses it; one that asks for another is refused, as its times would not compare.
# Records made before that setting existed ran with one-frame peak buckets (0).
#
# Every run's full output is its own log, rank 0 at NCCL_DEBUG=INFO with
# NCCL_DEBUG_SUBSYS=INIT,TUNING (the others at WARN), so each figure, the rank count and
# whether topocoll served the communicator can be read from the log alone. Beside every run
# the cost model's prediction (`topocoll fabric predict`) for the schedule its log says ran;
# perf/gpu/fabric_nccl_record.py makes table.md, record.json and one SVG plot of bus
# bandwidth per size per path for each case.
#
# It fits 10-minute calls: runs go in the order above, each only if its predicted duration
# fits what is left of BUDGET seconds (default 540, counted from the script's start; run_all.sh
# passes what is left of its call, or of its DEADLINE_S); a run that does not fit is left for
# the next call with the same RESULTS_DIR (default perf/results/gpu-fabric-<device>-<date>),
# which skips the runs that passed (exit 0) and runs again those that failed or timed out.
# COPY_TO=DIR copies the record into DIR after every run and when the script ends (run_all.sh
# names its own RESULTS_DIR). RESULTS_TAR=FILE (the device tool's $OUT/gpu.tgz; only $OUT comes
# back, at most 8 files) then archives DIR, or without COPY_TO the record, into that one file
# at the same moments: a call cut off at its limit keeps what it measured. Put the record back
# at RESULTS_DIR in the work tree before the next call, so it travels with it (docs/fabric.md).
# The dry run prints the device time the whole matrix needs. RUN_TIMEOUT (default 300) bounds
# one run, and so does what is left of the budget; a run whose fabric is not up yet must also
# leave FABRIC_UP_S (default 20) for its start, or it waits for the next call.
# Exit status 0 when every run that ran passed (runs left for the next call are no
# failure; calls.md lists them).
set -uo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(realpath -m "${1:-$root/build-gpu}")  # absolute: make -C and the ranks run elsewhere
dry=${DRY_RUN:-0}
t0=$SECONDS
budget=${BUDGET:-540}
run_timeout=${RUN_TIMEOUT:-300}
up_seconds=${FABRIC_UP_S:-20}  # a fabric's start and cable check, reserved before a run that needs one
fabric=${FABRIC_NAME:-gpunt}
topologies=${FABRIC_TOPOLOGIES:-bigraph-32 nap-4x8}
ranks_list=${FABRIC_RANKS:-16}
rate=${FABRIC_RATE:-1000}
check_rate=${FABRIC_CHECK_RATE:-$((rate / 2))}
check_paths=${FABRIC_CHECK_PATHS-nccl preload-auto}
colls=${FABRIC_COLLS:-all_reduce reduce_scatter all_gather}
nt_args=${NT_ARGS:--b 256K -e 64M -f 4 -c 1 -w 1 -n 1}
read -ra nt_words <<< "$nt_args"
record=$root/perf/gpu/fabric_nccl_record.py
cli=${TOPOCOLL_CLI:-$build/tools/topocoll}
nt_build=${NT_BUILD:-$build/nccl-tests}
plugin=${PLUGIN:-$(find "$build" -name libnccl-topocoll.so -type f 2>/dev/null | head -n1)}
[ -n "$plugin" ] || plugin=$build/plugin/libnccl-topocoll.so

gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n1)
[ -n "$gpu" ] || gpu="no-gpu"
device=$(printf '%s' "$gpu" | tr -cs 'A-Za-z0-9' '-' | sed 's/^-*//; s/-*$//')
out=${RESULTS_DIR:-$root/perf/results/gpu-fabric-$device-$(date -u +%Y%m%d)}
mkdir -p "$out"
manifest=$out/runs.tsv
[ -f "$manifest" ] || printf '# name\ttopology\tranks\trate_mbit\tbinary\tpath\tplacement\texit\tseconds\tlog\tcall\n' > "$manifest"
call_id=$(date -u +%Y%m%dT%H%M%SZ)  # this call, in every row it adds to runs.tsv
failed=0
deferred=()
dry_total=0
dry_runs=0

say() { echo "fabric-nccl [+$((SECONDS - t0)) s]: $*"; }
log_cmd() { printf '%s\n' "$*" >> "$out/commands.txt"; }
# A command as it can be pasted into a shell (plain words stay as they are).
quoted() {
  local w s=""
  for w in "$@"; do
    if [[ "$w" =~ ^[A-Za-z0-9_./:=,@+%-]+$ ]]; then s+="$w "; else s+="$(printf '%q' "$w") "; fi
  done
  printf '%s' "${s% }"
}
left() { echo $((budget - (SECONDS - t0))); }
# need_of PREDICT BINARY PATH: the run's predicted seconds; fails when there is no number.
need_of() {
  local need
  need=$(python3 "$record" estimate --predict "$1" --coll "${2}_perf" --path "$3" --nt-args "$nt_args") &&
    [[ "$need" =~ ^[0-9]+$ ]] && echo "$need"
}
# Predictions made only to size a run before its fabric is up (not part of the record).
scratch=$(mktemp -d)
# The record so far into COPY_TO, then COPY_TO (or the record) into RESULTS_TAR, so it
# survives a call cut off later (written beside it and renamed: a kill mid-write leaves the
# previous archive whole).
copy_out() {
  [ -n "${COPY_TO:-}" ] && mkdir -p "$COPY_TO" && cp -r "$out" "$COPY_TO/"
  [ -n "${RESULTS_TAR:-}" ] && [ "$dry" != 1 ] || return 0
  local dir=${COPY_TO:-$out} tmp=$RESULTS_TAR.tmp$BASHPID
  # tar's 1 is "a file changed while read" (a log still being written): the archive stands.
  if { tar --warning=no-file-changed -C "$(dirname "$dir")" -cf - "$(basename "$dir")" 2> /dev/null; [ $? -le 1 ]; } |
     gzip -1 > "$tmp"; then
    mv -f "$tmp" "$RESULTS_TAR"
  else
    rm -f "$tmp"
  fi
}

[ -x "$cli" ] || { echo "fabric_nccl_tests.sh: no topocoll CLI at $cli (build first)" >&2; exit 1; }
# The shaper the record ran with: every call of one record uses the same.
slack_file=$out/peak-slack-us
recorded_slack=$(cat "$slack_file" 2>/dev/null || true)
slack=${FABRIC_PEAK_SLACK_US:-$recorded_slack}
if [ -n "$slack" ] && ! [[ "$slack" =~ ^[0-9]+([.][0-9]+)?$ ]]; then
  echo "fabric_nccl_tests.sh: FABRIC_PEAK_SLACK_US='$slack': expected microseconds (a number >= 0)" >&2
  exit 1
fi
if [ -n "$recorded_slack" ] && [ "$slack" != "$recorded_slack" ]; then
  echo "fabric_nccl_tests.sh: the record in $out ran with --peak-slack-us $recorded_slack ($slack_file);" \
       "FABRIC_PEAK_SLACK_US=$slack would make its times incomparable: use $recorded_slack or a new RESULTS_DIR" >&2
  exit 1
fi
if [ "$dry" != 1 ]; then
  [ "$(id -u)" = 0 ] || { echo "fabric_nccl_tests.sh: root is needed (network namespaces)" >&2; exit 1; }
  for binary in $colls; do
    [ -x "$nt_build/${binary}_perf" ] || { echo "fabric_nccl_tests.sh: no $nt_build/${binary}_perf (run_all.sh builds it from NCCL_TESTS_SRC)" >&2; exit 1; }
  done
  command -v mpirun > /dev/null || { echo "fabric_nccl_tests.sh: mpirun is not installed" >&2; exit 1; }
  [ -f "$plugin" ] || { echo "fabric_nccl_tests.sh: no libnccl-topocoll.so in $build" >&2; exit 1; }
fi
# The same NCCL and iproute2 as run_all.sh's stages, also when this script runs on its own.
# shellcheck source=perf/gpu/gpu_env.sh
. "$root/perf/gpu/gpu_env.sh"

# --- MPS: without it every rank waits for its GPU time slice and no timing means anything ---
# As run_all.sh (perf/gpu/mps.sh): a daemon already running is used and left running.
# shellcheck source=perf/gpu/mps.sh
. "$root/perf/gpu/mps.sh"
fabric_is_up=0
# shellcheck disable=SC2317  # reached through the trap
cleanup() {
  rm -rf "$scratch"
  # The record leaves the machine with the call (COPY_TO, RESULTS_TAR) first: cut short at the
  # call's deadline, run_all.sh gives this trap 10 s before it kills the script.
  copy_out
  stop_mps
  [ "$fabric_is_up" = 1 ] && timeout -k 2 15 "$cli" fabric down --name "$fabric" > /dev/null 2>&1
}
trap cleanup EXIT

{
  echo "# fabric nccl-tests on $gpu, $(date -u '+%Y-%m-%d %H:%M UTC')$([ "$dry" = 1 ] && echo ' (dry run)')"
  echo "commit $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  nvidia-smi 2>&1 | head -n 12
  echo "kernel $(uname -r); iproute2: ${TOPOCOLL_FABRIC_IPROUTE2:-system}; $(mpirun --version 2>/dev/null | head -n 1)"
  echo "plugin $plugin; NCCL_HOME ${NCCL_HOME:-unset}; LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
  echo "NT_ARGS=$nt_args BUDGET=$budget RUN_TIMEOUT=$run_timeout"
} >> "$out/device.txt"
[ "$dry" = 1 ] || start_mps "the runs"

kind_of() { case $1 in nap*) echo nap ;; *) echo bigraph ;; esac; }
paths_for() {
  if [ -n "${FABRIC_PATHS:-}" ]; then echo "$FABRIC_PATHS"; return; fi
  case $(kind_of "$1") in
    nap) echo "nccl preload-auto preload-fc preload-hier nccl-order preload-nccl-topo-ring tuner" ;;
    *) echo "nccl preload-auto nccl-order preload-ring-topo preload-hd preload-nccl-topo-ring tuner" ;;
  esac
}
placement_of() { [ "${1%%+*}" = nccl-order ] && echo topology-order || echo scheduler; }
# variant_env PATH: the NCCL setting of PATH's variant (after '+'), none for a plain path.
variant_env() {
  [[ "$1" == *+* ]] || return 0
  if [ -z "${1%%+*}" ]; then
    echo "fabric_nccl_tests.sh: path '$1' has a variant but no path before the '+'" >&2
    return 1
  fi
  case ${1#*+} in
    p2p2) echo NCCL_NCHANNELS_PER_NET_PEER=2 ;;
    steps)
      if [[ "$1" != preload-* ]]; then
        echo "fabric_nccl_tests.sh: variant 'steps' in path '$1': only topocoll's schedules (preload-*) have steps to time" >&2
        return 1
      fi
      echo TOPOCOLL_STEP_TIMES=1 ;;
    *) echo "fabric_nccl_tests.sh: unknown variant '${1#*+}' in path '$1' (known: p2p2, steps)" >&2; return 1 ;;
  esac
}
for path in ${FABRIC_PATHS:-} $check_paths; do variant_env "$path" > /dev/null || exit 1; done

# fabric_for TOPOLOGY RATE: the fabric up at that rate (once per case).
current=""
fabric_for() {
  local want="$1@$2"
  [ "$current" = "$want" ] && return 0
  if [ "$fabric_is_up" = 1 ]; then
    log_cmd "$(quoted "$cli" fabric down --name "$fabric")"
    "$cli" fabric down --name "$fabric" > /dev/null
    fabric_is_up=0
  fi
  current=""
  local up=("$cli" fabric up "$root/examples/$1.json" --name "$fabric" --rate-mbit "$2")
  [ -n "$slack" ] && up+=(--peak-slack-us "$slack")
  log_cmd "$(quoted "${up[@]}")"
  log_cmd "$(quoted python3 "$root/perf/fabric/cable_check.py" --cli "$cli" --name "$fabric" --json "$out/cable-check-$1-r$2.json")"
  if [ "$dry" != 1 ]; then
    "$cli" fabric down --force --name "$fabric" > /dev/null 2>&1  # a crashed call's leftovers
    "${up[@]}" > "$out/fabric-up-$1-r$2.log" 2>&1 || { cat "$out/fabric-up-$1-r$2.log" >&2; return 1; }
    fabric_is_up=1
    # Whether a cable carries its rate on this machine's kernel (one TCP flow, ~3 s): the
    # record sets it beside the runs (table.md, "The cables").
    # Bounded here too (its own steps are): a check that hangs would take the budget's runs.
    timeout -k 5 120 python3 "$root/perf/fabric/cable_check.py" --cli "$cli" --name "$fabric" \
        --json "$out/cable-check-$1-r$2.json" >> "$out/fabric-up-$1-r$2.log" 2>&1 ||
      say "the cable check failed (fabric-up-$1-r$2.log)"
    if [ -z "$recorded_slack" ]; then
      recorded_slack=$("$cli" fabric status --name "$fabric" --json |
                       python3 -c 'import json, sys; print("%g" % json.load(sys.stdin)[0]["peak_slack_us"])')
      slack=$recorded_slack
      echo "$recorded_slack" > "$slack_file"
    fi
  fi
  current=$want
}

# predict_to FILE WHERE...: the cost model's times for NT_ARGS' sizes into FILE.
predict_to() {
  local file=$1 b e f
  shift
  read -r b e f <<< "$(python3 - "$nt_args" <<'EOF'
import sys
w = sys.argv[1].split(); o = {"-b": "256K", "-e": "64M", "-f": "2"}
for i, x in enumerate(w[:-1]):
    if x in o: o[x] = w[i + 1]
print(o["-b"], o["-e"], o["-f"])
EOF
)"
  local cmd=("$cli" fabric predict "$@" --sizes "$b:$e" --factor "$f" --json)
  [ -z "${PREDICT_LOG:-}" ] || log_cmd "$(quoted "${cmd[@]}") > $file"
  "${cmd[@]}" > "$file" || { rm -f "$file"; return 1; }
}

# case_files TOPOLOGY RATE RANKS PLACEMENT: predictions and hostfile of one placement.
case_files() {
  local dir="$out/$1-r$2" where
  mkdir -p "$dir"
  if [ "$dry" = 1 ]; then where=(--topo "$root/examples/$1.json" --rate-mbit "$2"); else where=(--name "$fabric"); fi
  local predict="$dir/predict-$4-n$3.json"
  if [ ! -s "$predict" ]; then
    PREDICT_LOG=1 predict_to "$predict" "${where[@]}" --ranks "$3" --placement "$4" || return 1
  fi
  local hosts="$dir/hostfile-$4-n$3.txt"
  if [ ! -s "$hosts" ]; then
    local where_place=("${where[@]}")
    [ "$dry" = 1 ] && where_place=(--topo "$root/examples/$1.json")
    "$cli" fabric place "${where_place[@]}" --ranks "$3" --placement "$4" --format mpirun > "$hosts"
  fi
}

# one_run TOPOLOGY RANKS RATE BINARY PATH
one_run() {
  local topo=$1 n=$2 r=$3 binary=$4 path=$5
  local name="$topo-n$n-r$r-$binary-$path" placement
  placement=$(placement_of "$path")
  local log="$topo-r$r/n$n-$binary-$path.log"
  # A run that passed is in the record; one that failed or timed out (a call cut short, a
  # machine that misbehaved) is run again, its row replaced (the record reads every row).
  local before
  before=$(awk -F'\t' -v n="$name" '$1 == n { rc = $8 } END { print rc }' "$manifest")
  if [ "$before" = 0 ]; then say "$name: in the record already"; return 0; fi
  local need
  if [ "$dry" != 1 ] && [ "$current" != "$topo@$r" ]; then
    # Its fabric is not up: whether the run fits is asked of the topology file at that rate
    # first, so a run left for the next call does not pay for a fabric start (FABRIC_UP_S).
    local estimate="$scratch/$topo-r$r-$placement-n$n.json"
    [ -s "$estimate" ] || predict_to "$estimate" --topo "$root/examples/$topo.json" --rate-mbit "$r" \
                                     --ranks "$n" --placement "$placement" || { failed=1; return 1; }
    need=$(need_of "$estimate" "$binary" "$path") || { say "$name: no estimate of its time"; failed=1; return 1; }
    if [ $((need + up_seconds)) -gt "$(left)" ]; then
      say "$name: needs about $need s and a fabric start, $(left) s left: next call"
      deferred+=("$name (~$need s)")
      return 0
    fi
  fi
  fabric_for "$topo" "$r" || { failed=1; return 1; }
  case_files "$topo" "$r" "$n" "$placement" || { failed=1; return 1; }
  local predict="$out/$topo-r$r/predict-$placement-n$n.json"
  need=$(need_of "$predict" "$binary" "$path") || { say "$name: no estimate of its time ($predict)"; failed=1; return 1; }
  if [ "$dry" != 1 ] && [ "$need" -gt "$(left)" ]; then
    say "$name: needs about $need s, $(left) s left: next call"
    deferred+=("$name (~$need s)")
    return 0
  fi
  # NCCL_TESTS_DEVICE=0: nccl-tests counts ranks per host by the hostname up to its first '.',
  # so NAP's p0.h0 .. p0.h7 would be local ranks 0..7 of "p0" and ask for GPUs 1..7.
  local faces=() xs=(-x LD_LIBRARY_PATH -x NCCL_IB_DISABLE=1 -x NCCL_DEBUG=WARN -x NCCL_TESTS_DEVICE=0)
  [ -n "${CUDA_MPS_PIPE_DIRECTORY:-}" ] && xs+=(-x CUDA_MPS_PIPE_DIRECTORY)
  local base=${path%%+*} variant
  variant=$(variant_env "$path") || { failed=1; return 1; }
  [ -n "$variant" ] && xs+=(-x "$variant")
  case $base in
    tuner) faces=(--tuner "$plugin") ;;
    preload-*) faces=(--preload "$plugin"); xs+=(-x "TOPOCOLL_ALGO=${base#preload-}") ;;
  esac
  # Never past the call's end: a run the device tool kills would take the call's record along.
  local limit=$run_timeout
  [ "$dry" != 1 ] && [ "$(left)" -lt "$limit" ] && limit=$(( $(left) > 1 ? $(left) : 1 ))
  # pml ob1: Ubuntu's Open MPI prefers UCX where it finds RDMA devices, and UCX ignores btl.
  local cmd=(timeout -k 10 "$limit" mpirun --allow-run-as-root --oversubscribe -np "$n" --mca pml ob1 --mca btl "self,vader"
             "${xs[@]}" "$cli" fabric rank-exec --name "$fabric" --placement "$placement" "${faces[@]}"
             --rank0-env NCCL_DEBUG=INFO --rank0-env "NCCL_DEBUG_SUBSYS=INIT,TUNING" --
             "$nt_build/${binary}_perf" -g 1 "${nt_words[@]}")
  log_cmd "$(quoted "${cmd[@]}") > $log 2>&1"
  if [ "$dry" = 1 ]; then
    echo "$(quoted "${cmd[@]}")   # ~$need s"
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$topo" "$n" "$r" "${binary}_perf" "$path" \
      "$placement" planned "$need" "$log" "$call_id" >> "$out/planned.tsv"
    dry_total=$((dry_total + need))
    dry_runs=$((dry_runs + 1))
    return 0
  fi
  say "$name: ~$need s predicted"
  local started=$SECONDS rc
  { echo "# $(quoted "${cmd[@]}")"; "${cmd[@]}"; } > "$out/$log" 2>&1
  rc=$?
  # A run whose face NCCL did not take (the preloaded library declined, the tuner was not
  # loaded) measured NCCL alone: failed (3), so a resumed record runs it again.
  local mark=""
  case $base in
    tuner) mark="TUNER/Plugin: Using topocoll" ;;
    preload-*) mark="served on topology" ;;
  esac
  if [ $rc -eq 0 ] && [ -n "$mark" ] && ! grep -qF "$mark" "$out/$log"; then
    echo "# fabric_nccl_tests.sh: rank 0's log lacks \"$mark\": topocoll did not take part" >> "$out/$log"
    rc=3
  fi
  if [ -n "$before" ]; then
    say "$name: run again (exit $before before)"
    awk -F'\t' -v n="$name" '$1 != n' "$manifest" > "$manifest.tmp" && mv "$manifest.tmp" "$manifest"
  fi
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$topo" "$n" "$r" "${binary}_perf" "$path" \
    "$placement" "$rc" "$((SECONDS - started))" "$log" "$call_id" >> "$manifest"
  [ $rc -eq 0 ] || { say "$name: FAILED (exit $rc), see $log"; failed=1; }
  copy_out
}

# Most telling first: a topology's allreduce, its check at the second rate, then the others.
for topo in $topologies; do
  for n in $ranks_list; do
    for binary in $colls; do
      for path in $(paths_for "$topo"); do one_run "$topo" "$n" "$rate" "$binary" "$path"; done
      if [ "$binary" = all_reduce ]; then
        for path in $check_paths; do one_run "$topo" "$n" "$check_rate" all_reduce "$path"; done
      fi
    done
  done
done
[ "$fabric_is_up" = 1 ] && { "$cli" fabric down --name "$fabric" > /dev/null; fabric_is_up=0; }

if [ "$dry" = 1 ]; then
  say "dry run: $dry_runs runs, about $dry_total s of device time in all (BUDGET $budget s a call);" \
      "commands in $out/commands.txt, predictions and hostfiles under $out/*/"
  exit $failed
fi
if [ "$(grep -vc '^#' "$manifest")" -gt 0 ]; then
  python3 "$record" table "$out" || failed=1
fi
{
  echo
  echo "## Call at $(date -u '+%Y-%m-%d %H:%M UTC'): $((SECONDS - t0)) s (call $call_id in runs.tsv)"
  if ((${#deferred[@]})); then
    echo "Left for the next call (same RESULTS_DIR): ${deferred[*]}"
  else
    echo "Every run is in the record."
  fi
} >> "$out/calls.md"
say "record: $out (failed=$failed, ${#deferred[@]} runs left for the next call)"
exit $failed
