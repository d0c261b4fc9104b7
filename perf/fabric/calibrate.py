#!/usr/bin/env python3
"""Holds the cost model to what the emulated fabric measures (docs/fabric.md).

For bigraph-32 at 8, 16 and 32 ranks and nap-4x8 with k = 1, 2 and 4 local switches, every
allreduce algorithm the planner offers runs on the fabric at three sizes, in rounds
(algorithms interleaved within a round), each case next to its prediction, with the CPU the
machine spent while it ran. Writes perf/results/fabric-calibration.{json,md,svg}.

The model's software overheads are this host transport's, not a GPU's: per step (alpha) and
per message a rank sends or receives (alpha_message), fitted once per configuration from
1 KiB ring-topo and fc-direct allreduces on the fabric (where links add almost nothing) and
passed to every prediction of that configuration. The reduce rate (gamma) is a CPU's
(--reduce-gbs).

Needs root (namespaces) and a quiet machine: the CPU column shows whether anything else ran.
Usage: perf/fabric/calibrate.py [--build build] [--rate-mbit 20] [--rounds 3]
                               [--sizes 64K,256K,1M] [--only bigraph-32@16,...]
       perf/fabric/calibrate.py --repredict RUN.json [RUN.json ...]
The second form keeps the measurements of earlier runs (later runs replace a configuration)
and recomputes every prediction with the current cost model (`topocoll plan` on the
topology scaled as `fabric up --rate-mbit` scales it, with the run's fitted overheads); the
earlier prediction stays in each row as predicted_at_run_us.
"""
import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

from command import run

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FABRIC = "cal"


