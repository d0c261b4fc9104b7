#!/usr/bin/env python3
"""The record of nccl-tests runs on an emulated fabric (perf/gpu/fabric_nccl_tests.sh).

    fabric_nccl_record.py estimate --predict P.json --coll C --path PATH --nt-args "..."
    fabric_nccl_record.py table DIR
    fabric_nccl_record.py sample DIR       (sample logs from the predictions: exercises `table`)

`table` reads DIR/runs.tsv (one line per run: name, topology, ranks, rate Mbit/s, nccl-tests
binary, path, placement, exit code, seconds, log, call) and each run's log, and sets every measured
size beside the cost model's prediction for what ran there, as the log itself says: NCCL's
algorithm and protocol from rank 0's `NCCL INFO <Coll>: <bytes> Bytes -> Algo X proto Y`
lines (NCCL_DEBUG_SUBSYS=TUNING), topocoll's route from the interposer's `topocoll: comm ...
up to <bytes> B -> <route> (<why>)` lines, and whether the interposer served the
communicator. Predictions come from `topocoll fabric predict` (DIR/<case>/predict-*.json).
Writes DIR/table.md (tables, the record's goals as measured), DIR/record.json and one SVG
plot of bus bandwidth per size per path for each (topology, ranks, rate, collective). A goal
that sets two runs' times side by side is judged only when one call ran both (runs.tsv's call;
for records made before that column, the call calls.md implies): times of two calls, on fresh
machines, do not compare.
Runs with TOPOCOLL_STEP_TIMES=1 (the `+steps` variant) also log every schedule step's time on
rank 0 (`topocoll: comm ... step times of <coll> <bytes> B <algo> (...)`): the table sets the
steps beside each size and fits t_step = fixed + bytes / rate over all of a run's steps, so a
miss of the model is split into a per-step cost and a throughput.
`estimate` prints how many seconds one run should take (init + every nccl-tests pass at the
predicted time), so the runner can leave a run for the next call instead of cutting it off.
"""
import argparse
import json
import math
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nccl_tests_table import parse as parse_results  # noqa: E402

COLLS = {  # nccl-tests binary -> (predict's collective, NCCL's name, bus bandwidth factor)
    "all_reduce_perf": ("allreduce", "AllReduce", lambda n: 2.0 * (n - 1) / n),
    "reduce_scatter_perf": ("reduce_scatter", "ReduceScatter", lambda n: (n - 1) / n),
    "all_gather_perf": ("allgather", "AllGather", lambda n: (n - 1) / n),
}
NCCL_TUNING = re.compile(r"NCCL INFO (AllReduce|ReduceScatter|AllGather): (\d+) Bytes -> Algo (\w+) proto (\w+)")
ROUTE = re.compile(r"NCCL INFO topocoll: comm \S+ rank 0/(\d+) (allreduce|reducescatter|allgather) up to (\d+) B "
                   r"-> (\S+) \((.*)\)\s*$")
SERVED = re.compile(r"NCCL INFO topocoll: communicator \S+ rank 0/(\d+) served on topology")
STEP_TIMES = re.compile(r"NCCL INFO topocoll: comm \S+ rank 0/(\d+) step times of (allreduce|reducescatter|allgather) "
                        r"(\d+) B (\S+) \((\d+) steps, [\d.]+ us in all\), steps (\d+)-(\d+) \(us@bytes sent\):"
                        r"((?: [\d.]+@\d+)+)\s*$")
ROUTE_COLL = {"allreduce": "allreduce", "reducescatter": "reduce_scatter", "allgather": "allgather"}
NCCL_NAMES = {"TREE": "Tree", "RING": "Ring", "PAT": "PAT", "LL": "LL", "LL128": "LL128", "SIMPLE": "Simple"}
NCCL_PATHS = ("nccl", "nccl-order", "tuner")


def nt_options(nt_args):
    words = nt_args.split()
    opts = {"-b": "256K", "-e": "64M", "-f": "2", "-w": "1", "-n": "20"}
    for i, w in enumerate(words[:-1]):
        if w in opts:
            opts[w] = words[i + 1]
    return opts


