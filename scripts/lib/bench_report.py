#!/usr/bin/env python3
"""Turns Google Benchmark JSON files into fuse's ratio table (markdown) and a gnuplot chart.

Benchmark names carry their role: `family/.../VARIANT/params`, where VARIANT is one of the
known variants below (fuse's own: fused, fuse, ...; anchors: unfused, eigen, openblas, floor;
`goal`, an issue's target time, reported by manual time).
Runs that differ only in their variant form a group; each of fuse's variants in a group is
compared with every anchor as   time(anchor) / time(fuse)   (above 1: fuse is faster), and with
the floor as   time(fuse) / time(floor)   (how far fuse is from the memory or FLOP floor).

Each benchmark's time is the minimum over its repetitions: the machine is shared and noisy,
and interference only ever adds time.

Usage: bench_report.py OUT_DIR file.json...   (writes OUT_DIR/report.md and OUT_DIR/ratios.png)
"""
import json
import os
import subprocess
import sys
from collections import OrderedDict

FUSE_VARIANTS = ["fused", "fuse", "fused_fast", "fuse_fast", "fused_unpacked", "fuse_packed"]
ANCHORS = ["unfused", "unfused_nt", "eigen", "openblas", "tvm", "goal"]
FLOORS = ["floor", "floor_nt"]
KNOWN = set(FUSE_VARIANTS + ANCHORS + FLOORS)


def parse(name):
    parts = [p for p in name.split("/") if p not in ("real_time", "process_time", "manual_time")]
    for i, p in enumerate(parts[1:], start=1):
        if p in KNOWN:
            return "/".join(parts[:i] + parts[i + 1:]), p
    return None, None


def load(files):
    groups = OrderedDict()
    per_item = {}
    flops = set()  # (group, variant) whose items are FLOPs: they carry a "FLOP" rate counter
    context = None
    for f in files:
        with open(f) as fh:
            data = json.load(fh)
        context = context or data.get("context", {})
        for b in data.get("benchmarks", []):
            if b.get("run_type") == "aggregate":
                continue
            if b.get("error_occurred"):
                print(f"skipped {b['name']}: {b.get('error_message', 'error')}", file=sys.stderr)
                continue
            group, variant = parse(b["name"])
            if group is None:
                continue
            scale = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}[b.get("time_unit", "ns")]
            t = b["real_time"] * scale
            g = groups.setdefault(group, OrderedDict())
            g[variant] = min(g.get(variant, float("inf")), t)
            if "items_per_second" in b and b["items_per_second"] > 0:
                # Items per iteration: Google Benchmark divides items by the time it measures
                # (real time with UseRealTime, else CPU time); ns per item from the min time.
                timed = b["name"].endswith(("/real_time", "/manual_time"))
                measured = b["real_time"] if timed else b["cpu_time"]
                items = b["items_per_second"] * measured * scale / 1e9
                per_item[(group, variant)] = g[variant] / items
                if "FLOP" in b:
                    flops.add((group, variant))
    # Random interleaving scrambles the order of runs in the JSON: put groups in a stable order
    # (by name, numbers compared as numbers) and each group's variants in the order of the lists
    # above.
    def natural(key):
        return [(0, int(p), "") if p.isdigit() else (1, 0, p) for p in key.split("/")]
    rank = {v: i for i, v in enumerate(FUSE_VARIANTS + ANCHORS + FLOORS)}
    groups = OrderedDict((k, OrderedDict(sorted(groups[k].items(), key=lambda kv: rank[kv[0]])))
                         for k in sorted(groups, key=natural))
    return groups, per_item, flops, context


def fmt_time(ns):
    for unit, div in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if ns >= div:
            return f"{ns / div:.3g} {unit}"
    return f"{ns:.3g} ns"


