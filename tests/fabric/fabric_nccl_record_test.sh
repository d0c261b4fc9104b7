#!/usr/bin/env bash
# The GPU record's routine without a GPU (perf/gpu/fabric_nccl_tests.sh): its dry run plans
# every run with the cost model's predictions and hostfiles, and the record's tables, goals
# and plots come out of nccl-tests-shaped logs made from those predictions.
#   fabric_nccl_record_test.sh SOURCE_DIR BUILD_DIR WORK_DIR
set -euo pipefail
src=$1 build=$2 work=$3
rm -rf "$work"
mkdir -p "$work"
fail() { echo "FAIL: $*" >&2; exit 1; }

if command -v shellcheck > /dev/null; then
  # The routine's scripts, and the environment both source, followed (-x) from the tree's root.
  (cd "$src" && shellcheck -x perf/gpu/fabric_nccl_tests.sh) || fail "shellcheck"
  (cd "$src" && shellcheck -x -S warning perf/gpu/run_all.sh perf/gpu/gpu_env.sh perf/gpu/mps.sh perf/gpu/fetch_debs.sh) ||
    fail "shellcheck"
fi
out=$(DRY_RUN=1 RESULTS_DIR="$work" FABRIC_TOPOLOGIES="bigraph-32" FABRIC_COLLS="all_reduce reduce_scatter" \
      bash "$src/perf/gpu/fabric_nccl_tests.sh" "$build" 2>&1) || fail "dry run: $out"
grep -q "dry run: 16 runs" <<< "$out" || fail "expected 7 + 2 + 7 planned runs: $out"
grep -q -- "rank-exec --name gpunt --placement topology-order --rank0-env NCCL_DEBUG=INFO" "$work/commands.txt" ||
  fail "no nccl-order run in commands.txt"
