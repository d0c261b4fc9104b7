#!/usr/bin/env python3
"""How much of a shaped cable's rate TCP gets on the emulated fabric, per peak-bucket slack.

`topocoll fabric up --peak-slack-us US` sizes each cable's tbf peak bucket to one frame plus
US microseconds of the cable's data (fabric/fabric_script.cpp). With one frame (US = 0) every
packet waits for the kernel's timer, and whatever the timer is late is lost to the cable.
This brings bigraph-32 up at each rate and slack (interleaved within each round), sends TCP
from s0 to s16 (four shaped cables in series: s0->U0->L2->U2->s16) over 1, 2 and 4
connections for SECONDS each, and reports the goodput next to the rate and to TCP's ceiling
over the cable (payload / frame: (MTU - 52) / (MTU + 14) with timestamps).

Needs root. Optional background load (--load N busy loops) shows whether a busy machine's
timer is later. Writes OUT/cable-goodput.json and OUT/cable-goodput.md.
Usage: perf/fabric/cable_goodput.py --out DIR [--build build] [--rates 1000,100]
                                    [--slacks 0,100] [--flows 1,2,4] [--rounds 3]
                                    [--seconds 2] [--load 0]
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

from command import run
from tcp_flows import measure

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FABRIC = "gp"
SRC, DST = "s0.g0", "s16.g0"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--build", default="build")
    ap.add_argument("--rates", default="1000,100")
    ap.add_argument("--slacks", default="0,100")
    ap.add_argument("--flows", default="1,2,4")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--load", type=int, default=0)
    ap.add_argument("--mtu", type=int, default=9000)
    a = ap.parse_args()
    cli = os.path.join(ROOT, a.build, "tools", "topocoll")
    topo = os.path.join(ROOT, "examples", "bigraph-32.json")
    rates = [float(x) for x in a.rates.split(",")]
    slacks = [float(x) for x in a.slacks.split(",")]
    flow_counts = [int(x) for x in a.flows.split(",")]
    ceiling = (a.mtu - 52) / (a.mtu + 14)
    samples = {}  # (rate, slack, flows) -> [Mbit/s]
    loaders = [subprocess.Popen(["sh", "-c", "while :; do :; done"]) for _ in range(a.load)]
    route = ""
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    try:
        for rnd in range(a.rounds):
            for rate in rates:
                for slack in slacks:
                    run([cli, "fabric", "up", topo, "--name", FABRIC, "--rate-mbit", f"{rate:g}",
                         "--mtu", str(a.mtu), "--peak-slack-us", f"{slack:g}"])
                    try:
                        status = json.loads(run([cli, "fabric", "status", "--name", FABRIC, "--json"]))[0]
                        address = next(e["address"] for e in status["endpoints"] if e["id"] == DST)
                        route = run([cli, "fabric", "route", "--name", FABRIC, SRC, DST]).strip()
                        for flows in flow_counts:
                            mbit = measure(cli, FABRIC, SRC, DST, address, flows, a.seconds)
                            samples.setdefault((rate, slack, flows), []).append(mbit)
                            print(f"round {rnd + 1}: {rate:g} Mbit/s, slack {slack:g} us, {flows} flows: "
                                  f"{mbit:.1f} Mbit/s", flush=True)
                    finally:
                        run([cli, "fabric", "down", "--name", FABRIC], check=False)
    finally:
        for p in loaders:
            p.kill()
    rows = []
    for (rate, slack, flows), xs in sorted(samples.items()):
        med = statistics.median(xs)
        rows.append({"rate_mbit": rate, "peak_slack_us": slack, "flows": flows, "goodput_mbit": xs,
                     "median_mbit": med, "of_rate": med / rate, "of_tcp_ceiling": med / (rate * ceiling)})
    os.makedirs(a.out, exist_ok=True)
    meta = {"date": started, "commit": run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"]).strip(),
            "machine": f"{os.cpu_count()} cores ({platform.machine()}), kernel {platform.release()}",
            "command": " ".join(["perf/fabric/cable_goodput.py"] + sys.argv[1:]),
            "route": route, "mtu": a.mtu, "tcp_ceiling": ceiling, "load": a.load,
            "seconds": a.seconds, "rounds": a.rounds}
    with open(os.path.join(a.out, "cable-goodput.json"), "w") as f:
        json.dump({"meta": meta, "rows": rows}, f, indent=1)
    lines = [f"- date: {meta['date']}, commit {meta['commit']}", f"- machine: {meta['machine']}",
             f"- command: `{meta['command']}`",
             f"- route {SRC} -> {DST}: `{route}`; MTU {a.mtu}, TCP's ceiling {ceiling:.3f} of the rate",
             f"- background load: {a.load} busy loops; median of {a.rounds} rounds of {a.seconds:g} s, "
             "variants interleaved within a round", "",
             "| rate Mbit/s | peak slack us | flows | goodput Mbit/s (min-max) | of the rate | of TCP's ceiling |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        xs = r["goodput_mbit"]
        lines.append(f"| {r['rate_mbit']:g} | {r['peak_slack_us']:g} | {r['flows']} | {r['median_mbit']:.1f} "
                     f"({min(xs):.1f}-{max(xs):.1f}) | {r['of_rate']:.3f} | {r['of_tcp_ceiling']:.3f} |")
    table = "\n".join(lines) + "\n"
    with open(os.path.join(a.out, "cable-goodput.md"), "w") as f:
        f.write(table)
    print(table)


if __name__ == "__main__":
    main()
