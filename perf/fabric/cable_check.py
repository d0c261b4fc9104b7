#!/usr/bin/env python3
"""Does a fabric's cable carry its rate here? One TCP flow between two endpoints of a running
fabric (default: its first two), set beside the slowest cable on their route.

The emulation is only as good as its shaping on this machine's kernel: a tbf cable whose
timer runs late carries less than its rate (perf/results/fabric-peak-bucket-20261127), and a
machine too busy to forward carries less still. perf/gpu/fabric_nccl_tests.sh runs this after
every `fabric up` and the GPU record shows it beside the runs. A measurement, not a test: the
exit status is 0 whenever a figure came out. Every step is bounded (--timeout, default 30 s
for each CLI call, the flow's seconds plus that for the measurement): a hung namespace or
listener ends the check with an error naming the step instead of holding a GPU call.

Usage: perf/fabric/cable_check.py --name FABRIC [--cli build/tools/topocoll] [--from E] [--to E]
                                  [--seconds 2] [--timeout 30] [--json OUT]
"""
import argparse
import json
import os
import signal
import subprocess
import sys

from tcp_flows import measure

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def slowest_hop(status, route_line):
    """The rate (Mbit/s) of the slowest cable direction of one route line ("A->B  B->C ...")."""
    rates = {}
    for c in status["cables"]:
        a, b = c["name"].split("-", 1)
        rates[a, b], rates[b, a] = c["mbit_ab"], c["mbit_ba"]
    hops = [h.split("->", 1) for h in route_line.split() if "->" in h]
    return min(rates[a, b] for a, b in hops), len(hops)


def run(cmd, timeout):
    """CMD's output (stderr folded in); exits with the reason when it fails or outlives TIMEOUT s."""
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:  # subprocess.run has killed it
        sys.exit(f"cable_check: {' '.join(cmd)} did not finish in {timeout:g} s")
    if p.returncode != 0:
        sys.exit(f"cable_check: {' '.join(cmd)} failed ({p.returncode}):\n{p.stdout}")
    return p.stdout


class Expired(Exception):
    pass


def bounded_measure(seconds_allowed, *args):
    """tcp_flows.measure under an alarm: its sender has no timeout of its own. The exception
    raised in the wait makes subprocess.run kill the sender, and measure kill the receiver."""
    def expire(signum, frame):
        raise Expired()
    old = signal.signal(signal.SIGALRM, expire)
    signal.alarm(max(1, int(seconds_allowed)))
    try:
        return measure(*args)
    except Expired:
        sys.exit(f"cable_check: the TCP flow did not finish in {seconds_allowed:g} s")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--name", required=True)
    ap.add_argument("--cli", default=os.path.join(ROOT, "build", "tools", "topocoll"))
    ap.add_argument("--from", dest="src")
    ap.add_argument("--to", dest="dst")
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--timeout", type=float, default=30.0, help="seconds for each step (default 30)")
    ap.add_argument("--json")
    a = ap.parse_args()
    status = json.loads(run([a.cli, "fabric", "status", "--name", a.name, "--json"], a.timeout))[0]
    if status.get("status") != "up":
        sys.exit(f"cable_check: fabric {a.name} is not up ({status.get('status')}: {status.get('error', '')})")
    endpoints = {e["id"]: e for e in status["endpoints"]}
    ids = [e["id"] for e in status["endpoints"]]
    src = a.src or ids[0]
    dst = a.dst or ids[1]
    for e in (src, dst):
        if e not in endpoints:
            sys.exit(f"cable_check: no endpoint '{e}' in fabric {a.name} (endpoints: {', '.join(ids[:8])} ...)")
    # Unmarked traffic takes one of the route's lanes (the kernel's hash); all of a route's
    # lanes cross cables of the same classes, so lane 0's slowest cable is the flow's.
    route = run([a.cli, "fabric", "route", "--name", a.name, src, dst], a.timeout).strip().splitlines()[0]
    route = route.split(":", 1)[1].strip() if route.startswith("lane ") else route
    cable_mbit, cables = slowest_hop(status, route)
    mbit = bounded_measure(a.seconds + a.timeout, a.cli, a.name, src, dst, endpoints[dst]["address"], 1, a.seconds)
    mtu = status["mtu"]
    ceiling = (mtu - 52) / (mtu + 14)  # TCP payload per frame, with timestamps
    result = {"fabric": a.name, "topology": status["topology"], "from": src, "to": dst, "route": route,
              "cables": cables, "cable_mbit": cable_mbit, "peak_slack_us": status.get("peak_slack_us"),
              "mtu": mtu, "seconds": a.seconds, "goodput_mbit": mbit, "of_rate": mbit / cable_mbit,
              "of_tcp_ceiling": mbit / (cable_mbit * ceiling)}
    print(f"cable check: one TCP flow {src} -> {dst} across {cables} cables ({route}): {mbit:.1f} Mbit/s, "
          f"{result['of_rate']:.3f} of the slowest cable's {cable_mbit:g} Mbit/s ({result['of_tcp_ceiling']:.3f} "
          f"of TCP's ceiling; peak slack {result['peak_slack_us']} us)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
