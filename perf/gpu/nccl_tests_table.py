#!/usr/bin/env python3
"""Side-by-side table of nccl-tests runs (all_reduce_perf & co.), one column group per run.

    nccl_tests_table.py [--json OUT.json] [--title TEXT] LABEL=LOG [LABEL=LOG ...]

Each LOG is one nccl-tests output. Per size: the out-of-place time (us) and bus bandwidth
(GB/s) of every run, each run's time as a ratio of the first run's (below 1 = faster than
the first), and the largest #wrong of any run. Prints a Markdown table; --json writes the
same numbers. A log with no result lines (a run that failed or was killed) is named on stderr
and in a line under the table, its columns "-", and the others are still compared. Exit
status 1 if no log has result lines or any result is wrong.

Rounds: when every LABEL ends in -r<N> (socket-r1 topocoll-r1 socket-r2 ...), the runs are
rounds of the arms before the suffix, interleaved. A first table then gives per arm and size
the median time over its rounds (out-of-place and in-place times pooled, min-max beside it)
and each arm's median as a ratio of the first arm's, with one line per arm saying at how many
sizes it was at or better than the first arm; the table of every round follows, without ratios
(one round against another arm's first round says nothing).
"""
import argparse
import json
import re
import statistics
import sys

# size count type redop root | time algbw busbw #wrong | time algbw busbw #wrong
ROW = re.compile(r"^\s+(\d+)\s+(\d+)\s+(\S+)\s+(\S+)\s+(-?\d+)\s+"
                 r"(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s*$")


def number(text):
    try:
        return float(text)
    except ValueError:  # "N/A" for wrong counts nccl-tests did not check
        return None


# NCCL's log line prefix, "host:pid:tid [dev] NCCL INFO " (topocoll's own lines have no [dev]).
LOG_AT_LINE_START = re.compile(r"^(\S+:\d+:\d+) (?:\[\d+\] )?NCCL (?:INFO|WARN|TRACE|ABORT) ", re.M)
LOG_ANYWHERE = r"(?:\[\d+\] )?NCCL (?:INFO|WARN|TRACE|ABORT) [^\n]*(?:\n|$)"


def without_log_lines(text):
    """nccl-tests prints a result row in three pieces (the size columns, then the out-of-place
    figures, then the in-place ones and the newline) with the timed collectives in between, and
    NCCL 2.28 logs every collective on rank 0 under NCCL_DEBUG_SUBSYS=TUNING to the same stdout:
    those lines land inside the row. Remove every log line wherever it starts, so each row is
    whole again. Prefixes are learnt from the lines that start a line (a host name may begin
    with a digit, which a glued "-1" root column would otherwise swallow); a host name beginning
    with a letter is recognised anywhere."""
    prefixes = sorted(set(LOG_AT_LINE_START.findall(text)), key=len, reverse=True)
    known = "|".join(re.escape(p) for p in prefixes)
    host = r"[A-Za-z][^\s:]*:\d+:\d+"
    pattern = re.compile(rf"(?:{known + '|' if known else ''}{host}) {LOG_ANYWHERE}")
    return pattern.sub("", text)


def parse(path):
    rows = {}
    with open(path, errors="replace") as f:
        text = without_log_lines(f.read())
        for line in text.splitlines():
            m = ROW.match(line)
            if not m:
                continue
            size = int(m.group(1))
            rows[size] = {
                "time_us": number(m.group(6)), "algbw": number(m.group(7)), "busbw": number(m.group(8)),
                "wrong": number(m.group(9)),
                "inplace_time_us": number(m.group(10)), "inplace_busbw": number(m.group(12)),
                "inplace_wrong": number(m.group(13)),
            }
    return rows


ROUND = re.compile(r"^(.+)-r(\d+)$")


def arms_of(runs):
    """{arm: [rows of each round]} in the order arms first appear, or None when the labels
    are not all rounds (LABEL-rN) or no arm has two rounds."""
    arms = {}
    for label, _, rows in runs:
        m = ROUND.match(label)
        if not m:
            return None
        arms.setdefault(m.group(1), []).append(rows)
    return arms if any(len(r) > 1 for r in arms.values()) else None


