#!/usr/bin/env python3
"""perf/gpu/nccl_tests_table.py on nccl-tests-shaped logs: rounds of arms (LABEL-rN) give a
median-over-rounds table with each arm's ratio to the first arm; plain labels keep the
per-run ratios; a wrong result fails.
    nccl_tests_table_test.py SOURCE_DIR"""
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tool_test import check, run_tool  # noqa: E402

src = sys.argv[1]
tool = os.path.join(src, "perf", "gpu", "nccl_tests_table.py")


def log(path, times, wrong=0):
    """times: {size: (out-of-place us, in-place us)}; rank 0's NCCL lines in between."""
    with open(path, "w") as f:
        f.write("# nccl-tests\nhost:1:2 [0] NCCL INFO Using network Socket\n")
        for size, (t_out, t_in) in times.items():
            f.write(f"    {size:>10}  {size // 4:>10}     float     sum      -1  {t_out:8.1f}    0.01    0.01    {wrong}"
                    f"  {t_in:8.1f}    0.01    0.01    {wrong}\n")


def run(*args):
    return run_tool(tool, *args)


with tempfile.TemporaryDirectory() as d:
    # socket: 100 us at 1 KiB, 1000 at 1 MiB in every round; topocoll 300/150/200 and 500 x 3.
    p = lambda name: os.path.join(d, name)
    log(p("s1"), {1024: (100, 100), 1048576: (1000, 1000)})
    log(p("s2"), {1024: (90, 110), 1048576: (1000, 1000)})
    log(p("t1"), {1024: (300, 150), 1048576: (500, 500)})
    log(p("t2"), {1024: (200, 200), 1048576: (500, 500)})
    out_json = p("out.json")
    rc, out = run("--json", out_json, f"socket-r1={p('s1')}", f"topocoll-r1={p('t1')}",
                  f"socket-r2={p('s2')}", f"topocoll-r2={p('t2')}")
    check(rc == 0, "rounds: exit 0", out)
    # medians pool out-of-place and in-place over rounds: socket 1 KiB {100,100,90,110} -> 100,
    # topocoll {300,150,200,200} -> 200: ratio 2.00; at 1 MiB 0.50.
    check("| 1024 | 100.0 (90.0-110.0) | 200.0 (150.0-300.0) | 2.00 |" in out, "1 KiB medians and ratio", out)
    check("| 1048576 | 1000.0 (1000.0-1000.0) | 500.0 (500.0-500.0) | 0.50 |" in out, "1 MiB", out)
    check("- topocoll: at or better than socket at 1 of 2 sizes; slowest against it 2.00x at 1024 B" in out,
          "the arm's summary line", out)
    check("topocoll-r1 / socket-r1" not in out, "no ratio of one round to another arm's first round", out)
    arms = json.load(open(out_json))["arms"]
    check([a["arm"] for a in arms] == ["socket", "topocoll"] and arms[1]["rounds"] == 2, "arms in the JSON", arms)
    check(abs(arms[1]["sizes"][0]["ratio"] - 2.0) < 1e-9, "the JSON ratio", arms)

    rc, out = run(f"a={p('s1')}", f"b={p('t1')}")
    check(rc == 0 and "| b / a time |" in out and "Median over rounds" not in out, "plain labels", out)
    check("| 1024 | 100.0 | 0.01 | 300.0 | 0.01 | 3.00 | 0 |" in out, "plain per-run ratio", out)

    log(p("bad"), {1024: (100, 100)}, wrong=3)
    rc, out = run(f"socket-r1={p('s1')}", f"socket-r2={p('bad')}")
    check(rc == 1, "a wrong result fails", out)
print("nccl_tests_table: rounds, medians, ratios and failures as expected")