grep -q -- "-x TOPOCOLL_ALGO=hd .*--preload .*libnccl-topocoll.so" "$work/commands.txt" || fail "no preload-hd run"
grep -q -- "--tuner .*libnccl-topocoll.so" "$work/commands.txt" || fail "no tuner run"
[ "$(cat "$work/bigraph-32-r1000/hostfile-scheduler-n16.txt" | head -n 2)" = "s0 slots=1
s1 slots=1" ] || fail "scheduler hostfile"
[ "$(head -n 2 "$work/bigraph-32-r1000/hostfile-topology-order-n16.txt")" = "s0 slots=1
s2 slots=1" ] || fail "topology-order hostfile"

# A path's variant: the same run with one NCCL setting changed, its own entry; an unknown one
# is refused before anything runs.
variant=$work/variant
out=$(DRY_RUN=1 RESULTS_DIR="$variant" FABRIC_TOPOLOGIES="bigraph-32" FABRIC_COLLS="all_reduce" FABRIC_CHECK_PATHS="" \
      FABRIC_PATHS="preload-ring-topo preload-ring-topo+p2p2 preload-ring-topo+steps" \
      bash "$src/perf/gpu/fabric_nccl_tests.sh" "$build" 2>&1) ||
  fail "dry run with a variant: $out"
grep -q "dry run: 3 runs" <<< "$out" || fail "expected 3 planned runs: $out"
grep -q -- "-x NCCL_NCHANNELS_PER_NET_PEER=2 -x TOPOCOLL_ALGO=ring-topo .*--preload" "$variant/commands.txt" ||
  fail "the p2p2 variant does not set NCCL_NCHANNELS_PER_NET_PEER=2"
[ "$(grep -c NCCL_NCHANNELS_PER_NET_PEER "$variant/commands.txt")" = 1 ] || fail "the plain path got the variant's setting"
grep -q -- "-x TOPOCOLL_STEP_TIMES=1 -x TOPOCOLL_ALGO=ring-topo .*--preload" "$variant/commands.txt" ||
  fail "the steps variant does not set TOPOCOLL_STEP_TIMES=1"
[ "$(grep -c TOPOCOLL_STEP_TIMES "$variant/commands.txt")" = 1 ] || fail "another path got TOPOCOLL_STEP_TIMES"
grep -q "preload-ring-topo+p2p2	.*	scheduler	planned" "$variant/planned.tsv" || fail "no planned variant run"
(head -n 1 "$variant/runs.tsv"; cat "$variant/planned.tsv") > "$variant/runs.new" && mv "$variant/runs.new" "$variant/runs.tsv"
python3 "$src/perf/gpu/fabric_nccl_record.py" sample "$variant" > /dev/null
python3 "$src/perf/gpu/fabric_nccl_record.py" table "$variant" > /dev/null
grep -q "| preload-ring-topo+p2p2 | scheduler | yes | 1048576 | .* | ring-topo | [0-9]" "$variant/table.md" ||
  fail "the variant's row does not set ring-topo's prediction beside it"
# The steps variant's lines (made as plugin/interposer/step_times_log.cpp writes them: 30
# steps, two lines each) come back as a table and a fit that finds the sample's step cost.
grep -q "^## Step times" "$variant/table.md" || fail "no step times section"
grep -Eq "^\| [^|]*preload-ring-topo\+steps[^|]* \| 1048576 \| ring-topo \| 2 \| 30 \| " "$variant/table.md" ||
  fail "1 MiB's two timed collectives of 30 steps not in the table: $(grep -A4 '^## Step times' "$variant/table.md")"
grep -q "a step costs 150 us fixed, then its bytes at 800 Mbit/s (fit over 300 steps; cable rate 1000 Mbit/s)" \
  "$variant/table.md" || fail "the fit does not find the sample's 150 us and 800 Mbit/s: $(grep 'a step costs' "$variant/table.md")"
# Beside it the model's own steps of ring-topo: each a few us of latency, then the cable's rate
# (one flow per cable), and every measured step slower than the model's (the sample's 150 us).
python3 - "$variant/record.json" <<'PY' || fail "the model's steps are not set beside the measured ones"
import json, sys
runs = [r for r in json.load(open(sys.argv[1]))["runs"] if r["path"].endswith("+steps")]
fit = runs[0]["step_fit"]
assert 0 < fit["model_fixed_us"] < 50 and 900 < fit["model_rate_mbit"] < 1100, fit
for s in runs[0]["sizes"]:
    st = s["steps"]
    assert st["best_ratio"] > 1 and st["worst_ratio"] >= st["best_ratio"], st
    assert 0 <= st["worst_step"] < 30, st
    # The model with the fitted fixed part: every sending step pays the fit's fixed cost instead.
    want = s["predicted_us"] + st["sending"] * (fit["fixed_us"] - fit["model_fixed_us"])
    assert st["sending"] == 30 and abs(s["predicted_with_fit_us"] - want) < 1e-6 * want, (s, fit)
    assert s["predicted_with_fit_us"] > s["predicted_us"], s
PY
# Bus bandwidth comes from the time, as nccl-tests computes it, not from its printout's few
# decimals (0.01 printed for 0.0138 GB/s at the fabric's rates).
python3 - "$variant/record.json" <<'PY' || fail "busbw is not computed from the time"
import json, sys
for run in json.load(open(sys.argv[1]))["runs"]:
    if run["binary"] != "all_reduce_perf":
        continue
    n = run["ranks"]
    for s in run["sizes"]:
        want = s["size"] / s["time_us"] / 1e3 * 2 * (n - 1) / n
        assert abs(s["busbw"] - want) <= 1e-9 * want, (run["path"], s["size"], s["busbw"], want)
PY
# A record whose ranks time-sliced the GPU (MPS off) or whose cable check never finished says
# so above its tables, and one without either says nothing.
grep -q "^\*\*MPS: off\|^\*\*The cable check" "$variant/table.md" && fail "a warning without its cause"
warned=$work/warned
cp -r "$variant" "$warned"
echo "MPS: off, nvidia-cuda-mps-control -d failed: the benchmark stages time-slice the GPU" >> "$warned/device.txt"
touch "$warned/fabric-up-bigraph-32-r1000.log"
rm -f "$warned"/cable-check-*.json
python3 "$src/perf/gpu/fabric_nccl_record.py" table "$warned" > /dev/null
grep -q "^\*\*MPS: off, nvidia-cuda-mps-control -d failed.*(device.txt): the ranks time-sliced the GPU" \
  "$warned/table.md" || fail "MPS off is not said: $(head -n 8 "$warned/table.md")"
grep -q "^\*\*The cable check of bigraph-32-r1000 did not complete" "$warned/table.md" ||
  fail "the missing cable check is not said: $(head -n 8 "$warned/table.md")"
# `fabric predict`'s steps are the schedules' totals step by step.
python3 - "$variant/bigraph-32-r1000/predict-scheduler-n16.json" <<'PY' || fail "fabric predict's topocoll_steps"
import json, sys
for row in json.load(open(sys.argv[1])):
    for algo, total in row["topocoll"].items():
        if algo == "auto":
            continue
        steps = row["topocoll_steps"][algo]
        assert abs(sum(steps) - total) <= 1e-6 * total, (row["coll"], row["bytes"], algo, sum(steps), total)
    assert len(row["topocoll_steps"]["ring-topo"]) == (30 if row["coll"] == "allreduce" else 15), row["coll"]
PY
[ "$(grep -c "a step costs" "$variant/table.md")" = 1 ] || fail "a run without step times got a fit"
if out=$(DRY_RUN=1 RESULTS_DIR="$work/bad-variant" FABRIC_PATHS="nccl+steps" \
         bash "$src/perf/gpu/fabric_nccl_tests.sh" "$build" 2>&1); then
  fail "steps on NCCL's own path was accepted: $out"
fi
grep -q "only topocoll's schedules (preload-\*) have steps to time" <<< "$out" || fail "nccl+steps not explained: $out"
if out=$(DRY_RUN=1 RESULTS_DIR="$work/bad-variant" FABRIC_PATHS="preload-hd+fast" \
         bash "$src/perf/gpu/fabric_nccl_tests.sh" "$build" 2>&1); then
  fail "an unknown variant was accepted: $out"
fi
grep -q "unknown variant 'fast' in path 'preload-hd+fast'" <<< "$out" || fail "unknown variant not named: $out"
for bad in "nccl+fast+p2p2" "+p2p2"; do
  if out=$(DRY_RUN=1 RESULTS_DIR="$work/bad-variant" FABRIC_PATHS="$bad" \
           bash "$src/perf/gpu/fabric_nccl_tests.sh" "$build" 2>&1); then
    fail "path '$bad' was accepted: $out"
  fi
done
if out=$(DRY_RUN=1 RESULTS_DIR="$work/bad-variant" FABRIC_CHECK_PATHS="preload-auto+fast" \
         bash "$src/perf/gpu/fabric_nccl_tests.sh" "$build" 2>&1); then
  fail "an unknown variant among the check paths was accepted: $out"
fi
# The cables' shaper: FABRIC_PEAK_SLACK_US reaches every `fabric up`; a record keeps the
# value it ran with, a resumed call takes it, and one asking for another is refused.
slack=$work/slack
mkdir -p "$slack"
echo 0 > "$slack/peak-slack-us"
out=$(DRY_RUN=1 RESULTS_DIR="$slack" FABRIC_TOPOLOGIES="bigraph-32" FABRIC_COLLS="all_reduce" FABRIC_CHECK_PATHS="" \
      FABRIC_PATHS="nccl" bash "$src/perf/gpu/fabric_nccl_tests.sh" "$build" 2>&1) || fail "resumed record: $out"
grep -q -- "fabric up .*bigraph-32.json --name gpunt --rate-mbit 1000 --peak-slack-us 0$" "$slack/commands.txt" ||
  fail "the record's slack 0 did not reach fabric up: $(grep 'fabric up' "$slack/commands.txt")"
if out=$(DRY_RUN=1 RESULTS_DIR="$slack" FABRIC_PEAK_SLACK_US=100 FABRIC_PATHS="nccl" \
         bash "$src/perf/gpu/fabric_nccl_tests.sh" "$build" 2>&1); then
  fail "a resumed record took another shaper: $out"
fi
grep -q "ran with --peak-slack-us 0" <<< "$out" || fail "the refused slack is not explained: $out"
if out=$(DRY_RUN=1 RESULTS_DIR="$work/bad-slack" FABRIC_PEAK_SLACK_US="1;reboot" FABRIC_PATHS="nccl" \
         bash "$src/perf/gpu/fabric_nccl_tests.sh" "$build" 2>&1); then
  fail "FABRIC_PEAK_SLACK_US='1;reboot' was accepted: $out"
fi
grep -q "expected microseconds" <<< "$out" || fail "a bad slack is not named: $out"
! grep -q -- "--peak-slack-us" "$work/commands.txt" || fail "a new record without the setting passed a slack"
# A variant of NCCL's own path is budgeted as that path.
estimate() {
  python3 "$src/perf/gpu/fabric_nccl_record.py" estimate --predict "$variant/bigraph-32-r1000/predict-scheduler-n16.json" \
    --coll all_reduce_perf --path "$1" --nt-args "-b 256K -e 64M -f 4 -c 1 -w 0 -n 1"
}
[ "$(estimate nccl+p2p2)" = "$(estimate nccl)" ] || fail "nccl+p2p2 estimated $(estimate nccl+p2p2) s, nccl $(estimate nccl) s"

# The estimate the runner budgets by: NCCL's slower algorithm for plain NCCL.
need=$(python3 "$src/perf/gpu/fabric_nccl_record.py" estimate --predict "$work/bigraph-32-r1000/predict-scheduler-n16.json" \
       --coll all_reduce_perf --path nccl --nt-args "-b 256K -e 64M -f 4 -c 1 -w 0 -n 1")
[ "$need" -gt 30 ] && [ "$need" -lt 120 ] || fail "estimate $need s for plain NCCL allreduce at 1000 Mbit/s"

grep -q -- "perf/fabric/cable_check.py --cli .* --name gpunt --json .*/cable-check-bigraph-32-r1000.json" \
  "$work/commands.txt" || fail "no cable check after fabric up"
# What cable_check.py writes, as the table shows it.
cat > "$work/cable-check-bigraph-32-r1000.json" <<'JSON'
{"fabric": "gpunt", "topology": "bigraph-32", "from": "s0.g0", "to": "s1.g0", "route": "s0.g0->U0  U0->s1.g0",
 "cables": 2, "cable_mbit": 1000.0, "peak_slack_us": 100.0, "mtu": 9000, "seconds": 2.0,
 "goodput_mbit": 991.5, "of_rate": 0.9915, "of_tcp_ceiling": 0.998}
JSON
(head -n 1 "$work/runs.tsv"; cat "$work/planned.tsv") > "$work/runs.new" && mv "$work/runs.new" "$work/runs.tsv"
python3 "$src/perf/gpu/fabric_nccl_record.py" sample "$work" > /dev/null
python3 "$src/perf/gpu/fabric_nccl_record.py" table "$work" > /dev/null
for f in table.md record.json busbw-bigraph-32-n16-r1000-allreduce.svg busbw-bigraph-32-n16-r500-allreduce.svg; do
  [ -s "$work/$f" ] || fail "no $f"
done
grep -q "| preload-hd | scheduler | yes | 67108864 |" "$work/table.md" || fail "no preload-hd row"
grep -q "| nccl | scheduler | no | 1048576 | .* | Ring/Simple |" "$work/table.md" || fail "NCCL's algorithm not read from the log"
grep -q "auto vs NCCL's default from 1 MiB" "$work/table.md" || fail "no auto goal"
grep -q "time at 500 / at 1000 Mbit/s" "$work/table.md" || fail "no rate check"
grep -q "NCCL with the \`topocoll order\` hostfile" "$work/table.md" || fail "no order goal"
grep -q "| bigraph-32-r1000 | s0.g0 | s1.g0 | 2 | 1000 | 991.5 | 0.992 | 0.998 | 100.0 |" "$work/table.md" ||
  fail "the cable check is not in the table: $(grep -A4 '^## The cables' "$work/table.md")"
echo "fabric nccl record: dry run, estimate, sample logs, tables, goals and plots as expected"
