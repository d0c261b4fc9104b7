#!/usr/bin/env python3
"""How long nvcc takes over the CUDA kernels' units, phase by phase, and what that makes the
build's CUDA step on a machine with a core for every unit and architecture.

    python3 perf/build/nvcc_phases.py BUILD_DIR [--old-rev REV] [--rounds N] [--json OUT]

Each unit of topocoll_kernels_cuda is compiled with its own command from BUILD_DIR's
compile_commands.json plus nvcc's `--time`, which records every phase (preprocessing,
cudafe++, cicc and ptxas per architecture, fatbinary, the host compiler). With --old-rev,
kernels/reduce_cuda.cu as it was at REV (all kernels in one unit, before they were split by
type group) is compiled with reduce_cuda.cu's command beside them, rounds interleaved.

The critical path printed is computed from the measured phases, not timed: a unit's host
phases in a row, its architectures' device chains (cicc then ptxas) side by side when nvcc
runs them in parallel (--threads) or one after another when not, and the units themselves
side by side. It is what the CUDA step would take where cores are plenty (the GPU machine's
16), not what it takes on a 2-core machine.
"""
import argparse
import csv
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def unit_commands(build_dir):
    """{source path: (directory, argv)} for the CUDA units of the kernels library."""
    with open(os.path.join(build_dir, "compile_commands.json")) as f:
        entries = json.load(f)
    units = {}
    for e in entries:
        src = e["file"]
        if src.endswith(".cu") and "/kernels/" in src and "topocoll_kernels_cuda" in e["command"]:
            units[src] = (e["directory"], shlex.split(e["command"]))
    return units


def timed(directory, argv, source, out_dir):
    """Runs one compile of `source` with `argv` (its own source swapped in), returns
    {phase key: ms}, keys 'arch phase' for device phases and 'host phase' for the rest."""
    csv_path = os.path.join(out_dir, "time.csv")
    obj = os.path.join(out_dir, "unit.o")
    if os.path.exists(csv_path):
        os.remove(csv_path)
    args = []
    skip = False
    for a in argv:
        if skip:
            skip = False
            continue
        if a == "-o":
            skip = True
            continue
        if a.endswith(".cu"):
            a = source
        args.append(a)
    subprocess.run(args + ["-o", obj, "--time", csv_path], cwd=directory, check=True,
                   stdout=subprocess.DEVNULL)
    phases = {}
    with open(csv_path) as f:
        rows = list(csv.reader(f))
    for row in rows[1:]:
        if len(row) < 7:
            continue
        phase, arch, ms = row[1].strip(), row[4].strip(), float(row[6])
        if phase.startswith("nvcc (driver)"):
            continue
        device = phase.startswith("cicc") or phase.startswith("ptxas")
        key = f"{arch or '-'} {phase}" if device else f"host {phase}"
        phases[key] = phases.get(key, 0.0) + ms
    return phases


def chains(phases):
    """Per virtual architecture: cicc (compute_XX) and the ptxas runs it feeds (sm_XX)."""
    out = {}
    for key, ms in phases.items():
        arch = key.partition(" ")[0]
        if arch == "host":
            continue
        number = re.sub(r"\D", "", arch)
        out[number] = out.get(number, 0.0) + ms
    return out


def critical_path_ms(phases, parallel_archs):
    host = sum(ms for k, ms in phases.items() if k.startswith("host "))
    device = chains(phases).values()
    return host + (max(device, default=0.0) if parallel_archs else sum(device))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("build_dir")
    ap.add_argument("--old-rev", help="also compile kernels/reduce_cuda.cu as it was at REV")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json")
    args = ap.parse_args()

    units = unit_commands(args.build_dir)
    if not units:
        sys.exit(f"nvcc_phases: no CUDA units of topocoll_kernels_cuda in {args.build_dir}/compile_commands.json")
    work = tempfile.mkdtemp(prefix="nvcc-phases-")
    arms = []  # (label, directory, argv, source, threads)
    # Phases are timed one after another (no --threads), so each phase's time is its own and
    # not its share of a contended machine; the critical path then puts side by side what the
    # build's command runs side by side.
    for src, (directory, argv) in sorted(units.items()):
        threads = "--threads=0" in argv
        argv = [a for a in argv if a != "--threads=0"]
        arms.append((os.path.relpath(src, ROOT), directory, argv, src, threads))
    if args.old_rev:
        old_src = os.path.join(work, "reduce_cuda_old.cu")
        with open(old_src, "wb") as f:
            f.write(subprocess.run(["git", "-C", ROOT, "show", f"{args.old_rev}:kernels/reduce_cuda.cu"],
                                   check=True, stdout=subprocess.PIPE).stdout)
        reduce = next(s for s in units if s.endswith("/reduce_cuda.cu"))
        directory, argv = units[reduce]
        arms.insert(0, (f"kernels/reduce_cuda.cu at {args.old_rev} (one unit)", directory, argv, old_src, False))

    samples = {a[0]: [] for a in arms}
    for r in range(args.rounds):
        for label, directory, argv, src, _ in arms:
            samples[label].append(timed(directory, argv, src, work))
            print(f"round {r + 1}: {label}", file=sys.stderr)

    rows = []
    for label, _, _, _, threads in arms:
        runs = samples[label]
        keys = sorted({k for run in runs for k in run})
        median = {k: statistics.median(run.get(k, 0.0) for run in runs) for k in keys}
        rows.append({
            "unit": label,
            "archs_in_parallel": threads,
            "phases_ms": median,
            "cpu_s": sum(median.values()) / 1000,
            "device_chains_s": {a: ms / 1000 for a, ms in chains(median).items()},
            "critical_path_s": critical_path_ms(median, threads) / 1000,
        })

    print(f"| unit | nvcc CPU (s) | device chain per virtual arch (s) | archs at once | critical path (s) |")
    print("|---|---|---|---|---|")
    for row in rows:
        ch = ", ".join(f"compute_{a} {s:.1f}" for a, s in sorted(row["device_chains_s"].items()))
        print(f"| {row['unit']} | {row['cpu_s']:.1f} | {ch} | {'yes' if row['archs_in_parallel'] else 'no'} "
              f"| {row['critical_path_s']:.1f} |")
    old = rows[:1] if args.old_rev else []
    # The reduce kernels' units (copy_ranges_cuda.cu was never part of the one unit).
    kernels = [r for r in rows[len(old):] if not r["unit"].endswith("copy_ranges_cuda.cu")]
    summary = {"rounds": args.rounds, "units": rows,
               "split_critical_path_s": max(r["critical_path_s"] for r in kernels),
               "split_cpu_s": sum(r["cpu_s"] for r in kernels)}
    print()
    print(f"medians of {args.rounds} rounds; the reduce kernels now: {len(kernels)} units, "
          f"{summary['split_cpu_s']:.1f} s of nvcc CPU, critical path {summary['split_critical_path_s']:.1f} s")
    if old:
        summary["one_unit_critical_path_s"] = old[0]["critical_path_s"]
        summary["one_unit_cpu_s"] = old[0]["cpu_s"]
        print(f"in one unit at {args.old_rev}: {old[0]['cpu_s']:.1f} s of nvcc CPU, "
              f"critical path {old[0]['critical_path_s']:.1f} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=2)


if __name__ == "__main__":
    main()
