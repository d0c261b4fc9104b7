#!/usr/bin/env python3
"""topocoll's host data path against Open MPI over TCP, side by side in one run.

Installs Open MPI from Debian (openmpi-bin, libopenmpi-dev) when missing, builds a small
MPI_Allreduce timer (perf/host/mpi_allreduce_timer.c), and runs it and `topocoll bench`
(ring, hd, and rd up to 1 MiB) interleaved, several rounds, 1 KiB to 64 MiB, 8 processes
over TCP loopback (`--mca btl tcp,self`); then the net plugin's own latency and bandwidth
through its C ABI (perf/plugin/net_plugin_pingpong, 2 ranks). Both report the median iteration time of the slowest rank, float32
sum allreduce. Writes perf/results/host-vs-openmpi.{md,json}: per size the median over
rounds and the spread (min-max of the rounds), each of topocoll's algorithms against Open
MPI, and the best of them (the lowest of three medians, so a little flattered by the pick).
The order alternates round by round (Open MPI first in even rounds, topocoll first in odd
ones), so neither side always runs on the machine the other just warmed or loaded. The machine is shared and noisy: compare ratios from one run, never absolute times
across runs.

Usage: perf/host/compare_openmpi.py [--build build] [--rounds 5] [--ranks 8]
"""
import argparse
import shutil
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SIZES = [1 << 10, 4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 2 << 20, 4 << 20, 16 << 20, 64 << 20]


def sh(cmd, **kw):
    return subprocess.run(cmd, check=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw).stdout


def ensure_openmpi():
    if shutil.which("mpicc") and shutil.which("mpirun"):
        return
    print("installing Open MPI from Debian's packages", flush=True)
    sudo = [] if os.geteuid() == 0 else ["sudo"]
    sh(sudo + ["apt-get", "update", "-qq"])
    sh(sudo + ["env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "install", "-y", "-qq",
               "--no-install-recommends", "openmpi-bin", "libopenmpi-dev"])


def iters_for(size):
    return 40 if size <= (64 << 10) else 20 if size <= (4 << 20) else 6


def run_openmpi(timer, ranks, sizes):
    out = {}
    for size in sizes:
        cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(ranks), "--mca", "btl", "tcp,self",
               "--mca", "btl_tcp_if_include", "lo", "--mca", "pml", "ob1", timer, "--iters", str(iters_for(size)), str(size)]
        for line in sh(cmd).splitlines():
            parts = line.split()
            if len(parts) == 4 and parts[0].isdigit():
                out[int(parts[0])] = float(parts[1])
    return out


RD_MAX = 1 << 20  # recursive doubling moves the whole vector every step: small sizes only


EAGER_MAX = 64 << 10  # TOPOCOLL_NET_EAGER_BYTES' default


PIPELINE_MIN = 2 << 20  # below, no step of 8 ranks is cut at the default 1 MiB chunk


def run_topocoll(cli, ranks, sizes, algos, eager=True, pipeline=False):
    out = {}
    env = dict(os.environ)
    suffix = ""
    if not eager:
        env["TOPOCOLL_NET_EAGER_BYTES"] = "0"  # every message through the progress threads
        suffix = "-no-eager"
    if pipeline:
        # Off by default on the host backend (exec/pipeline.h); on here: each round's
        # reduce on a worker thread behind the next round's transfers.
        env["TOPOCOLL_PIPELINE_CHUNK_BYTES"] = "1M"
        suffix = "-pipelined"
    for size in sizes:
        here = [x for x in algos if x != "rd" or size <= RD_MAX]
        with tempfile.NamedTemporaryFile(suffix=".json") as f:
            sh([cli, "bench", "--ranks", str(ranks), "--algos", ",".join(here), "--sizes", str(size),
                "--iters", str(iters_for(size)), "--warmup", "2", "--seconds", "1000", "--json", f.name],
               env=env)
            for row in json.load(open(f.name)):
                out[(row["algo"] + suffix, row["bytes"])] = row["time_us"]
    return out


def perf_profile(cmd, label):
    """CPU profile of one command with `perf record` (all processes it starts): samples, the
    share of the kernel and of each user-space object, and the top symbols."""
    data = os.path.join(tempfile.gettempdir(), f"topocoll-profile-{label}.data")
    sh(["perf", "record", "-q", "-o", data, "--"] + cmd)
    def top(sort, n):
        out = sh(["perf", "report", "-i", data, "--no-children", "--sort", sort, "-g", "none", "--stdio"])
        rows = []
        for line in out.splitlines():
            parts = line.split(None, 1)
            if len(parts) == 2 and parts[0].endswith("%"):
                rows.append({"share": float(parts[0][:-1]) / 100, "name": parts[1].strip()})
        return rows[:n]
    samples = 0
    for line in sh(["perf", "report", "-i", data, "--stdio", "-g", "none"]).splitlines():
        if line.startswith("# Samples:"):
            word = line.split()[2]
            samples = float(word[:-1]) * 1000 if word.endswith("K") else float(word)
    return {"samples": samples, "objects": top("dso", 6), "symbols": top("sym", 10)}


