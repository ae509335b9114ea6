#!/usr/bin/env python3
"""Turns a tessera_bench JSON (scripts/bench.sh writes build/release/bench.json) into a Markdown
table and PNG plots: GEMM GFLOP/s against size with every peer and the FMA peak as a line;
fused against unfused attention GFLOP/s against sequence length; softmax GB/s beside the copy
bandwidth; decode GB/s against the read bandwidth. Each plot names the CPU, the kernel table and
the date of the run. Needs Debian's python3-matplotlib.

Usage: scripts/report.py BENCH_JSON OUT_DIR   (writes OUT_DIR/report.md and OUT_DIR/*.png)
"""
import collections
import json
import os
import re
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def load(path):
    with open(path) as f:
        d = json.load(f)
    rows = [b for b in d["benchmarks"] if b.get("run_type") == "iteration" or
            b.get("aggregate_name") == "median"]
    # With repetitions, keep the medians; without, the single runs.
    if any(b.get("aggregate_name") == "median" for b in rows):
        rows = [b for b in rows if b.get("aggregate_name") == "median"]
    return d["context"], rows


def field(name, key):
    m = re.search(r"(?:^|/)" + key + r":([^/]+)", name)
    return m.group(1) if m else None


def threads_of(name):
    t = field(name, "threads")
    return int(t) if t else 1


def subtitle(ctx):
    date = ctx.get("date", "")[:10]
    return (f"{ctx.get('cpu_model', 'unknown CPU')}, {ctx.get('num_cpus', '?')} CPUs, "
            f"kernel table {ctx.get('tessera_table', '?')}, {date}")


# The peaks come from the run's own peak rows (peak_fma/<table>/threads:N and
# peak_bf16_dot/...), so that the header and every row's fraction use the same number; the
# context's start-up measurement is the fallback where a run filtered the peak rows out.
PEAKS = {}


def read_peaks(ctx, rows):
    for b in rows:
        m = re.match(r"peak_(fma|bf16_dot)/([^/]+)/threads:(\d+)", b["name"])
        if m:
            PEAKS[(m.group(1), m.group(2), int(m.group(3)))] = b.get("FLOP/s", 0) / 1e9
    table = ctx.get("tessera_table", "")
    for k, v in ctx.items():
        for kind, prefix in (("fma", "fma_peak_gflops_threads_"),
                             ("bf16_dot", "bf16_dot_peak_gflops_threads_")):
            if k.startswith(prefix):
                PEAKS.setdefault((kind, table, int(k.rsplit("_", 1)[1])), float(v))


def peak(ctx, threads, kind="fma", table=None):
    return PEAKS.get((kind, table or ctx.get("tessera_table", ""), threads))


def gflops(b):
    return b.get("FLOP/s", 0) / 1e9


def gbps(b):
    return b.get("B/s", b.get("bytes_per_second", 0)) / 1e9


def finish(fig, ax, ctx, title, path):
    ax.set_title(title + "\n" + subtitle(ctx), fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_gemm(ctx, rows, out):
    paths = []
    series = collections.defaultdict(lambda: collections.defaultdict(list))
    for b in rows:
        n = b["name"]
        if not n.startswith("sgemm/square/"):
            continue
        lib = n.split("/")[6]  # sgemm/square/m:/n:/k:/NN/<library>/threads:
        series[threads_of(n)][lib].append((int(field(n, "m")), gflops(b)))
    for t, libs in sorted(series.items()):
        fig, ax = plt.subplots(figsize=(10, 4.8))
        for lib, pts in sorted(libs.items(), key=lambda kv: kv[0] != "tessera"):
            pts.sort()
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o",
                    linewidth=2.5 if lib == "tessera" else 1.2, label=lib)
        if peak(ctx, t):
            ax.axhline(peak(ctx, t), color="black", linestyle="--",
                       label=f"measured FMA peak {peak(ctx, t):.0f} GFLOP/s")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("m = n = k")
        ax.set_ylabel("GFLOP/s")
        ax.set_ylim(bottom=0)
        path = os.path.join(out, f"gemm_threads{t}.png")
        finish(fig, ax, ctx, f"SGEMM, square, {t} thread{'s' if t > 1 else ''}", path)
        paths.append(path)
    return paths


def plot_attention(ctx, rows, out):
    series = collections.defaultdict(list)
    tmax = max([threads_of(b["name"]) for b in rows if b["name"].startswith("attention/self/")],
               default=1)
    for b in rows:
        n = b["name"]
        if not n.startswith("attention/self/") or threads_of(n) != tmax:
            continue
        kind = ("causal " if "/causal/" in n else "") + ("fused" if "/fused/" in n else "unfused")
        series[(int(field(n, "d")), kind)].append((int(field(n, "kv")), gflops(b)))
    if not series:
        return []
    fig, ax = plt.subplots(figsize=(10, 4.8))
    for (d, kind), pts in sorted(series.items()):
        pts.sort()
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o" if "unfused" not in kind
                else "x", linestyle="-" if "unfused" not in kind else ":", label=f"d {d}, {kind}")
    if peak(ctx, tmax):
        ax.axhline(peak(ctx, tmax), color="black", linestyle="--",
                   label=f"measured FMA peak {peak(ctx, tmax):.0f} GFLOP/s")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("sequence length (q = kv)")
    ax.set_ylabel("GFLOP/s (4 L^2 d per head, half for causal)")
    ax.set_ylim(bottom=0)
    path = os.path.join(out, "attention.png")
    finish(fig, ax, ctx, f"Attention prefill, fused vs unfused, {tmax} threads", path)
    return [path]


