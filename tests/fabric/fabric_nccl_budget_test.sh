#!/usr/bin/env bash
# perf/gpu/fabric_nccl_tests.sh keeps a GPU call's fabric stage inside its budget, run for
# real (not its dry run) on stand-ins: a topocoll CLI whose `fabric up` only records that it
# was asked (predictions and placements are the real CLI's, from the topology file), and an
# mpirun whose ranks hang.
#   - a run that does not fit with its fabric's start is left for the next call before any
#     fabric comes up;
#   - a started run ends by the budget's end (no 30 s floor past it), the script soon after,
#     and the record leaves in RESULTS_TAR;
#   - nothing is left running.
#   fabric_nccl_budget_test.sh SOURCE_DIR BUILD_DIR WORK_DIR      (root: the script requires it)
set -uo pipefail
src=$1 build=$2 work=$3
fail() { echo "FAIL: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "SKIP: fabric_nccl_tests.sh runs only as root"; exit 77; }
rm -rf "$work"
mkdir -p "$work/bin" "$work/nt"
marker="fabric-budget-rank-$$"
real_cli=$build/tools/topocoll
topo=$src/examples/bigraph-32.json
cat > "$work/topocoll" <<CLI
#!/usr/bin/env bash
# fabric up/down/status stand in; predict and place read the topology file at the run's rate.
echo "\$*" >> "$work/cli.log"
[ "\$1" = fabric ] || exit 1
verb=\$2; shift 2
args=()
while [ \$# -gt 0 ]; do
  # the stand-in's fabric is the topology file at 1000 Mbit/s: given once (the CLI refuses
  # a flag given twice), in place of the script's --name or its own --topo/--rate-mbit
  case \$1 in --name|--topo|--rate-mbit) shift 2; continue ;; esac
  args+=("\$1"); shift
done
case \$verb in
  up) exit 0 ;;
  down) exit 0 ;;
  status) echo '[{"peak_slack_us": 0}]' ;;
  predict) exec "$real_cli" fabric predict --topo "$topo" --rate-mbit 1000 "\${args[@]}" ;;
  place) exec "$real_cli" fabric place --topo "$topo" "\${args[@]}" ;;
  *) exit 1 ;;
esac
CLI
cat > "$work/bin/mpirun" <<MPI
#!/usr/bin/env bash
[ "\$1" = --version ] && { echo "mpirun (stand-in) 0"; exit 0; }
exec -a $marker sleep 1000
MPI
touch "$work/nt/all_reduce_perf" "$work/libnccl-topocoll.so"
chmod +x "$work/topocoll" "$work/bin/mpirun" "$work/nt/all_reduce_perf"
run() {
  env PATH="$work/bin:$PATH" MPS=0 TOPOCOLL_CLI="$work/topocoll" NT_BUILD="$work/nt" PLUGIN="$work/libnccl-topocoll.so" \
    FABRIC_TOPOLOGIES=bigraph-32 FABRIC_COLLS=all_reduce FABRIC_CHECK_PATHS="" FABRIC_PATHS="nccl preload-hd" \
    NT_ARGS="-b 256K -e 1M -f 4 -c 1 -w 0 -n 1" \
    "$@" bash "$src/perf/gpu/fabric_nccl_tests.sh" "$build"
}
no_rank_left() {
  for _ in $(seq 50); do pgrep -f "$marker" > /dev/null || return 0; sleep 0.2; done
  pkill -KILL -f "$marker"
  fail "$1: a rank outlived the call"
}

# What the first run needs, as the script estimates it (its dry run plans the same).
DRY_RUN=1 run RESULTS_DIR="$work/plan" > "$work/plan.log" 2>&1 || fail "dry run: $(cat "$work/plan.log")"
need=$(awk -F'\t' 'NR == 1 { print $9 }' "$work/plan/planned.tsv")
[[ "$need" =~ ^[0-9]+$ ]] || fail "no estimate in the plan: $(cat "$work/plan/planned.tsv")"

# No room for the run and its fabric's start: left for the next call, no fabric started.
rm -f "$work/cli.log"
run RESULTS_DIR="$work/later" BUDGET=$((need + 5)) FABRIC_UP_S=1000 > "$work/later.log" 2>&1 ||
  fail "a call that leaves every run for the next failed: $(cat "$work/later.log")"
! grep -q "^fabric up" "$work/cli.log" || fail "a fabric came up for runs that did not fit: $(cat "$work/cli.log")"
grep -q "Left for the next call (same RESULTS_DIR): bigraph-32-n16-r1000-all_reduce-nccl" "$work/later/calls.md" ||
  fail "the deferred runs are not listed: $(cat "$work/later/calls.md")"

# Room for the first run only: it hangs, and ends with the budget, not 30 s past it.
budget=$((need + 6))
started=$SECONDS
run RESULTS_DIR="$work/cut" RESULTS_TAR="$work/cut.tgz" BUDGET=$budget FABRIC_UP_S=0 > "$work/cut.log" 2>&1 &&
  fail "a call whose run was killed passed"
took=$((SECONDS - started))
[ "$took" -le $((budget + 12)) ] || fail "the call took $took s on a budget of $budget s: $(cat "$work/cut.log")"
grep -q "^fabric up" "$work/cli.log" || fail "the run's fabric never came up: $(cat "$work/cli.log")"
awk -F'\t' '$1 == "bigraph-32-n16-r1000-all_reduce-nccl" && $8 != 0 { found = 1 } END { exit !found }' "$work/cut/runs.tsv" ||
  fail "the killed run has no failed row: $(cat "$work/cut/runs.tsv")"
tar -xzf "$work/cut.tgz" -O cut/runs.tsv | grep -q "all_reduce-nccl" || fail "RESULTS_TAR lacks the record"
no_rank_left cut
echo "fabric_nccl_tests.sh stays inside its budget"