def size_bytes(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    t = text.strip().upper().rstrip("B")
    return int(float(t[:-1]) * units[t[-1]]) if t and t[-1] in units else int(t)


def load_predictions(path):
    with open(path) as f:
        rows = json.load(f)
    return {(r["coll"], r["bytes"]): r for r in rows}


def nccl_key(algo, proto):
    return f"{NCCL_NAMES.get(algo.upper(), algo)}/{NCCL_NAMES.get(proto.upper(), proto)}"


def base_path(path):
    """The path without its variant: preload-hd+p2p2 runs preload-hd with one NCCL setting changed."""
    return path.split("+", 1)[0]


def algo_of_path(path):
    path = base_path(path)
    return path[len("preload-"):] if path.startswith("preload-") else None


def predicted_for(path, row, tuning=None, route=None):
    """(predicted us, what ran) for one size of one run; what the log says ran decides."""
    if row is None:
        return None, "no prediction"
    nccl, ordered, mine = row["nccl"], row["nccl_topology_order"], row["topocoll"]

    def nccl_choice(table, default):
        key = nccl_key(*tuning) if tuning else default
        return table.get(key), key if tuning else key + "?"

    if base_path(path) in NCCL_PATHS:
        return nccl_choice(nccl, "Ring/Simple")
    if route is None:  # no decision logged: what the path asks for
        algo = algo_of_path(path)
        if algo == "nccl-topo-ring":
            return nccl_choice(ordered, "Ring/Simple")
        planned = algo  # TOPOCOLL_ALGO names the planner's algorithms (sched/algorithm_registry.h)
        if planned == "auto" and "auto" in mine:
            return mine["auto"]["us"], mine["auto"]["algo"] + "?"
        return mine.get(planned), (planned or "?") + "?"
    routed = route[0]
    if routed == "nccl":
        us, what = nccl_choice(nccl, "Ring/Simple")
        return us, "nccl " + what
    if routed == "nccl-topo-ring":
        us, what = nccl_choice(ordered, "Ring/Simple")
        return us, "nccl-topo-ring " + what
    return mine.get(routed), routed


def estimate(a):
    rows = load_predictions(a.predict)
    opts = nt_options(a.nt_args)
    lo, hi, factor = size_bytes(opts["-b"]), size_bytes(opts["-e"]), int(opts["-f"])
    iters, warmup = int(opts["-n"]), int(opts["-w"])
    coll = COLLS[a.coll][0]

    def slowest(size):
        row = rows.get((coll, size))
        if row is None:
            return 0.0
        if base_path(a.path) in NCCL_PATHS:  # NCCL's own pick is unknown before the run: its slower one
            table = row["nccl"]
            return max(v for k, v in table.items() if k.endswith("/Simple"))
        us, _ = predicted_for(a.path, row)
        return us or 0.0

    seconds = 0.0
    size = lo
    while size <= hi:
        # Per size: the untimed first call, the timed iterations and the check, out of place
        # and in place (nccl-tests' BenchTime, twice).
        seconds += 2 * (iters + 2) * slowest(size) / 1e6
        size *= factor
    size = lo
    while size <= hi and warmup:  # warm-up walks the sizes by factors of 2
        seconds += warmup * slowest(size) / 1e6
        size *= 2
    print(int(math.ceil(seconds + a.startup)))


def parse_step_times(path):
    """{(collective, bytes): [(algo, [(us, bytes sent), ...] per step), ...]}: rank 0's timed collectives,
    each put together from its lines (16 steps a line, consecutive)."""
    timed, partial = {}, {}
    try:
        with open(path, errors="replace") as f:
            for line in f:
                m = STEP_TIMES.search(line)
                if not m:
                    continue
                coll, size, algo = ROUTE_COLL[m.group(2)], int(m.group(3)), m.group(4)
                steps, first, last = int(m.group(5)), int(m.group(6)), int(m.group(7))
                pairs = [(float(us), int(b)) for us, b in (p.split("@") for p in m.group(8).split())]
                key = (coll, size, algo)
                if first == 0:
                    partial[key] = []
                if key not in partial or len(partial[key]) != first or len(pairs) != last - first + 1:
                    partial.pop(key, None)  # a line lost or cut: the collective is not used
                    continue
                partial[key] += pairs
                if last == steps - 1:
                    timed.setdefault((coll, size), []).append((algo, partial.pop(key)))
    except OSError:
        pass
    return timed


def fit_steps(steps):
    """Least squares t = fixed + bytes / rate over (us, bytes) steps that send: (fixed us, rate in
    Mbit/s), None where the bytes never vary (nothing to tell the two terms apart)."""
    pts = [(b, us) for us, b in steps if b > 0]
    if len({b for b, _ in pts}) < 2:
        return None
    n = len(pts)
    mx, my = sum(b for b, _ in pts) / n, sum(us for _, us in pts) / n
    sxx = sum((b - mx) ** 2 for b, _ in pts)
    slope = sum((b - mx) * (us - my) for b, us in pts) / sxx  # us per byte
    if slope <= 0:
        return None
    return my - slope * mx, 8.0 / slope  # bytes/us * 8 = Mbit/s


def parse_log(path):
    tuning, routes, served = {}, {}, False
    try:
        with open(path, errors="replace") as f:
            for line in f:
                m = NCCL_TUNING.search(line)
                if m:
                    counts = tuning.setdefault((m.group(1), int(m.group(2))), {})
                    key = (m.group(3), m.group(4))
                    counts[key] = counts.get(key, 0) + 1
                    continue
                m = ROUTE.search(line)
                if m:
                    routes[(ROUTE_COLL[m.group(2)], int(m.group(3)))] = (m.group(4), m.group(5))
                    continue
                if SERVED.search(line):
                    served = True
    except OSError:
        pass
    chosen = {k: max(v.items(), key=lambda kv: kv[1])[0] for k, v in tuning.items()}
    return chosen, routes, served


def read_runs(directory):
    runs = []
    with open(os.path.join(directory, "runs.tsv")) as f:
        for line in f:
            if not line.strip() or line.startswith("#"):
                continue
            fields = line.rstrip("\n").split("\t")
            # The 11th column, the call that ran the run, is absent from records made before it.
            name, topo, ranks, rate, binary, path, placement, rc, seconds, log = fields[:10]
            call = fields[10] if len(fields) > 10 and fields[10] else None
            runs.append({"name": name, "topology": topo, "ranks": int(ranks), "rate": float(rate),
                         "binary": binary, "path": path, "placement": placement, "rc": rc,
                         "seconds": float(seconds or 0), "log": log, "call": call})
    old = [r for r in runs if r["call"] is None]
    left = calls_left(directory)
    if old and len(left) <= 1:
        # Without the column, one call (calls.md lists at most one) ran every run.
        for r in old:
            r["call"] = "the only call"
    elif old:
        # Calls before the column: a run ran in the call after the last that left it for the
        # next (calls.md); rows are appended as runs end, so the calls must not go back in
        # runs.tsv's order, or the guess is dropped.
        guess = [1 + sum(r["name"] in names for names in left) for r in old]
        if all(a <= b for a, b in zip(guess, guess[1:])) and max(guess) <= len(left):
            for r, k in zip(old, guess):
                r["call"] = f"calls.md's call {k}, inferred"
    return runs


def calls_left(directory):
    """Per call calls.md lists (none without one: a dry run, a sample), the runs it left for the next."""
    calls = []
    try:
        with open(os.path.join(directory, "calls.md")) as f:
            for line in f:
                if line.startswith("## Call at"):
                    calls.append(set())
                elif line.startswith("Left for the next call") and calls:
                    calls[-1].update(re.findall(r"(\S+) \(~\d+ s\)", line))
    except OSError:
        pass
    return calls


def same_call(*runs):
    """None when the runs ran in one call (their times compare), else why they do not."""
    calls = [r.get("call") for r in runs]
    if any(c is None for c in calls):
        return "runs.tsv does not say which call ran each run, and calls.md lists several: not compared"
    if len(set(calls)) > 1:
        return f"ran in different calls: {' and '.join(sorted(set(calls)))}; their times do not compare"
    return None


def case_dir(directory, run):
    return os.path.join(directory, f"{run['topology']}-r{run['rate']:g}")


def analyse(directory, run):
    coll, nccl_name, bus_factor = COLLS[run["binary"]]
    log = os.path.join(directory, run["log"])
    results = parse_results(log) if os.path.exists(log) else {}
    tuning, routes, served = parse_log(log)
    predict_file = os.path.join(case_dir(directory, run), f"predict-{run['placement']}-n{run['ranks']}.json")
    predictions = load_predictions(predict_file) if os.path.exists(predict_file) else {}
    timed = parse_step_times(log)
    n = run["ranks"]
    sizes = []
    all_steps, model_steps = [], []
    for size in sorted(results):
        r = results[size]
        per_rank = size if coll == "allreduce" else size // n
        us, what = predicted_for(run["path"], predictions.get((coll, size)), tuning.get((nccl_name, per_rank)),
                                 routes.get((coll, size)))
        # Bus bandwidth from the time, as nccl-tests computes it: its printout keeps two
        # decimals, a quarter of the value at these rates (0.01 printed for 0.0138 GB/s).
        busbw = size / r["time_us"] / 1e3 * bus_factor(n) if r["time_us"] else r["busbw"]
        entry = {"size": size, "time_us": r["time_us"], "busbw": busbw,
                 "wrong": max(r["wrong"] or 0, r["inplace_wrong"] or 0), "predicted_us": us, "ran": what,
                 "ratio": r["time_us"] / us if us and r["time_us"] else None}
        if (coll, size) in timed:
            collectives = timed[(coll, size)]
            steps = [s for _, one in collectives for s in one]
            all_steps += steps
            times = sorted(us for us, _ in steps)
            algo, first = collectives[0]
            entry["steps"] = {"algo": algo, "collectives": len(collectives), "per_collective": len(first),
                              "sum_us": sum(times) / len(collectives), "median_us": times[len(times) // 2],
                              "min_us": times[0], "max_us": times[-1],
                              "bytes_median": sorted(b for _, b in steps)[len(steps) // 2],
                              "sending": sum(1 for _, b in first if b > 0)}
            # The model's steps of the same schedule (`fabric predict`'s topocoll_steps), step k
            # beside step k measured (the mean of the collectives that ran it).
            model = (predictions.get((coll, size)) or {}).get("topocoll_steps", {}).get(algo)
            same = [one for a, one in collectives if a == algo and model and len(one) == len(model)]
            if same:
                mean = [sum(one[k][0] for one in same) / len(same) for k in range(len(model))]
                ratios = [m / p if p > 0 else None for m, p in zip(mean, model)]
            if same and any(r is not None for r in ratios):
                worst = max((r, k) for k, r in enumerate(ratios) if r is not None)
                model_steps += [(p, b) for p, (_, b) in zip(model, first)]
                entry["steps"].update({"model_median_us": sorted(model)[len(model) // 2],
                                       "worst_ratio": worst[0], "worst_step": worst[1],
                                       "best_ratio": min(r for r in ratios if r is not None)})
        sizes.append(entry)
    fit, model_fit = fit_steps(all_steps), fit_steps(model_steps)
    step_fit = {"fixed_us": fit[0], "rate_mbit": fit[1], "steps": len(all_steps)} if fit else None
    if step_fit and model_fit:
        step_fit.update({"model_fixed_us": model_fit[0], "model_rate_mbit": model_fit[1]})
        # The model with its fixed part of a step replaced by the measured fit's (every step
        # that sends pays the difference): how much of a miss the per-step cost explains.
        for entry in sizes:
            if "steps" in entry and entry["predicted_us"]:
                entry["predicted_with_fit_us"] = entry["predicted_us"] + entry["steps"]["sending"] * (
                    step_fit["fixed_us"] - step_fit["model_fixed_us"])
    return {**run, "collective": coll, "served": served, "sizes": sizes, "step_fit": step_fit}


def case_order(key):
    """Cases as the runner makes them: per topology and rank count, the first rate first."""
    topo, n, rate, coll = key
    colls = [c[0] for c in COLLS.values()]
    return (topo, n, -rate, colls.index(coll) if coll in colls else len(colls))


def fmt(x, digits=1):
    return "-" if x is None else f"{x:.{digits}f}"


def svg_plot(title, series, path):
    """Bus bandwidth per size, one line per path (measured solid, predicted dashed)."""
    w, h, left, right, top, bottom = 760, 420, 70, 190, 40, 50
    points = [(s["size"], s["busbw"]) for _, rows in series for s in rows if s["busbw"]]
    points += [(s["size"], s["pred_busbw"]) for _, rows in series for s in rows if s.get("pred_busbw")]
    if not points:
        return False
    xs = [math.log2(p[0]) for p in points]
    x0, x1 = min(xs), max(xs) if max(xs) > min(xs) else min(xs) + 1
    y1 = max(p[1] for p in points) * 1.1 or 1

    def px(size):
        return left + (math.log2(size) - x0) / (x1 - x0) * (w - left - right)

    def py(v):
        return h - bottom - v / y1 * (h - top - bottom)

    colours = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"]
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
           f'<rect width="{w}" height="{h}" fill="white"/>',
           f'<text x="{w / 2}" y="20" text-anchor="middle" font-size="14">{title}</text>',
           f'<line x1="{left}" y1="{h - bottom}" x2="{w - right}" y2="{h - bottom}" stroke="black"/>',
           f'<line x1="{left}" y1="{top}" x2="{left}" y2="{h - bottom}" stroke="black"/>',
           f'<text x="{(left + w - right) / 2}" y="{h - 12}" text-anchor="middle">size (bytes, nccl-tests)</text>',
           f'<text x="16" y="{h / 2}" transform="rotate(-90 16 {h / 2})" text-anchor="middle">bus bandwidth (GB/s)</text>']
    for k in range(5):
        v = y1 * k / 4
        out.append(f'<text x="{left - 6}" y="{py(v) + 4:.1f}" text-anchor="end">{v:.3g}</text>')
        out.append(f'<line x1="{left}" y1="{py(v):.1f}" x2="{w - right}" y2="{py(v):.1f}" stroke="#ddd"/>')
    for size in sorted({p[0] for p in points}):
        label = f"{size >> 20}M" if size >= 1 << 20 else f"{size >> 10}K"
        out.append(f'<text x="{px(size):.1f}" y="{h - bottom + 16}" text-anchor="middle">{label}</text>')
    for i, (name, rows) in enumerate(series):
        c = colours[i % len(colours)]
        for key, dash in (("busbw", ""), ("pred_busbw", ' stroke-dasharray="5,4"')):
            pts = [(px(s["size"]), py(s[key])) for s in rows if s.get(key)]
            if len(pts) > 1:
                d = " ".join(f"{x:.1f},{y:.1f}" for x, y in pts)
                out.append(f'<polyline fill="none" stroke="{c}" stroke-width="2"{dash} points="{d}"/>')
            for x, y in pts if not dash else []:
                out.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{c}"/>')
        ly = top + 16 * i
        out.append(f'<line x1="{w - right + 10}" y1="{ly}" x2="{w - right + 30}" y2="{ly}" stroke="{c}" stroke-width="2"/>')
        out.append(f'<text x="{w - right + 35}" y="{ly + 4}">{name}</text>')
    ly = top + 16 * len(series) + 8
    out.append(f'<text x="{w - right + 10}" y="{ly}" fill="#555">solid: measured</text>')
    out.append(f'<text x="{w - right + 10}" y="{ly + 14}" fill="#555">dashed: predicted</text>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")
    return True


def goals(analysed):
    """The goals of the nccl-tests-on-the-fabric run as measured in this record: (text, met or None when not judged:
    nothing measured, or times of two calls set side by side)."""
    lines = []
    by = {}
    for r in analysed:
        by.setdefault((r["topology"], r["ranks"], r["rate"], r["collective"]), {})[r["path"]] = r
    wrong = max((s["wrong"] for r in analysed for s in r["sizes"]), default=None)
    lines.append((f"#wrong 0 in every run: largest #wrong {fmt(wrong, 0)}", wrong == 0 if wrong is not None else None))
    for (topo, n, rate, coll), paths in sorted(by.items(), key=lambda kv: case_order(kv[0])):
        case = f"{topo}, {n} ranks, {rate:g} Mbit/s, {coll}"

        def times(path, min_size=0):
            r = paths.get(path)
            return {s["size"]: s["time_us"] for s in r["sizes"] if s["time_us"] and s["size"] >= min_size} if r else {}

        def judged(text, met, *compared):
            """A goal that sets two runs' times side by side: judged only when one call ran both."""
            why = same_call(*(paths[p] for p in compared))
            lines.append((f"{text} ({why})", None) if why else (text, met))

        base = times("nccl")
        if "preload-auto" in paths and base and coll == "allreduce" and topo.startswith("bigraph") and n == 16:
            auto = times("preload-auto", 1 << 20)
            ratios = [base[s] / auto[s] for s in auto if s in base]
            if ratios:
                judged(f"{case}: topocoll auto vs NCCL's default from 1 MiB: {min(ratios):.2f}x to "
                       f"{max(ratios):.2f}x the bus bandwidth (goal >= 3x)", min(ratios) >= 3, "nccl", "preload-auto")
        if "preload-auto" in paths and base:
            auto = times("preload-auto")
            worst = min((base[s] / auto[s] for s in auto if s in base), default=None)
            if worst is not None:
                judged(f"{case}: auto's slowest size against NCCL's default: {worst:.2f}x NCCL's speed "
                       "(goal: never below 0.95x)", worst >= 0.95, "nccl", "preload-auto")
        order, ring = times("nccl-order"), times("preload-ring-topo")
        common = [s for s in order if s in ring]
        if common:
            worst = max(order[s] / ring[s] for s in common)
            judged(f"{case}: NCCL with the `topocoll order` hostfile against topocoll's ring-topo: at most "
                   f"{worst:.2f}x its time (goal <= 1.3x)", worst <= 1.3, "nccl-order", "preload-ring-topo")
        if n == 16:
            for path, r in sorted(paths.items()):
                if not path.startswith("preload-"):
                    continue
                off = [abs(s["ratio"] - 1) for s in r["sizes"] if s["ratio"] and not str(s["ran"]).startswith("nccl")]
                if off:
                    lines.append((f"{case}, {path}: measured / predicted off by at most {max(off) * 100:.0f} % over "
                                  f"{len(off)} sizes run by a topocoll schedule (goal <= 20 %)", max(off) <= 0.2))
    # Time scales with 1/rate: the same runs at two rates.
    for (topo, n, rate, coll), paths in sorted(by.items()):
        for (topo2, n2, rate2, coll2), paths2 in sorted(by.items()):
            if (topo2, n2, coll2) != (topo, n, coll) or rate2 >= rate:
                continue
            for path in sorted(set(paths) & set(paths2)):
                a = {s["size"]: s["time_us"] for s in paths[path]["sizes"]}
                b = {s["size"]: s["time_us"] for s in paths2[path]["sizes"]}
                ratios = [b[s] / a[s] for s in sorted(a) if s in b and a[s] and b[s] and s >= 1 << 20]
                if ratios:
                    want = rate / rate2
                    ok = all(abs(x / want - 1) <= 0.15 for x in ratios)
                    text = (f"{topo}, {n} ranks, {coll}, {path}: time at {rate2:g} / at {rate:g} Mbit/s from 1 "
                            f"MiB: {min(ratios):.2f} to {max(ratios):.2f} (network-bound: {want:.2f} +- 15 %)")
                    why = same_call(paths[path], paths2[path])
                    lines.append((f"{text} ({why})", None) if why else (text, ok))
    return lines


def with_fixed_part(size):
    """Table cells: the model with the fit's fixed part per step (analyse) and the measured time
    against it."""
    adjusted = size.get("predicted_with_fit_us")
    return f" {adjusted:.1f} | {size['time_us'] / adjusted:.2f} |" if adjusted and adjusted > 0 else " - | - |"


def cable_checks(directory):
    """[(topology-rN, cable_check.py's JSON)] of every fabric the record brought up."""
    out = []
    for name in sorted(os.listdir(directory)):
        if name.startswith("cable-check-") and name.endswith(".json"):
            with open(os.path.join(directory, name)) as f:
                out.append((name[len("cable-check-"):-len(".json")], json.load(f)))
    return out


def setup_warnings(directory, runs):
    """What makes the times below measure something else than the network: MPS off (the ranks
    time-slice the GPU, device.txt) or a fabric whose cable check did not complete."""
    warnings = []
    device = os.path.join(directory, "device.txt")
    if os.path.exists(device):
        with open(device) as f:
            for line in f:
                if line.startswith("MPS: off"):
                    warnings.append(f"{line.strip()} (device.txt): the ranks time-sliced the GPU, so these times do "
                                    "not measure the network")
    checked = {name for name, _ in cable_checks(directory)}
    for fabric in sorted({f"{r['topology']}-r{r['rate']:g}" for r in runs}):
        if os.path.exists(os.path.join(directory, f"fabric-up-{fabric}.log")) and fabric not in checked:
            warnings.append(f"The cable check of {fabric} did not complete (fabric-up-{fabric}.log): whether its "
                            "cables carry their rate on this machine is unknown")
    return warnings


def table(a):
    directory = a.dir
    runs = read_runs(directory)
    analysed = [analyse(directory, r) for r in runs]
    md = ["# nccl-tests on an emulated fabric: plain NCCL against NCCL with topocoll", "",
          "Every run's full output is its own log (rank 0 at NCCL_DEBUG=INFO, NCCL_DEBUG_SUBSYS=INIT,TUNING); "
          "commands in commands.txt, machine in device.txt. `ran` is what the log says served each size "
          "(NCCL's algorithm/protocol, or topocoll's route; `?` = not logged, the path's request assumed); "
          "`pred` is the cost model's time for that (`topocoll fabric predict`), `meas/pred` the ratio.", ""]
    md += [f"**{w}**" for w in setup_warnings(directory, runs)]
    if md[-1].startswith("**"):
        md.append("")
    cases = {}
    for r in analysed:
        cases.setdefault((r["topology"], r["ranks"], r["rate"], r["collective"]), []).append(r)
    plots = []
    for (topo, n, rate, coll), rs in sorted(cases.items(), key=lambda kv: case_order(kv[0])):
        md += [f"## {topo}, {n} ranks, {rate:g} Mbit/s, {coll}", ""]
        md.append("| path | placement | served | size (B) | time (us) | busbw (GB/s) | #wrong | ran | pred (us) | meas/pred |")
        md.append("|---|---|---|---|---|---|---|---|---|---|")
        series = []
        factor = COLLS[rs[0]["binary"]][2](n)
        for r in rs:
            if not r["sizes"]:
                md.append(f"| {r['path']} | {r['placement']} | | no result (exit {r['rc']}) | | | | | | |")
            for s in r["sizes"]:
                s["pred_busbw"] = s["size"] / s["predicted_us"] / 1e3 * factor if s["predicted_us"] else None
                md.append(f"| {r['path']} | {r['placement']} | {'yes' if r['served'] else 'no'} | {s['size']} | "
                          f"{fmt(s['time_us'])} | {fmt(s['busbw'], 3)} | {fmt(s['wrong'], 0)} | {s['ran']} | "
                          f"{fmt(s['predicted_us'])} | {fmt(s['ratio'], 2)} |")
            series.append((r["path"], r["sizes"]))
        plot = f"busbw-{topo}-n{n}-r{rate:g}-{coll}.svg"
        if svg_plot(f"{coll}, {topo}, {n} ranks, {rate:g} Mbit/s", series, os.path.join(directory, plot)):
            md += ["", f"![bus bandwidth per size]({plot})"]
            plots.append(plot)
        md.append("")
    timed_runs = [r for r in analysed if any("steps" in s for s in r["sizes"])]
    if timed_runs:
        md += ["## Step times (TOPOCOLL_STEP_TIMES, rank 0)", "",
               "Each timed size: how many collectives rank 0 logged, their steps, the steps' time summed "
               "(mean over the collectives) beside nccl-tests' time, and the spread of one step. The fit over "
               "all of a run's steps that send splits a step's time into a fixed part and bytes at a rate, "
               "to set beside the same fit of the model's own steps (`fabric predict`'s topocoll_steps); "
               "`step meas/model` sets each step beside the model's step of the same index; `model with the "
               "fit's fixed part` is the model's time with the fixed part of every step that sends replaced by "
               "the measured fit's, so `meas/that` shows how much of a miss the cost per step explains.", "",
               "| run | size (B) | algo | timed | steps | sum of steps (us) | nccl-tests (us) | step median (us) "
               "| min | max | bytes sent a step (median) | model step median (us) | step meas/model: least, most (step) "
               "| model with the fit's fixed part (us) | meas/that |",
               "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in timed_runs:
            for s in r["sizes"]:
                st = s.get("steps")
                if st:
                    md.append(f"| {r['name']} | {s['size']} | {st['algo']} | {st['collectives']} | "
                              f"{st['per_collective']} | {fmt(st['sum_us'])} | {fmt(s['time_us'])} | "
                              f"{fmt(st['median_us'])} | {fmt(st['min_us'])} | {fmt(st['max_us'])} | "
                              f"{st['bytes_median']} | {fmt(st.get('model_median_us'))} | " +
                              (f"{st['best_ratio']:.2f}, {st['worst_ratio']:.2f} ({st['worst_step']}) |"
                               if "worst_ratio" in st else "- |") + with_fixed_part(s))
        md.append("")
        for r in timed_runs:
            f = r["step_fit"]
            model = (f"; the model's steps: {f['model_fixed_us']:.0f} us fixed, then {f['model_rate_mbit']:.0f} Mbit/s"
                     if f and "model_fixed_us" in f else "")
            md.append(f"- {r['name']}: " + (f"a step costs {f['fixed_us']:.0f} us fixed, then its bytes at "
                                            f"{f['rate_mbit']:.0f} Mbit/s (fit over {f['steps']} steps; cable rate "
                                            f"{r['rate']:g} Mbit/s){model}" if f
                                            else "no fit (every step sends the same bytes)"))
        md.append("")
    checks = cable_checks(directory)
    if checks:
        md += ["## The cables", "",
               "Whether the fabric's cables carry their rate on this machine (perf/fabric/cable_check.py after "
               "each `fabric up`: one TCP flow for its seconds; TCP's ceiling is payload per frame).", "",
               "| fabric | from | to | cables | slowest cable (Mbit/s) | TCP (Mbit/s) | of the rate | of TCP's ceiling "
               "| peak slack (us) |",
               "|---|---|---|---|---|---|---|---|---|"]
        for name, c in checks:
            md.append(f"| {name} | {c['from']} | {c['to']} | {c['cables']} | {c['cable_mbit']:g} | "
                      f"{c['goodput_mbit']:.1f} | {c['of_rate']:.3f} | {c['of_tcp_ceiling']:.3f} | "
                      f"{c.get('peak_slack_us')} |")
        md.append("")
    md += ["## Goals, as measured", ""]
    for text, met in goals(analysed):
        md.append(f"- {'met' if met else 'not met' if met is not None else 'not judged'}: {text}")
    with open(os.path.join(directory, "table.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    with open(os.path.join(directory, "record.json"), "w") as f:
        json.dump({"runs": analysed, "plots": plots, "cable_checks": dict(checks)}, f, indent=1)
    print(f"wrote {directory}/table.md, record.json and {len(plots)} plots")
    return 0


# What the sample's timed steps cost: a fixed part and their bytes at this share of the cable
# rate (the table's fit must find both again).
SAMPLE_STEP_FIXED_US = 150.0
SAMPLE_STEP_RATE_SHARE = 0.8


def sample_step_lines(coll, size, algo, n, rate_mbit):
    """The lines rank 0 logs for one timed collective: ring-shaped steps (2(n-1) for allreduce,
    n-1 otherwise) of size/n bytes each, 16 a line, as plugin/interposer/step_times_log.cpp."""
    steps = 2 * (n - 1) if coll == "allreduce" else n - 1
    sent = size // n
    us = SAMPLE_STEP_FIXED_US + sent / (SAMPLE_STEP_RATE_SHARE * rate_mbit / 8.0)
    lines = []
    for first in range(0, steps, 16):
        last = min(steps, first + 16) - 1
        body = "".join(f" {us:.1f}@{sent}" for _ in range(first, last + 1))
        lines.append(f"s0:1:1 NCCL INFO topocoll: comm 0x1 rank 0/{n} step times of {coll.replace('_', '')} {size} B "
                     f"{algo} ({steps} steps, {us * steps:.1f} us in all), steps {first}-{last} (us@bytes sent):{body}\n")
    return "".join(lines)


def sample(a):
    """nccl-tests-shaped logs made from the predictions (time = predicted x a fixed factor per
    path), with the NCCL and interposer lines a real rank 0 prints: the input `table` expects."""
    directory = a.dir
    runs = read_runs(directory)
    for run in runs:
        coll, nccl_name, factor = COLLS[run["binary"]]
        predict_file = os.path.join(case_dir(directory, run), f"predict-{run['placement']}-n{run['ranks']}.json")
        rows = load_predictions(predict_file)
        n = run["ranks"]
        slow = 1.0 + 0.03 * (sum(map(ord, run["path"])) % 7)
        lines = [f"# nccl-tests version 2.19.6 nccl-headers=22809 nccl-library=22809 (sample made from predictions)",
                 f"# Collective test starting: {run['binary']}"]
        algo = algo_of_path(run["path"])
        if algo:
            lines.append(f"s0:1:1 NCCL INFO topocoll: communicator 0x1 rank 0/{n} served on topology 'x' (endpoint 0)")
        for (c, size), row in sorted(rows.items()):
            if c != coll:
                continue
            per_rank = size if coll == "allreduce" else size // n
            tuning = ("RING", "SIMPLE")
            route = None
            if algo == "auto":
                auto = row["topocoll"].get("auto")
                route = (auto["algo"], f"auto: {auto['algo']} {auto['us']:.1f} us") if auto else None
            elif algo == "nccl-topo-ring":
                route = ("nccl-topo-ring", "TOPOCOLL_ALGO=nccl-topo-ring")
            elif algo:
                route = (algo, f"TOPOCOLL_ALGO={algo}")
            served = (f"s0:1:1 NCCL INFO topocoll: comm 0x1 rank 0/{n} {coll.replace('_', '')} up to {size} B "
                      f"-> {route[0]} ({route[1]})\n") if route else ""
            tuned = (f"s0:1:1 [0] NCCL INFO {nccl_name}: {per_rank} Bytes -> Algo {tuning[0]} proto {tuning[1]} "
                     "channel{Lo..Hi}={0..1}\n")
            if run["path"].endswith("+steps") and route and route[0] not in ("nccl", "nccl-topo-ring"):
                tuned = sample_step_lines(coll, size, route[0], n, run["rate"]) + tuned
            us, _ = predicted_for(run["path"], row, tuning, route)
            t = (us or 1.0) * slow
            alg = size / t / 1e3
            bus = alg * factor(n)
            count = size // 4 if coll == "allreduce" else size // 4 // n
            # As nccl-tests 2.19 prints a row and NCCL 2.28 logs each timed collective on rank 0
            # to the same stdout: the size columns, the out-of-place figures and the in-place
            # ones with the newline come apart, and the log lines land between them.
            lines.append(f"{size:>12}  {count:>12}  {'float':>8}  {'sum':>6}  {'-1':>6}" + served + tuned +
                         f"  {t:10.1f}  {alg:7.3f}  {bus:7.3f}  {0:6}" + tuned +
                         f"  {t:10.1f}  {alg:7.3f}  {bus:7.3f}  {0:6}")
        lines.append("# Avg bus bandwidth    : 0.0")
        with open(os.path.join(directory, run["log"]), "w") as f:
            f.write("\n".join(lines) + "\n")
    print(f"wrote {len(runs)} sample logs under {directory}")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    e = sub.add_parser("estimate")
    e.add_argument("--predict", required=True)
    e.add_argument("--coll", required=True, choices=sorted(COLLS))
    e.add_argument("--path", required=True)
    e.add_argument("--nt-args", required=True)
    e.add_argument("--startup", type=float, default=10.0, help="seconds to launch and make the communicators")
    t = sub.add_parser("table")
    t.add_argument("dir")
    s = sub.add_parser("sample")
    s.add_argument("dir")
    a = ap.parse_args()
    return {"estimate": estimate, "table": table, "sample": sample}[a.command](a) or 0


if __name__ == "__main__":
    sys.exit(main())
