#!/usr/bin/env python3
"""Which algorithm and protocol NCCL picks for each size, from its own tuning table.

NCCL prints its cost table at INIT with NCCL_DEBUG_SUBSYS=TUNING (per collective, per
algorithm and protocol: "latency/bandwidth", us and GB/s). NCCL 2.28's choice for one
collective is the entry of least time (src/graph/tuning.cc, ncclTopoGetAlgoTime, one
operation in flight):

    time = lat + bytes / (1000 * bw)

with the tree's bandwidth scaled by treeCorrectionFactor[protocol][log2(bytes / 64)] for
allreduce, and the ring's Simple latency times 1.4 (1.9 below sm_80) for allreduce over
more than one node once bytes / (channels * ranks) >= 64 ("plateau effect of ring").
This script applies that rule to the table a log holds, so two runs whose networks were
reported differently can be compared entry by entry: which protocol each size ran.

    nccl_choice.py [--coll AllReduce] [--sizes 1K,4K,...] [--min-cc 90] NAME=LOG ...

Reads rank 0's table, its rank count (`nranks N`), its ring channel count (`Channel xx/NN`)
and assumes one rank per node (the GPU record's runs: each rank its own NCCL host); prints a
markdown table of each log's pick and predicted time per size.
"""
import argparse
import re
import sys

ALGOS = ["Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT"]
PROTOS = ["LL", "LL128", "Simple"]
# NCCL 2.28.9, src/graph/tuning.cc
TREE_CORRECTION = {
    "LL": [1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0],
    "LL128": [1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0],
    "Simple": [.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9],
}


def parse_size(text):
    m = re.fullmatch(r"(\d+)([KMG]?)", text.strip())
    if not m:
        raise ValueError(f"not a size: {text!r}")
    return int(m.group(1)) << {"": 0, "K": 10, "M": 20, "G": 30}[m.group(2)]


def read_log(path):
    """(table, nranks, nchannels): table[coll][(algo, proto)] = (lat_us, bw_gbs)."""
    table, algos, nranks, nchannels = {}, None, None, None
    with open(path, errors="replace") as f:
        for line in f:
            if nranks is None:
                m = re.search(r"\bnranks (\d+)\b", line)
                if m:
                    nranks = int(m.group(1))
            m = re.search(r"Channel \d+/(\d+) :", line)
            if m and nchannels is None:
                nchannels = int(m.group(1))
            m = re.search(r"INFO\s+Algorithm\s+\|(.*)$", line)
            if m:
                algos = [a.strip() for a in m.group(1).split("|") if a.strip()]
                continue
            m = re.search(r"INFO\s+(\w+)\s+\|((?:\s*[\d.]+/\s*[\d.]+\s*\|)+)", line)
            if m and algos:
                coll = m.group(1)
                cells = re.findall(r"([\d.]+)/\s*([\d.]+)", m.group(2))
                for i, (lat, bw) in enumerate(cells):
                    a, p = i // 3, PROTOS[i % 3]
                    if a < len(algos):
                        # A table is printed once per communicator: keep the first.
                        table.setdefault(coll, {}).setdefault((algos[a], p), (float(lat), float(bw)))
    if not table:
        raise ValueError(f"{path}: no NCCL tuning table (NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING)")
    if nranks is None or nchannels is None:
        raise ValueError(f"{path}: no 'nranks N' or 'Channel xx/NN' line to read the rank and channel counts from")
    return table, nranks, nchannels


def pick(entries, coll, nbytes, nranks, nchannels, min_cc):
    """NCCL's choice: (algo, proto, time_us), least time over the entries with bandwidth."""
    best = None
    log_size = (nbytes >> 6).bit_length() - 1 if nbytes >> 6 else -1
    for (algo, proto), (lat, bw) in entries.items():
        if bw == 0:
            continue
        if algo == "Tree" and coll == "AllReduce" and 0 <= log_size < 23:
            bw *= TREE_CORRECTION[proto][log_size]
        if (algo == "Ring" and proto == "Simple" and nranks > 1 and coll == "AllReduce"
                and nbytes // (nchannels * nranks) >= 64):
            lat *= 1.9 if min_cc < 80 else 1.4
        t = lat + nbytes / (1000.0 * bw)
        if best is None or t < best[2]:
            best = (algo, proto, t)
    return best


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--coll", default="AllReduce")
    ap.add_argument("--sizes", default="1K,4K,16K,64K,256K,1M,4M,16M,64M")
    ap.add_argument("--min-cc", type=int, default=90, help="lowest compute capability (90: H100/H200)")
    ap.add_argument("logs", nargs="+", metavar="NAME=LOG")
    a = ap.parse_args()
    try:
        sizes = [parse_size(s) for s in a.sizes.split(",")]
        runs = []
        for arg in a.logs:
            name, sep, path = arg.partition("=")
            if not sep:
                raise ValueError(f"{arg!r}: give NAME=LOG")
            table, nranks, nchannels = read_log(path)
            if a.coll not in table:
                raise ValueError(f"{path}: no {a.coll} row in the tuning table")
            runs.append((name, table[a.coll], nranks, nchannels))
    except (OSError, ValueError) as e:
        print(f"nccl_choice.py: {e}", file=sys.stderr)
        return 2
    head = "| size (B) | " + " | ".join(f"{n} ({r} ranks, {c} channels)" for n, _, r, c in runs) + " |"
    print(head)
    print("|---|" + "---|" * len(runs))
    for s in sizes:
        cells = []
        for _, entries, nranks, nchannels in runs:
            choice = pick(entries, a.coll, s, nranks, nchannels, a.min_cc)
            if choice is None:  # every entry 0: NCCL has no algorithm for it either
                cells.append("none (no entry with bandwidth)")
                continue
            algo, proto, t = choice
            cells.append(f"{algo}/{proto} {t:.1f} us")
        print(f"| {s} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