def cpu_times():
    """(busy, niced, total) jiffies of the whole machine."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    user, nice, system, idle, iowait, irq, softirq, steal = fields[:8]
    busy = user + system + irq + softirq + steal
    return busy, nice, busy + nice + idle + iowait


class Calibration:
    def __init__(self, args):
        self.args = args
        self.cli = os.path.join(ROOT, args.build, "tools", "topocoll")
        self.rows = []
        self.alphas = {}

    def bench(self, config, algos, size, extra):
        with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
            out = f.name
        cmd = [self.cli, "bench", "--fabric", FABRIC, "--algos", ",".join(algos), "--sizes", size,
               "--iters", str(self.args.iters), "--warmup", "1", "--seconds", "1000", "--json", out] + extra
        b0, n0, t0 = cpu_times()
        wall0 = time.time()
        text = run(cmd)
        wall = time.time() - wall0
        b1, n1, t1 = cpu_times()
        with open(out) as f:
            rows = json.load(f)
        os.unlink(out)
        total = max(1, t1 - t0)
        cpu = {"busy": (b1 - b0) / total, "niced": (n1 - n0) / total, "wall_s": wall}
        return rows, cpu, text

    def measure_overheads(self, config, ranks_args, nranks):
        """Software cost per step (alpha) and per message (alpha_message) of this host transport
        with these ranks on this machine, from 1 KiB allreduces where links add almost nothing:
        ring-topo (2(P-1) steps, 2 messages per rank each) and fc-direct (2 steps, 2(P-1)
        messages per rank each). measured = links-only prediction + steps x alpha +
        messages x alpha_message, solved for the two unknowns (medians of three runs)."""
        zero = ranks_args + ["--alpha-us", "0", "--alpha-msg-us", "0"]
        fit = {}
        for algo in ("ring-topo", "fc-direct"):
            runs = [self.bench(config, [algo], "1K", zero)[0][0] for _ in range(3)]
            fit[algo] = statistics.median(r["time_us"] - r["predicted_us"] for r in runs)
        p = nranks
        ring_steps, ring_msgs = 2 * (p - 1), 4 * (p - 1)
        direct_steps, direct_msgs = 2, 4 * (p - 1)
        # ring: s1 a + m1 m = y1; direct: s2 a + m2 m = y2
        det = ring_steps * direct_msgs - direct_steps * ring_msgs
        alpha = (fit["ring-topo"] * direct_msgs - fit["fc-direct"] * ring_msgs) / det
        message = (ring_steps * fit["fc-direct"] - direct_steps * fit["ring-topo"]) / det
        alpha, message = max(alpha, 0.0), max(message, 0.0)
        self.alphas[config] = {"alpha_us": alpha, "alpha_message_us": message}
        return alpha, message

    def algorithms(self, topo_file, nranks):
        """Every planner algorithm that applies to an allreduce on these ranks."""
        ok = []
        # The registry's names (`topocoll algorithms`: a header line, then one row each).
        listing = subprocess.run([self.cli, "algorithms"], stdout=subprocess.PIPE, text=True, check=True).stdout
        names = [line.split()[0] for line in listing.splitlines()[1:] if line.strip()]
        for algo in names:
            p = subprocess.run([self.cli, "plan", "--topo", topo_file, "--coll", "allreduce", "--algo", algo,
                                "--bytes", "1M", "--ranks", str(nranks), "--no-verify"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if p.returncode == 0:
                ok.append(algo)
        return ok

    def configuration(self, name, topo_file, nranks):
        print(f"== {name}: {nranks} ranks of {topo_file}", flush=True)
        run([self.cli, "fabric", "down", "--name", FABRIC], check=False)
        run([self.cli, "fabric", "up", topo_file, "--name", FABRIC, "--rate-mbit", str(self.args.rate_mbit)])
        try:
            ranks_args = ["--ranks", str(nranks)]
            alpha, message = self.measure_overheads(name, ranks_args, nranks)
            gamma = ["--gamma-gbs", str(self.args.reduce_gbs)]
            extra = ranks_args + ["--alpha-us", f"{alpha:.1f}", "--alpha-msg-us", f"{message:.1f}"] + gamma
            algos = self.algorithms(topo_file, nranks)
            print(f"   alpha {alpha:.0f} us/step + {message:.0f} us/message; algorithms {', '.join(algos)}",
                  flush=True)
            samples = {}
            for rnd in range(self.args.rounds):
                for size in self.args.sizes:
                    for algo in algos:
                        rows, cpu, _ = self.bench(name, [algo], size, extra)
                        r = rows[0]
                        key = (algo, size)
                        samples.setdefault(key, []).append((r, cpu))
                        print(f"   round {rnd} {size:>5} {algo:>10}: {r['time_us']/1e3:9.1f} ms"
                              f" (predicted {r['predicted_us']/1e3:9.1f}), cpu {cpu['busy']*100:4.0f}%"
                              f" + niced {cpu['niced']*100:3.0f}%", flush=True)
            for (algo, size), got in samples.items():
                times = [g[0]["time_us"] for g in got]
                first = got[0][0]
                self.rows.append({
                    "config": name, "topology": os.path.basename(topo_file), "ranks": nranks,
                    "algo": algo, "bytes": first["bytes"], "predicted_us": first["predicted_us"],
                    "max_link_load": first["max_link_load"], "measured_us": statistics.median(times),
                    "measured_min_us": min(times), "measured_max_us": max(times), "rounds": len(times),
                    "measured_rounds_us": times,  # round by round: the contention ratios pair rounds
                    "wrong": sum(g[0]["wrong"] for g in got),
                    "cpu_busy": statistics.median(g[1]["busy"] for g in got),
                    "cpu_niced": max(g[1]["niced"] for g in got), "alpha_us": alpha,
                    "alpha_message_us": message})
        finally:
            run([self.cli, "fabric", "down", "--name", FABRIC], check=False)


def nap_variant(k, directory):
    path = os.path.join(directory, f"nap-4x8-k{k}.json")
    run([os.path.join(ROOT, ARGS.build, "tools", "topocoll"), "generate", "nap", "--packages", "4",
         "--nodes-per-package", "8", "--local-switches", str(k), "--torus", "2x2",
         "--name", f"nap-4x8-k{k}", "-o", path])
    return path


def ratio_rows(rows):
    """Measured vs predicted contention ratios per configuration and size."""
    pairs = [("ring", "ring-topo"), ("hd-naive", "hd"), ("fc", "fc-direct")]
    out = []
    index = {(r["config"], r["algo"], r["bytes"]): r for r in rows}
    for (config, algo, size), r in sorted(index.items()):
        for a, b in pairs:
            if algo != a or (config, b, size) not in index:
                continue
            o = index[(config, b, size)]
            # The algorithms are interleaved within each round, so a round's two times share its
            # conditions: the median of the per-round ratios. Records made before the rounds
            # were kept (no measured_rounds_us) give only the ratio of the two medians.
            mine, theirs = r.get("measured_rounds_us"), o.get("measured_rounds_us")
            per_round = bool(mine) and bool(theirs) and len(mine) == len(theirs)
            if per_round:
                measured = statistics.median(x / y for x, y in zip(mine, theirs))
            else:
                measured = r["measured_us"] / o["measured_us"]
            predicted = r["predicted_us"] / o["predicted_us"]
            out.append({"config": config, "bytes": size, "ratio": f"{a}/{b}", "measured": measured,
                        "predicted": predicted, "error": measured / predicted - 1,
                        "measured_from": "median of per-round ratios" if per_round else "ratio of medians"})
    return out


COLORS = {"ring": "#1f77b4", "ring-topo": "#2ca02c", "hd": "#d62728", "hd-naive": "#ff7f0e",
          "fc": "#9467bd", "fc-direct": "#8c564b", "hier": "#e377c2", "hier-hd": "#17becf",
          "direct": "#7f7f7f", "rd": "#bcbd22"}


def svg_plot(rows, path):
    """Measured against predicted (log-log), one colour per algorithm, y = x and +-15 %."""
    w, h, m = 640, 560, 70
    xs = [r["predicted_us"] / 1e3 for r in rows] + [r["measured_us"] / 1e3 for r in rows]
    lo, hi = math.log10(min(xs) / 1.3), math.log10(max(xs) * 1.3)

    def px(v):
        return m + (math.log10(v) - lo) / (hi - lo) * (w - 2 * m)

    def py(v):
        return h - m - (math.log10(v) - lo) / (hi - lo) * (h - 2 * m)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
             f'<rect width="{w}" height="{h}" fill="white"/>',
             f'<text x="{w/2}" y="24" text-anchor="middle" font-size="15">Emulated fabric: measured vs predicted allreduce time</text>']
    a, b = 10 ** lo, 10 ** hi
    band = f"{px(a)},{py(a*1.15)} {px(b)},{py(b*1.15)} {px(b)},{py(b/1.15)} {px(a)},{py(a/1.15)}"
    parts.append(f'<polygon points="{band}" fill="#eeeeee"/>')
    parts.append(f'<line x1="{px(a)}" y1="{py(a)}" x2="{px(b)}" y2="{py(b)}" stroke="black" stroke-width="1"/>')
    for e in range(math.floor(lo), math.ceil(hi) + 1):
        v = 10 ** e
        if a <= v <= b:
            parts.append(f'<line x1="{px(v)}" y1="{h-m}" x2="{px(v)}" y2="{h-m+5}" stroke="black"/>')
            parts.append(f'<text x="{px(v)}" y="{h-m+18}" text-anchor="middle">{v:g}</text>')
            parts.append(f'<line x1="{m-5}" y1="{py(v)}" x2="{m}" y2="{py(v)}" stroke="black"/>')
            parts.append(f'<text x="{m-8}" y="{py(v)+4}" text-anchor="end">{v:g}</text>')
    parts.append(f'<rect x="{m}" y="{m}" width="{w-2*m}" height="{h-2*m}" fill="none" stroke="black"/>')
    parts.append(f'<text x="{w/2}" y="{h-25}" text-anchor="middle">predicted (ms)</text>')
    parts.append(f'<text x="20" y="{h/2}" text-anchor="middle" transform="rotate(-90 20 {h/2})">measured (ms)</text>')
    for r in rows:
        c = COLORS.get(r["algo"], "black")
        parts.append(f'<circle cx="{px(r["predicted_us"]/1e3):.1f}" cy="{py(r["measured_us"]/1e3):.1f}" r="4" '
                     f'fill="{c}" fill-opacity="0.75"><title>{r["config"]} {r["algo"]} {r["bytes"]} B</title></circle>')
    algos = sorted({r["algo"] for r in rows})
    for i, algo in enumerate(algos):
        y = m + 14 + i * 16
        parts.append(f'<circle cx="{m+14}" cy="{y-4}" r="4" fill="{COLORS.get(algo, "black")}"/>')
        parts.append(f'<text x="{m+24}" y="{y}">{algo}</text>')
    parts.append(f'<text x="{w-m-6}" y="{h-m-8}" text-anchor="end" fill="#666">grey band: within 15 %</text>')
    parts.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(parts) + "\n")


def markdown(cal, ratios, command, started):
    rows = cal.rows
    lines = ["# Emulated fabric: the cost model against measurement", "",
             f"- date: {started}, commit {run(['git', '-C', ROOT, 'rev-parse', '--short', 'HEAD']).strip()}",
             f"- machine: {os.cpu_count()} cores ({platform.processor() or platform.machine()}), kernel {platform.release()}",
             f"- command: `{command}`",
             f"- fabric: fastest cable {ARGS.rate_mbit} Mbit/s (the others keep the topology's ratios), MTU 9000,"
             " 16 MiB tbf queues; ranks placed on the first N endpoints; allreduce float32 sum, every result checked",
             f"- measured: median over {ARGS.rounds} rounds (each the median of {ARGS.iters} iterations of the slowest rank),"
             " algorithms interleaved within a round; cpu = share of the machine busy while the case ran"
             " (niced: other, low-priority work)", ""]
    within = [r for r in rows if abs(r["measured_us"] / r["predicted_us"] - 1) <= 0.15]
    lines += [f"**{len(within)} of {len(rows)} cases within 15 % of the prediction; "
              f"{sum(1 for x in ratios if abs(x['error']) <= 0.15)} of {len(ratios)} contention ratios within 15 %.**", ""]
    at_run = any("predicted_at_run_us" in r for r in rows)
    lines += ["| configuration | algo | bytes | load | predicted ms | measured ms (min-max) | error | cpu |"
              + (" predicted at run time ms |" if at_run else ""),
              "|---|---|---|---|---|---|---|---|" + ("---|" if at_run else "")]
    for r in rows:
        err = r["measured_us"] / r["predicted_us"] - 1
        lines.append(f"| {r['config']} | {r['algo']} | {r['bytes']} | {r['max_link_load']:g} | "
                     f"{r['predicted_us']/1e3:.1f} | {r['measured_us']/1e3:.1f} ({r['measured_min_us']/1e3:.1f}-"
                     f"{r['measured_max_us']/1e3:.1f}) | {err*100:+.1f} % | {r['cpu_busy']*100:.0f} %"
                     f"{' +' + format(r['cpu_niced']*100, '.0f') + ' % niced' if r['cpu_niced'] > 0.02 else ''} |"
                     + (f" {r.get('predicted_at_run_us', r['predicted_us'])/1e3:.1f} |" if at_run else ""))
    lines += ["", "## Software overheads fitted per configuration (1 KiB runs)", "",
              "| configuration | alpha us per step | alpha us per message |", "|---|---|---|"]
    for config, a in cal.alphas.items():
        lines.append(f"| {config} | {a['alpha_us']:.0f} | {a['alpha_message_us']:.0f} |")
    lines += ["", "## Contention ratios", "",
              "Measured: the median over rounds of each round's ratio (the two algorithms ran in the same "
              "round), or, for rows of records that kept no per-round times, the ratio of the two medians "
              f"({sum(1 for x in ratios if x.get('measured_from') == 'ratio of medians')} of {len(ratios)} "
              "rows here).", "",
              "| configuration | bytes | ratio | predicted | measured | error |",
              "|---|---|---|---|---|---|"]
    for x in ratios:
        lines.append(f"| {x['config']} | {x['bytes']} | {x['ratio']} | {x['predicted']:.2f} | {x['measured']:.2f} | {x['error']*100:+.1f} % |")
    lines += ["", "![measured vs predicted](fabric-calibration.svg)", ""]
    return "\n".join(lines) + "\n"


def scaled_topology(src, rate_mbit, directory):
    """The topology file with its rates scaled as `fabric up --rate-mbit` scales them: the
    fastest network cable at rate_mbit, every other rate in proportion."""
    with open(src) as f:
        d = json.load(f)
    shape = d.get("shape", d)
    if d["kind"] == "bigraph":
        scale = rate_mbit / (d["link_gbps"] * 1000.0)
        d["link_gbps"] *= scale
    else:
        scale = rate_mbit / (max(shape["intra_gbps"], shape["inter_gbps"]) * 1000.0)
        shape["intra_gbps"] *= scale
        shape["inter_gbps"] *= scale
        if "host_fabric_gbps" in shape:
            shape["host_fabric_gbps"] *= scale
    if isinstance(d.get("host_fabric"), dict):
        d["host_fabric"]["gbps"] *= scale
    path = os.path.join(directory, "scaled-" + os.path.basename(src))
    with open(path, "w") as f:
        json.dump(d, f)
    return path


def repredict(runs, directory):
    rows, alphas, rate = {}, {}, None
    for path in runs:
        with open(path) as f:
            run_doc = json.load(f)
        rate = run_doc["rate_mbit"]
        configs = {r["config"] for r in run_doc["rows"]}
        for key in [k for k in rows if k[0] in configs]:
            del rows[key]
        for r in run_doc["rows"]:
            rows[(r["config"], r["algo"], r["bytes"])] = r
        alphas.update(run_doc["alpha_us"])
    sources = {"bigraph-32.json": os.path.join(ROOT, "examples", "bigraph-32.json")}
    for k in (1, 2, 4):
        sources[f"nap-4x8-k{k}.json"] = nap_variant(k, directory)
    scaled = {name: scaled_topology(src, rate, directory) for name, src in sources.items()}
    cli = os.path.join(ROOT, ARGS.build, "tools", "topocoll")
    out = []
    for r in rows.values():
        p = json.loads(run([cli, "plan", "--topo", scaled[r["topology"]], "--coll", "allreduce",
                            "--algo", r["algo"], "--bytes", str(r["bytes"]), "--ranks", str(r["ranks"]),
                            "--alpha-us", f"{r['alpha_us']:.1f}", "--alpha-msg-us",
                            f"{r['alpha_message_us']:.1f}", "--gamma-gbs", str(ARGS.reduce_gbs),
                            "--no-verify", "--json"]))
        r = dict(r)
        r.setdefault("predicted_at_run_us", r["predicted_us"])
        r["predicted_us"] = p["predicted_us"]
        out.append(r)
    order = {c: i for i, c in enumerate(["bigraph-32@8", "bigraph-32@16", "bigraph-32@32", "nap-4x8-k1@32",
                                         "nap-4x8-k2@32", "nap-4x8-k4@32"])}
    out.sort(key=lambda r: (order.get(r["config"], 99), r["bytes"], r["algo"]))
    return out, alphas, rate


def main():
    global ARGS
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default="build")
    p.add_argument("--rate-mbit", type=float, default=20)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--iters", type=int, default=3)
    p.add_argument("--sizes", default="64K,256K,1M")
    p.add_argument("--reduce-gbs", type=float, default=2.0, help="CPU reduce rate for the model")
    p.add_argument("--only", default="", help="comma list of config names to run")
    p.add_argument("--out", default=os.path.join(ROOT, "perf", "results", "fabric-calibration"))
    p.add_argument("--repredict", nargs="+", default=[], help="earlier runs' JSON records")
    ARGS = p.parse_args()
    ARGS.sizes = ARGS.sizes.split(",")
    if ARGS.repredict:
        started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        rows, alphas, rate = repredict(ARGS.repredict, tempfile.mkdtemp(prefix="calibrate-"))
        ARGS.rate_mbit = rate
        cal = Calibration(ARGS)
        cal.rows, cal.alphas = rows, alphas
        ratios = ratio_rows(rows)
        command = " ".join([os.path.relpath(sys.argv[0], ROOT)] + sys.argv[1:])
        with open(ARGS.out + ".json", "w") as f:
            json.dump({"date": started, "command": command, "rate_mbit": rate, "rows": rows,
                       "ratios": ratios, "alpha_us": alphas}, f, indent=1)
        svg_plot(rows, ARGS.out + ".svg")
        with open(ARGS.out + ".md", "w") as f:
            f.write(markdown(cal, ratios, command, started))
        print(f"wrote {ARGS.out}.{{md,json,svg}}")
        return
    if os.geteuid() != 0:
        sys.exit("calibrate.py: the fabric needs root")
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    cal = Calibration(ARGS)
    tmp = tempfile.mkdtemp(prefix="calibrate-")
    configs = [("bigraph-32@8", os.path.join(ROOT, "examples", "bigraph-32.json"), 8),
               ("bigraph-32@16", os.path.join(ROOT, "examples", "bigraph-32.json"), 16),
               ("bigraph-32@32", os.path.join(ROOT, "examples", "bigraph-32.json"), 32)]
    for k in (1, 2, 4):
        configs.append((f"nap-4x8-k{k}@32", nap_variant(k, tmp), 32))
    only = set(filter(None, ARGS.only.split(",")))
    for name, topo_file, nranks in configs:
        if not only or name in only:
            cal.configuration(name, topo_file, nranks)
    ratios = ratio_rows(cal.rows)
    command = " ".join([os.path.relpath(sys.argv[0], ROOT)] + sys.argv[1:])
    with open(ARGS.out + ".json", "w") as f:
        json.dump({"date": started, "command": command, "rate_mbit": ARGS.rate_mbit, "rows": cal.rows,
                   "ratios": ratios, "alpha_us": cal.alphas}, f, indent=1)
    svg_plot(cal.rows, ARGS.out + ".svg")
    with open(ARGS.out + ".md", "w") as f:
        f.write(markdown(cal, ratios, command, started))
    print(f"wrote {ARGS.out}.{{md,json,svg}}")


if __name__ == "__main__":
    main()
