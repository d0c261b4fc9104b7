#!/usr/bin/env python3
"""topocoll's host data path against Open MPI over TCP, side by side in one run.

Installs Open MPI from Debian (openmpi-bin, libopenmpi-dev) when missing, builds a small
MPI_Allreduce timer (perf/host/mpi_allreduce_timer.c), and runs it and `topocoll bench`
(ring, hd) interleaved, several rounds, 1 KiB to 64 MiB, 8 processes over TCP loopback
(`--mca btl tcp,self`). Both report the median iteration time of the slowest rank, float32
sum allreduce. Writes perf/results/host-vs-openmpi.{md,json}: per size the median over
rounds and the spread (min-max of the rounds), and topocoll's best algorithm against Open
MPI. The machine is shared and noisy: compare ratios from one run, never absolute times
across runs.

Usage: perf/host/compare_openmpi.py [--build build] [--rounds 5] [--ranks 8]
"""
import argparse
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
    if subprocess.run(["sh", "-c", "command -v mpicc && command -v mpirun"], stdout=subprocess.DEVNULL).returncode == 0:
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


def run_topocoll(cli, ranks, sizes, algos):
    out = {}
    for size in sizes:
        with tempfile.NamedTemporaryFile(suffix=".json") as f:
            sh([cli, "bench", "--ranks", str(ranks), "--algos", ",".join(algos), "--sizes", str(size),
                "--iters", str(iters_for(size)), "--warmup", "2", "--seconds", "1000", "--json", f.name])
            for row in json.load(open(f.name)):
                out[(row["algo"], row["bytes"])] = row["time_us"]
    return out


def human(size):
    return f"{size >> 20} MiB" if size >= 1 << 20 else f"{size >> 10} KiB"


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default="build")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--ranks", type=int, default=8)
    p.add_argument("--out", default=os.path.join(ROOT, "perf", "results", "host-vs-openmpi"))
    a = p.parse_args()
    ensure_openmpi()
    cli = os.path.join(ROOT, a.build, "tools", "topocoll")
    timer = os.path.join(tempfile.gettempdir(), "topocoll_mpi_allreduce_timer")
    sh(["mpicc", "-O2", "-o", timer, os.path.join(ROOT, "perf", "host", "mpi_allreduce_timer.c")])
    algos = ["ring", "hd"]
    samples = {}  # (who, size) -> [us per round]
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    for rnd in range(a.rounds):
        # Interleaved per size: Open MPI, then topocoll, so drift hits both alike.
        for size in SIZES:
            for k, v in run_openmpi(timer, a.ranks, [size]).items():
                samples.setdefault(("openmpi", k), []).append(v)
            for (algo, k), v in run_topocoll(cli, a.ranks, [size], algos).items():
                samples.setdefault((algo, k), []).append(v)
        print(f"round {rnd + 1}/{a.rounds} done", flush=True)
    rows = []
    for size in SIZES:
        row = {"bytes": size}
        for who in ["openmpi"] + algos:
            v = samples.get((who, size), [])
            row[who] = {"median_us": statistics.median(v), "min_us": min(v), "max_us": max(v)} if v else None
        best = min(algos, key=lambda x: row[x]["median_us"])
        row["best"] = best
        row["best_over_openmpi"] = row[best]["median_us"] / row["openmpi"]["median_us"]
        rows.append(row)
    doc = {"date": started, "ranks": a.ranks, "rounds": a.rounds, "rows": rows,
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
             f"{a.rounds} interleaved rounds, and the rounds' min-max",
             "- Open MPI: `mpirun --mca btl tcp,self --mca btl_tcp_if_include lo --mca pml ob1` with a "
             "small MPI_Allreduce timer (perf/host/mpi_allreduce_timer.c); topocoll: `topocoll bench` "
             "(host backend, socket transport, every result checked)",
             "",
             "| size | Open MPI us | topocoll ring us | topocoll hd us | best / Open MPI |",
             "|---|---|---|---|---|"]
    for r in rows:
        cell = lambda x: f"{r[x]['median_us']:.0f} ({r[x]['min_us']:.0f}-{r[x]['max_us']:.0f})"
        lines.append(f"| {human(r['bytes'])} | {cell('openmpi')} | {cell('ring')} | {cell('hd')} | "
                     f"{r['best_over_openmpi']:.2f} ({r['best']}) |")
    with open(a.out + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines[-len(rows) - 2:]))
    print(f"wrote {a.out}.md and .json")


if __name__ == "__main__":
    main()
