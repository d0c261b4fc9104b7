#!/usr/bin/env python3
"""Median per test and size of net_plugin_pingpong JSON runs of two builds, and B's ratio.

    pingpong_table.py [--json OUT] A.json [A.json ...] -- B.json [B.json ...]

Latency rows are one-way microseconds (ratio below 1: B is faster); bandwidth and duplex
rows GB/s (ratio above 1: B is faster). Prints a Markdown table.
"""
import json
import statistics
import sys


def load(paths):
    values = {}
    for path in paths:
        with open(path) as f:
            for row in json.load(f):
                key = (row["test"], row["bytes"])
                value = row["one_way_us"] if row["test"] == "latency" else row["gbs"]
                values.setdefault(key, []).append(float(value))
    return values


def main(argv):
    out = None
    if len(argv) >= 2 and argv[0] == "--json":
        out, argv = argv[1], argv[2:]
    if "--" not in argv:
        sys.exit(__doc__)
    split = argv.index("--")
    a, b = load(argv[:split]), load(argv[split + 1:])
    rows = []
    print("| test | bytes | A median | B median | B / A | A runs | B runs |")
    print("|---|---|---|---|---|---|---|")
    order = {"latency": 0, "bandwidth": 1, "duplex": 2}
    for key in sorted(a, key=lambda k: (order.get(k[0], 3), k[1])):
        if key not in b:
            continue
        ma, mb = statistics.median(a[key]), statistics.median(b[key])
        rows.append({"test": key[0], "bytes": key[1], "a": ma, "b": mb, "b_over_a": mb / ma,
                     "a_runs": a[key], "b_runs": b[key]})
        print(f"| {key[0]} | {key[1]} | {ma:.2f} | {mb:.2f} | {mb / ma:.2f} | "
              f"{', '.join(f'{v:.2f}' for v in a[key])} | {', '.join(f'{v:.2f}' for v in b[key])} |")
    if out:
        with open(out, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1:])