def plot_softmax(ctx, rows, out):
    paths = []
    by_threads = collections.defaultdict(collections.OrderedDict)
    for b in rows:
        n = b["name"]
        if n.startswith("softmax/rows:"):
            key = f"{field(n, 'rows')} x {field(n, 'cols')}"
            by_threads[threads_of(n)].setdefault(key, {})[n.split("/")[3]] = gbps(b)
    for t, shapes in sorted(by_threads.items()):
        fig, ax = plt.subplots(figsize=(10, 4.8))
        xs = range(len(shapes))
        ax.bar([x - 0.2 for x in xs], [v.get("tessera", 0) for v in shapes.values()], 0.4,
               label="tessera softmax")
        ax.bar([x + 0.2 for x in xs], [v.get("copy", 0) for v in shapes.values()], 0.4,
               label="copy of the same rows (memcpy)")
        ax.set_xticks(list(xs))
        ax.set_xticklabels(list(shapes.keys()), fontsize=8)
        ax.set_xlabel("rows x cols (4 bytes each; up to 64 MB)")
        ax.set_ylabel("GB/s (read + write)")
        path = os.path.join(out, f"softmax_threads{t}.png")
        finish(fig, ax, ctx, f"Softmax against the copy bandwidth, {t} thread{'s' if t > 1 else ''}",
               path)
        paths.append(path)
    return paths


def plot_decode(ctx, rows, out):
    series = collections.defaultdict(list)
    ceiling = {}
    for b in rows:
        n = b["name"]
        if n.startswith("attention/memory-read/"):
            ceiling[threads_of(n)] = gbps(b)
        elif n.startswith("attention/decode-kv-type/"):
            series[(threads_of(n), n.split("/kv:")[-1].split("/")[0])].append(
                (int(field(n, "kv")), gbps(b)))
    if not series:
        return []
    fig, ax = plt.subplots(figsize=(10, 4.8))
    for (t, ty), pts in sorted(series.items()):
        pts.sort()
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o",
                label=f"{ty} K/V, {t} thread{'s' if t > 1 else ''}")
    for t, v in sorted(ceiling.items()):
        ax.axhline(v, linestyle="--", color="grey" if t == 1 else "black",
                   label=f"read bandwidth, {t} thread{'s' if t > 1 else ''}: {v:.1f} GB/s")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("keys in the cache (32 q-heads, 8 kv-heads, d 128)")
    ax.set_ylabel("GB/s of K/V bytes read")
    ax.set_ylim(bottom=0)
    path = os.path.join(out, "decode.png")
    finish(fig, ax, ctx, "Decode (one query per head) against the read bandwidth", path)
    return [path]


def llc(ctx):
    """(bytes, name) of the largest data cache Google Benchmark listed."""
    best = (0, "")
    for c in ctx.get("caches", []):
        if c.get("type") != "Instruction" and c.get("size", 0) > best[0]:
            best = (c["size"], f"L{c.get('level', '?')}")
    return best


def ceiling_of(ctx, b, by_name, llc_bytes, llc_name):
    """The ceiling that applies to a row, as (value, unit, label) or (None, None, label)."""
    n = b["name"].replace("/real_time", "")
    t = threads_of(n)
    if n.startswith("attention/decode-kv-type/"):
        ty = n.split("/kv:")[-1].split("/")[0]
        per_value = {"f32": 4, "q8_0": 34 / 32, "q4_0": 18 / 32}.get(ty, 2)
        kv_bytes = int(int(field(n, "kv")) * 8 * 128 * 2 * per_value)
        if llc_bytes and kv_bytes <= llc_bytes:
            return None, None, f"K/V ({kv_bytes >> 20} MB) in {llc_name}: no DRAM ceiling"
        read = next((r for r in by_name.values() if r["name"].startswith("attention/memory-read/")
                     and threads_of(r["name"]) == t), None)
        if read:
            return gbps(read), "GB/s", f"DRAM read {gbps(read):.1f} GB/s"
        return None, None, ""
    if b.get("FLOP/s"):
        forced = re.search(r"/tessera-([a-z0-9_]+)/", n) or re.match(r"peak_\w+?/([a-z0-9_]+)/", n)
        table = forced.group(1) if forced else None
        if (b.get("bf16_peak%") is not None or "bf16xbf16" in n or
                n.startswith("peak_bf16_dot/")):
            v = peak(ctx, t, "bf16_dot", table)
            if v:
                return v, "GFLOP/s", f"bf16 dot peak {v:.0f} GFLOP/s"
        v = peak(ctx, t, "fma", table)
        return (v, "GFLOP/s", f"FMA peak {v:.0f} GFLOP/s") if v else (None, None, "")
    if not b.get("B/s"):
        return None, None, ""
    if n.startswith("softmax/rows:") and "/tessera/" in n:
        copy = by_name.get(n.replace("/tessera/", "/copy/"))
        if copy:
            return gbps(copy), "GB/s", f"copy of the same rows {gbps(copy):.1f} GB/s"
    return None, None, ""


