#!/usr/bin/env python3
"""perf/gpu/nccl_choice.py on a tuning table shaped as NCCL 2.28 prints it: the pick per size
follows ncclTopoGetAlgoTime (least lat + bytes / (1000 bw), the ring's Simple latency x1.4
for allreduce once bytes / (channels x ranks) >= 64, the tree's bandwidth corrected), and
a log without a table is an error that names it.
    nccl_choice_test.py SOURCE_DIR"""
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tool_test import check, run_tool  # noqa: E402

src = sys.argv[1]
tool = os.path.join(src, "perf", "gpu", "nccl_choice.py")

HEAD = "h:1:1 [0] NCCL INFO "


def table(path, ring_ll, ring_simple, tree_simple, nranks=2):
    """An allreduce row: Tree LL/LL128 off, Tree Simple, Ring LL, LL128 off, Simple; (lat, bw)."""
    cell = lambda lb: f"{lb[0]:8.1f}/{lb[1]:6.1f} |"
    with open(path, "w") as f:
        f.write(f"{HEAD}ncclCommInitRankConfig comm 0x1 rank 0 nranks {nranks} cudaDev 0 - Init START\n")
        f.write(f"{HEAD}Channel 00/02 : 0 1\n{HEAD}Channel 01/02 : 0 1\n")
        f.write(f"{HEAD}  Algorithm   |                            Tree                  |"
                "                            Ring                  |                   CollNetDirect                  |\n")
        f.write(f"{HEAD}  Protocol    |             LL |          LL128 |         Simple |             LL |"
                "          LL128 |         Simple |             LL |          LL128 |         Simple |\n")
        f.write(f"{HEAD}    AllReduce |" + cell((0, 0)) + cell((0, 0)) + cell(tree_simple) + cell(ring_ll) +
                cell((0, 0)) + cell(ring_simple) + cell((0, 0)) + cell((0, 0)) + cell((0, 0)) + "\n")


def run(*args):
    return run_tool(tool, *args)


with tempfile.TemporaryDirectory() as d:
    # Socket's lo (10 Gb/s) and the plugin's 100 Gb/s, as the H200 record's 2-rank logs.
    slow, fast = os.path.join(d, "slow"), os.path.join(d, "fast")
    table(slow, ring_ll=(16.6, 0.6), ring_simple=(36.4, 1.2), tree_simple=(36.4, 0.9))
    table(fast, ring_ll=(18.6, 6.0), ring_simple=(40.4, 12.0), tree_simple=(40.4, 9.4))
    rc, out = run("--sizes", "16K,64K,256K,1M", f"slow={slow}", f"fast={fast}")
    check(rc == 0, "runs", out)
    rows = {line.split("|")[1].strip(): line for line in out.splitlines() if line.startswith("| ") and "size" not in line}
    # 64 KiB: slow Simple (36.4*1.4 + 65.5/1.2 = 105.6 < 16.6 + 65.5/0.6), fast LL.
    check("Ring/Simple 105.6 us" in rows["65536"], "64 KiB on the slow table: Ring/Simple at 105.6 us", out)
    check("Ring/LL 29.5 us" in rows["65536"], "64 KiB on the fast table: Ring/LL at 29.5 us", out)
    # 256 KiB: LL still wins on the fast table only because of the ring's x1.4 Simple latency.
    check("Ring/LL 62.3 us" in rows["262144"], "256 KiB on the fast table: Ring/LL", out)
    check(rows["1048576"].count("Ring/Simple") == 2, "1 MiB: Simple on both", out)
    check(rows["16384"].count("Ring/LL") == 2, "16 KiB: LL on both", out)

    # The tree's correction: at 64 KiB (log2(64K/64) = 10) Simple's bandwidth x0.6.
    tree = os.path.join(d, "tree")
    table(tree, ring_ll=(100.0, 0.1), ring_simple=(100.0, 0.1), tree_simple=(1.0, 1.0))
    rc, out = run("--sizes", "64K", f"t={tree}")
    check(rc == 0 and "Tree/Simple 110.2 us" in out, "64 KiB tree: 1 + 65536 / (1000 x 0.6)", out)

    empty = os.path.join(d, "empty")
    with open(empty, "w") as f:
        f.write("no table here\n")
    rc, out = run(f"e={empty}")
    check(rc == 2 and "no NCCL tuning table" in out and "empty" in out, "a log without a table is named", out)
    rc, out = run(slow)
    check(rc == 2 and "NAME=LOG" in out, "an argument without NAME= is refused", out)
print("ok")