def main():
    out_dir, files = sys.argv[1], sys.argv[2:]
    groups, per_item, flops, context = load(files)
    lines = []
    chart = []  # (label, ratio)
    # One row per fuse variant; one column per anchor present anywhere: time(anchor)/time(fuse),
    # and the floor column time(fuse)/time(floor).
    anchors = [a for a in ANCHORS if any(a in g for g in groups.values())]
    floors = [f for f in FLOORS if any(f in g for g in groups.values())]
    # Benchmarks whose items are FLOPs (contractions) also get a GFLOP/s column.
    rate_col = ["GFLOP/s"] if flops else []

    def rate(group, v):
        if not rate_col:
            return ""
        ni = per_item.get((group, v))
        return f" {1 / ni:.1f} |" if (group, v) in flops and ni else " |"

    head = (["benchmark", "fuse", "time", "ns/item"] + rate_col + [f"{a} / fuse" for a in anchors]
            + [f"fuse / {f}" for f in floors])
    lines.append("| " + " | ".join(head) + " |")
    lines.append("|" + "---|" * 2 + "---:|" * (len(head) - 2))
    anchor_lines = []
    for group, variants in groups.items():
        for v, t in variants.items():
            if v not in FUSE_VARIANTS:
                ni = per_item.get((group, v))
                anchor_lines.append(f"| {group} | *{v}* | {fmt_time(t)} | {'' if ni is None else f'{ni:.3f}'} |"
                                    + rate(group, v)
                                    + " |" * (len(anchors) + len(floors)))
                continue
            cells = []
            for a in anchors:
                if a in variants:
                    r = variants[a] / t
                    cells.append(f"**{r:.2f}x**")
                    chart.append((f"{group}: {a}/{v}", r))
                else:
                    cells.append("")
            for f in floors:
                if f in variants:
                    r = t / variants[f]
                    cells.append(f"{r:.2f}x")
                else:
                    cells.append("")
            ni = per_item.get((group, v))
            lines.append(f"| {group} | {v} | {fmt_time(t)} | {'' if ni is None else f'{ni:.3f}'} |" + rate(group, v)
                         + " " + " | ".join(cells) + " |")
    table = "\n".join(lines + anchor_lines)
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "report.md"), "w") as fh:
        if context:
            fh.write(f"Machine: {context.get('host_name', '?')}, {context.get('num_cpus', '?')} CPUs at "
                     f"{context.get('mhz_per_cpu', '?')} MHz, caches "
                     + ", ".join(f"L{c['level']} {c['size'] // 1024} KiB" for c in context.get("caches", [])
                                 if c.get("type") != "Instruction")
                     + f"; {context.get('date', '')}\n\n")
        fh.write(table + "\n")
    print(table)
    if chart:
        dat = os.path.join(out_dir, "ratios.dat")
        with open(dat, "w") as fh:
            for i, (label, r) in enumerate(chart):
                color = 0x3B75AF if r >= 1 else 0xC0392B  # blue: fuse faster; red: slower
                fh.write(f'{i} "{label}" {r:.4f} {color}\n')
        png = os.path.join(out_dir, "ratios.png")
        height = max(300, 22 * len(chart) + 120)
        script = f"""
set terminal pngcairo size 1100,{height} font "DejaVu Sans,9" noenhanced
set output '{png}'
set title "time(anchor) / time(fuse): right of the dashed line, fuse is faster"
set style fill solid 0.8
set boxwidth 0.7
set yrange [-1:{len(chart)}]
set ytics () font ",8"
set xlabel "ratio"
set grid xtics
set arrow from 1, graph 0 to 1, graph 1 nohead lc rgb "black" dt 2
unset key
plot '{dat}' using (($3)/2):1:(($3)/2):(0.35):4:yticlabels(2) with boxxyerrorbars lc rgb variable
"""
        try:
            subprocess.run(["gnuplot"], input=script, text=True, check=True)
            print(f"\nchart: {png}")
        except (OSError, subprocess.CalledProcessError) as e:
            print(f"\n(no chart: gnuplot failed: {e})")


if __name__ == "__main__":
    main()