def arm_table(arms, sizes):
    """Markdown lines and JSON entries of the median-over-rounds table."""
    names = list(arms)
    first = names[0]
    stats = {}
    for name, rounds in arms.items():
        for s in sizes:
            times = [r[s][k] for r in rounds if s in r for k in ("time_us", "inplace_time_us")
                     if r[s][k] is not None]
            stats[name, s] = (statistics.median(times), min(times), max(times)) if times else None
    lines = ["| size (B) | " + " | ".join(f"{n} median us (min-max)" for n in names) +
             "".join(f" | {n} / {first}" for n in names[1:]) + " |",
             "|" + "---|" * (1 + 2 * len(names) - 1)]
    entries = {n: {"arm": n, "rounds": len(arms[n]), "sizes": []} for n in names}
    for s in sizes:
        cells = [str(s)]
        for n in names:
            st = stats[n, s]
            cells.append(f"{st[0]:.1f} ({st[1]:.1f}-{st[2]:.1f})" if st else "-")
        for n in names[1:]:
            a, b = stats[n, s], stats[first, s]
            ratio = a[0] / b[0] if a and b and b[0] else None
            cells.append(f"{ratio:.2f}" if ratio is not None else "-")
        lines.append("| " + " | ".join(cells) + " |")
        for n in names:
            st = stats[n, s]
            b = stats[first, s]
            entries[n]["sizes"].append({
                "size": s, "median_us": st[0] if st else None, "min_us": st[1] if st else None,
                "max_us": st[2] if st else None,
                "ratio": st[0] / b[0] if st and b and b[0] else None})
    lines.append("")
    for n in names[1:]:
        ratios = [(e["ratio"], e["size"]) for e in entries[n]["sizes"] if e["ratio"] is not None]
        if not ratios:
            continue
        at_or_better = sum(r <= 1 for r, _ in ratios)
        worst, at = max(ratios)
        lines.append(f"- {n}: at or better than {first} at {at_or_better} of {len(ratios)} sizes; "
                     f"slowest against it {worst:.2f}x at {at} B")
    return lines, [entries[n] for n in names]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("runs", nargs="+", help="LABEL=LOG")
    ap.add_argument("--json")
    ap.add_argument("--title", default="")
    a = ap.parse_args()
    runs = []
    for spec in a.runs:
        label, _, path = spec.partition("=")
        if not path:
            ap.error(f"{spec}: expected LABEL=LOG")
        why = "no nccl-tests result lines"
        try:
            rows = parse(path)
        except OSError as e:
            rows, why = {}, e.strerror
        if not rows:
            print(f"{path}: {why}; its columns are left empty", file=sys.stderr)
        runs.append((label, path, rows))
    missing = [(label, path) for label, path, rows in runs if not rows]
    if len(missing) == len(runs):
        print("no log has nccl-tests result lines", file=sys.stderr)
        return 1
    sizes = sorted(set().union(*(r[2].keys() for r in runs)))
    base = runs[0][2]
    arms = arms_of(runs)
    ratio_runs = [] if arms else runs[1:]
    if a.title:
        print(f"### {a.title}\n")
    arm_entries = None
    if arms:
        lines, arm_entries = arm_table(arms, sizes)
        print(f"Median over rounds (out-of-place and in-place times), each arm against {next(iter(arms))}:\n")
        print("\n".join(lines))
        print("\nEvery round:\n")
    head = "| size (B) | " + " | ".join(f"{l} time (us) | {l} busbw (GB/s)" for l, _, _ in runs)
    head += "".join(f" | {l} / {runs[0][0]} time" for l, _, _ in ratio_runs) + " | #wrong |"
    print(head)
    print("|" + "---|" * (1 + 2 * len(runs) + len(ratio_runs) + 1))
    bad = False
    table = []
    for s in sizes:
        cells, entry = [str(s)], {"size": s, "runs": {}}
        wrong = 0.0
        for label, _, rows in runs:
            r = rows.get(s)
            entry["runs"][label] = r
            cells += [f"{r['time_us']:.1f}" if r and r["time_us"] is not None else "-",
                      f"{r['busbw']:.2f}" if r and r["busbw"] is not None else "-"]
            for k in ("wrong", "inplace_wrong"):
                if r and r[k]:
                    wrong = max(wrong, r[k])
        for label, _, rows in ratio_runs:
            r, b = rows.get(s), base.get(s)
            ratio = r["time_us"] / b["time_us"] if r and b and r["time_us"] and b["time_us"] else None
            entry.setdefault("time_ratio", {})[label] = ratio
            cells.append(f"{ratio:.2f}" if ratio is not None else "-")
        cells.append(f"{wrong:g}")
        bad |= wrong > 0
        table.append(entry)
        print("| " + " | ".join(cells) + " |")
    if missing:
        print("\nMissing (no result lines in the log; the run failed or was killed): " +
              ", ".join(f"{label} ({path})" for label, path in missing))
    if a.json:
        with open(a.json, "w") as f:
            out = {"title": a.title, "runs": [{"label": l, "log": p, "missing": not r} for l, p, r in runs],
                   "sizes": table}
            if arm_entries is not None:
                out["arms"] = arm_entries
            json.dump(out, f, indent=1)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