def table(ctx, rows):
    read_peaks(ctx, rows)
    llc_bytes, llc_name = llc(ctx)
    by_name = {b["name"].replace("/real_time", ""): b for b in rows}
    lines = [f"# Tessera benchmark report", "", subtitle(ctx), ""]
    for (kind, tbl, t), v in sorted(PEAKS.items()):
        what = "FMA" if kind == "fma" else "bf16 dot-product"
        lines.append(f"- measured {what} peak, {tbl}, {t} thread(s): {v:.1f} GFLOP/s "
                     f"(the peak_{kind} row)")
    for k in sorted(ctx):
        if k.startswith("peer_"):
            lines.append(f"- peer {k[5:]} answers with: {ctx[k]}")
    if llc_bytes:
        lines.append(f"- last-level cache: {llc_name}, {llc_bytes >> 20} MB")
    lines += ["", "Each row's fraction is of the ceiling that applies to its working set: the FMA "
              "(or bf16 dot) peak row of its table and thread count, the copy of the same softmax "
              "rows, the DRAM read for K/V past the last-level cache. A row above its ceiling is "
              "flagged, not printed as a plain percentage.", "",
              "| benchmark | time | GFLOP/s | GB/s | of its ceiling | ceiling |",
              "|---|---|---|---|---|---|"]
    flagged = 0
    for b in rows:
        n = b["name"].replace("/real_time", "")
        v, unit, label = ceiling_of(ctx, b, by_name, llc_bytes, llc_name)
        pct = ""
        if v:
            got = gflops(b) if unit == "GFLOP/s" else gbps(b)
            frac = 100.0 * got / v
            if got > v * (1 + 1e-9):  # (a peak row is its own ceiling: 100 x / x may round up)
                flagged += 1
                pct = f"**{frac:.0f}%: above the ceiling (flagged)**"
            else:
                pct = f"{frac:.0f}%"
        lines.append(f"| {n} | {b.get('real_time', 0):.4g} {b.get('time_unit', '')} | "
                     f"{gflops(b):.1f} | {gbps(b):.2f} | {pct} | {label} |")
    lines += ["", f"{flagged} row(s) above their ceiling.", ""]
    lines += pair_table(rows)
    return "\n".join(lines) + "\n"


# Counters of the alternated rows (two ways timed in one process): the numbers to quote.
PAIR_KEYS = ("ratio", "speedup", "layer_over_direct", "oneshot_over_layer", "new/old",
             "rope_over_none", "sinks_over_none", "ring_over_none", "paged_over_contiguous")


def pair_table(rows):
    # (several ways alternated name their ratios <way>_over_<first>: the first such is shown)
    def pair_key(b):
        return next((k for k in PAIR_KEYS if k in b),
                    next((k for k in sorted(b) if "_over_" in k and isinstance(b[k], (int, float))),
                         None))
    pairs = [b for b in rows if pair_key(b)]
    if not pairs:
        return []
    out = ["## Alternated pairs", "",
           "Two ways measured in alternating slices in one process; the median of the per-round "
           "ratios (p25 and p75 where the row reports them).", "",
           "| benchmark | ratio | p25 | p75 | other counters |", "|---|---|---|---|---|"]
    skip = set(PAIR_KEYS) | {"p25", "p75"}
    std = {"name", "run_name", "run_type", "repetitions", "repetition_index", "threads",
           "iterations", "real_time", "cpu_time", "time_unit", "family_index",
           "per_family_instance_index", "aggregate_name", "aggregate_unit", "label",
           "error_occurred", "error_message"}
    for b in pairs:
        key = pair_key(b)
        extra = ", ".join(f"{k} {v:.4g}" for k, v in sorted(b.items())
                          if k not in skip and k not in std and isinstance(v, (int, float)))
        p25 = f"{b['p25']:.3f}" if "p25" in b else ""
        p75 = f"{b['p75']:.3f}" if "p75" in b else ""
        out.append(f"| {b['name'].replace('/real_time', '')} | {key} {b[key]:.3f} | {p25} | "
                   f"{p75} | {extra} |")
    return out + [""]


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    ctx, rows = load(sys.argv[1])
    read_peaks(ctx, rows)
    out = sys.argv[2]
    os.makedirs(out, exist_ok=True)
    plots = (plot_gemm(ctx, rows, out) + plot_attention(ctx, rows, out) +
             plot_softmax(ctx, rows, out) + plot_decode(ctx, rows, out))
    md = table(ctx, rows)
    md += "\n" + "\n".join(f"![{os.path.basename(p)}]({os.path.basename(p)})" for p in plots) + "\n"
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write(md)
    print(f"report: {os.path.join(out, 'report.md')} and {len(plots)} plots")
    return 0


if __name__ == "__main__":
    sys.exit(main())