def human(size):
    return f"{size >> 20} MiB" if size >= 1 << 20 else f"{size >> 10} KiB"


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default="build")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--ranks", type=int, default=8)
    p.add_argument("--out", default=os.path.join(ROOT, "perf", "results", "host-vs-openmpi"))
    p.add_argument("--profile", default="2M",
                   help="size to profile both with `perf record` (hd and Open MPI, 200 iterations); 'none' to skip")
    a = p.parse_args()
    ensure_openmpi()
    cli = os.path.join(ROOT, a.build, "tools", "topocoll")
    timer = os.path.join(tempfile.gettempdir(), "topocoll_mpi_allreduce_timer")
    sh(["mpicc", "-O2", "-o", timer, os.path.join(ROOT, "perf", "host", "mpi_allreduce_timer.c")])
    algos = ["ring", "hd", "rd"]
    samples = {}  # (who, size) -> [us per round]
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    for rnd in range(a.rounds):
        # Interleaved per size, the order alternating round by round (Open MPI first in even
        # rounds, topocoll first in odd ones), so drift and what ran just before hit both alike.
        for size in SIZES:
            def openmpi():
                for k, v in run_openmpi(timer, a.ranks, [size]).items():
                    samples.setdefault(("openmpi", k), []).append(v)

            def topocoll():
                for (algo, k), v in run_topocoll(cli, a.ranks, [size], algos).items():
                    samples.setdefault((algo, k), []).append(v)
            for side in ((openmpi, topocoll) if rnd % 2 == 0 else (topocoll, openmpi)):
                side()
            if size <= EAGER_MAX:
                # Where the eager channel applies, the same hd with it switched off: what
                # the progress threads' hand-offs cost per step.
                for (algo, k), v in run_topocoll(cli, a.ranks, [size], ["hd"], eager=False).items():
                    samples.setdefault((algo, k), []).append(v)
            if size >= PIPELINE_MIN:
                # The same ring and hd pipelined: what overlapping each round's reduce with
                # the next round's transfers gains (or costs) here.
                for (algo, k), v in run_topocoll(cli, a.ranks, [size], ["ring", "hd"], pipeline=True).items():
                    samples.setdefault((algo, k), []).append(v)
        print(f"round {rnd + 1}/{a.rounds} done", flush=True)
    rows = []
    for size in SIZES:
        row = {"bytes": size}
        for who in ["openmpi"] + algos + ["hd-no-eager", "ring-pipelined", "hd-pipelined"]:
            v = samples.get((who, size), [])
            row[who] = {"median_us": statistics.median(v), "min_us": min(v), "max_us": max(v)} if v else None
        # Each algorithm's own ratio, and the best of them: the lowest of three noisy medians
        # reads a little low, so the table shows all three beside it.
        row["over_openmpi"] = {x: row[x]["median_us"] / row["openmpi"]["median_us"] for x in algos if row[x]}
        best = min(row["over_openmpi"], key=row["over_openmpi"].get)
        row["best"] = best
        row["best_over_openmpi"] = row["over_openmpi"][best]
        # The targets: at or below Open MPI everywhere, 0.7x of it from 2 MiB up.
        row["target"] = 0.7 if size >= 2 << 20 else 1.0
        row["target_met"] = row["best_over_openmpi"] <= row["target"]
        rows.append(row)
    profiles = {}
    if a.profile != "none" and shutil.which("perf"):
        size = int(a.profile[:-1]) << 20 if a.profile.endswith("M") else int(a.profile)
        iters = 200
        profiles["size"] = size
        profiles["iterations"] = iters
        profiles["topocoll hd"] = perf_profile(
            [cli, "bench", "--ranks", str(a.ranks), "--algos", "hd", "--sizes", str(size), "--iters", str(iters),
             "--warmup", "2", "--seconds", "1000"], "topocoll")
        profiles["openmpi"] = perf_profile(
            ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(a.ranks), "--mca", "btl", "tcp,self",
             "--mca", "btl_tcp_if_include", "lo", "--mca", "pml", "ob1", timer, "--iters", str(iters), str(size)],
            "openmpi")
    pingpong = os.path.join(ROOT, a.build, "perf", "plugin", "net_plugin_pingpong")
    plugin_rows = []
    if os.path.exists(pingpong):
        with tempfile.NamedTemporaryFile(suffix=".json") as f:
            print(sh([pingpong, "--json", f.name]), flush=True)
            plugin_rows = json.load(open(f.name))
    doc = {"date": started, "ranks": a.ranks, "rounds": a.rounds, "rows": rows, "net_plugin": plugin_rows,
           "profile": profiles,
           "command": " ".join([os.path.relpath(sys.argv[0], ROOT)] + sys.argv[1:]),
           "commit": sh(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"]).strip()}
    with open(a.out + ".json", "w") as f:
        json.dump(doc, f, indent=1)
    lines = [f"# Host data path: topocoll against Open MPI over TCP",
             "",
             f"- date: {started}, commit {doc['commit']}",
             f"- machine: {os.cpu_count()} cores, kernel {platform.release()}; {sh(['mpirun', '--version']).splitlines()[0]}",
             f"- command: `{doc['command']}`",
             f"- {a.ranks} processes on this machine over TCP loopback; float32 sum allreduce; time = median "
             "iteration time of the slowest rank (both tools); per size the median over "
             f"{a.rounds} interleaved rounds (Open MPI first in even rounds, topocoll first in odd ones), "
             "and the rounds' min-max",
             "- Open MPI: `mpirun --mca btl tcp,self --mca btl_tcp_if_include lo --mca pml ob1` with a "
             "small MPI_Allreduce timer (perf/host/mpi_allreduce_timer.c); topocoll: `topocoll bench` "
             "(host backend, socket transport; `-c 1` checks the warm-up iterations' results and one "
             "iteration's after the timed ones, which run unchecked, as nccl-tests' do)",
             "",
             "",
             "| size | Open MPI us | topocoll ring us | topocoll hd us | topocoll rd us | ring, hd, rd / Open MPI "
             "| best of 3 / Open MPI | target | hd, eager channel off | ring pipelined (1 MiB) | hd pipelined (1 MiB) |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    def each(r):
        return ", ".join(f"{r['over_openmpi'][x]:.2f}" if x in r["over_openmpi"] else "-" for x in algos)
    for r in rows:
        cell = lambda x: f"{r[x]['median_us']:.0f} ({r[x]['min_us']:.0f}-{r[x]['max_us']:.0f})" if r[x] else "-"
        lines.append(f"| {human(r['bytes'])} | {cell('openmpi')} | {cell('ring')} | {cell('hd')} | {cell('rd')} | "
                     f"{each(r)} | "
                     f"{r['best_over_openmpi']:.2f} ({r['best']}) | <= {r['target']} "
                     f"{'met' if r['target_met'] else 'MISSED'} | {cell('hd-no-eager')} | "
                     f"{cell('ring-pipelined')} | {cell('hd-pipelined')} |")
    lines += ["",
              "The pipelined columns run the same ring and hd with TOPOCOLL_PIPELINE_CHUNK_BYTES=1M "
              "(exec/pipeline.h): each step's messages cut into pieces of at least 1 MiB (at most 8), "
              "each round's reduce on a worker thread while the next round moves. The host backend "
              "leaves it off by default because of what these columns show on a machine with no core "
              "to spare: the reduce and the socket copies compete for the same 2 cores, so the rounds "
              "add their per-round costs (a clear-to-send each) and hide nothing. On the NCCL backend, "
              "where the reduce kernels and the transfers use different engines, it is on by default."]
    if profiles:
        lines += ["", f"CPU profile at {human(profiles['size'])} (`perf record` over the whole run of "
                  f"{profiles['iterations']} iterations plus start-up, every process; share of samples):", ""]
        for who in ["topocoll hd", "openmpi"]:
            prof = profiles[who]
            objects = ", ".join(f"{o['name']} {o['share']:.0%}" for o in prof["objects"][:4])
            symbols = ", ".join(f"{x['name'].replace('[k] ', '').replace('[.] ', '')[:60]} {x['share']:.1%}"
                                for x in prof["symbols"][:6])
            lines.append(f"- {who}: {prof['samples']:.0f} samples; {objects}; top symbols: {symbols}")
        copies = {who: sum(x["share"] for x in profiles[who]["symbols"]
                           if "_copy_to_iter" in x["name"] or "_copy_from_iter" in x["name"])
                  for who in ["topocoll hd", "openmpi"]}
        lines += ["", f"Both are CPU-bound in the kernel's loopback TCP copies (`_copy_to_iter` + "
                  f"`_copy_from_iter`: {copies['topocoll hd']:.0%} of topocoll's samples, "
                  f"{copies['openmpi']:.0%} of Open MPI's), which every allreduce algorithm pays alike "
                  "(2(n-1)/n of the vector in and out of every rank); topocoll took "
                  f"{profiles['topocoll hd']['samples'] / max(1, profiles['openmpi']['samples']):.2f}x Open MPI's "
                  "CPU samples for the same iterations (its own includes launching, planning and the expected "
                  "results). Where a size misses 0.7x, that floor is why: being 30 % faster than a peer that "
                  "spends about the same CPU on the same copies needs fewer copies, not a faster step."]
    if plugin_rows:
        lines += ["", "Net plugin through its C ABI (2 ranks, isend/irecv/test as NCCL's proxy calls them; "
                  "perf/plugin/net_plugin_pingpong):", "",
                  "| test | bytes | result |", "|---|---|---|"]
        for p in plugin_rows:
            value = f"{p['one_way_us']:.1f} us one-way" if p["test"] == "latency" else f"{p['gbs']:.2f} GB/s"
            lines.append(f"| {p['test']} | {p['bytes']} | {value} |")
    with open(a.out + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    print(f"wrote {a.out}.md and .json")


if __name__ == "__main__":
    main()
