#!/usr/bin/env python3
"""ci/peers/peers_report.py RESULTS GEMM_TXT DOC COMMAND — the ratios of `make
bench-peers` from the RESULT lines of bench_step (dpcert) and llama_peers.py (PyTorch,
Opacus), printed and written into DOC between the markers
<!-- bench-peers:begin --> and <!-- bench-peers:end --> (atomically: a temporary file in
the same directory, flushed, then renamed; DOC must not be a symlink).

Ratios (docs/performance.md explains them; issue 30's goals): per size, dtype and thread
count,
  best dpcert DP strategy / best Opacus DP mode (median seconds per step; goal <= 0.7),
  best dpcert DP strategy / non-private PyTorch (goal <= 1.2 at D >= 256, f32),
  dpcert book-keeping / dpcert's own non-private step,
  peak RSS above the process's baseline (base_rss_mb: dpcert before the run's memory,
  PyTorch after importing torch and opacus): dpcert's best DP strategy / Opacus's best
  mode (goal <= 1) and / dpcert's non-private step (goal <= 1.1), and the same for
  dpcert's leanest DP strategy;
  the ledger's coverage: dpcert's ledger peak / its peak RSS above baseline (goal >= 0.95);
and per strategy the speed-up from 1 to 2 threads. With several rounds (ROUNDS) every
field is the median over the rounds of that configuration."""
import os
import platform
import sys
import tempfile
import time

DP_STRATS = ["grad-sample", "ghost", "mixed-ghost", "book-keeping", "fused"]
OPACUS = ["opacus-hooks", "opacus-ghost"]


def parse_loads(path):
    """the LOAD lines bench-peers.sh writes before each configuration (/proc/loadavg)"""
    with open(path) as f:
        return [float(line.split()[1]) for line in f if line.startswith("LOAD ") and len(line.split()) > 1]


NUMERIC = ("median_s", "min_s", "max_s", "cpu_s", "peak_rss_mb", "base_rss_mb", "ledger_peak_mb")


def parse(path):
    """RESULT lines, one row per configuration: several rounds of a configuration are
    merged into the median of each numeric field (and the number of rounds)"""
    groups = {}
    with open(path) as f:
        for line in f:
            if not line.startswith("RESULT "):
                continue
            kv = dict(t.split("=", 1) for t in line.split()[1:] if "=" in t)
            key = tuple(kv.get(k) for k in ("tool", "strategy", "dtype", "threads", "D", "L", "T", "B"))
            groups.setdefault(key, []).append(kv)
    rows = []
    for g in groups.values():
        r = dict(g[0])
        for k in NUMERIC:
            vals = sorted(float(x[k]) for x in g if k in x)
            if vals:
                r[k] = str(vals[len(vals) // 2])
        r["rounds"] = str(len(g))
        rows.append(r)
    return rows


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def fmt(x, nd=2):
    return "n/a" if x is None else f"{x:.{nd}f}"


def build(rows, gemm_txt, command, loads=()):
    idx = {}
    for r in rows:
        key = (r["tool"], r["strategy"], r["dtype"], int(r["threads"]), int(r["D"]), int(r["L"]), int(r["T"]),
               int(r["B"]))
        idx[key] = r
    sizes = sorted({(int(r["D"]), int(r["L"]), int(r["T"]), int(r["B"])) for r in rows})
    combos = sorted({(r["dtype"], int(r["threads"])) for r in rows})

    def get(tool, strat, dt, th, sz, field="median_s"):
        r = idx.get((tool, strat, dt, th) + sz)
        return float(r[field]) if r else None

    out = []
    vers = sorted({f"torch {r['torch']}, opacus {r['opacus']}" for r in rows if r["tool"] == "pytorch"
                   and r.get("opacus", "-") != "-"})
    isa = sorted({r.get("isa", "?") for r in rows if r["tool"] == "dpcert"})
    out.append(f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on {cpu_name()}, "
               f"{os.cpu_count()} cores; dpcert host GEMM micro-kernel: {', '.join(isa)}; "
               f"{'; '.join(vers) or 'PyTorch/Opacus not run'}.")
    out.append("")
    out.append(f"Command: `{command}`")
    out.append("")
    out.append("Seconds per step are medians of the timed steps after warm-up (wall clock); "
               "RSS is each process's peak (one configuration per process).")
    out.append("")
    out.append("| D, L, T, B | dtype | threads | dpcert best DP (s) | Opacus best DP (s) | PyTorch non-DP (s) "
               "| dpcert DP / Opacus DP [<= 0.7] | dpcert DP / PyTorch non-DP [<= 1.2] | dpcert BK / own non-DP |")
    out.append("|---|---|---|---|---|---|---|---|---|")
    summary = []
    for sz in sizes:
        for dt, th in combos:
            dp = [(get("dpcert", s, dt, th, sz), s) for s in DP_STRATS]
            dp = [x for x in dp if x[0] is not None]
            op = [(get("pytorch", m, dt, th, sz), m) for m in OPACUS]
            op = [x for x in op if x[0] is not None]
            nd_pt = get("pytorch", "nondp", dt, th, sz)
            nd_dc = get("dpcert", "non-dp", dt, th, sz)
            bk = get("dpcert", "book-keeping", dt, th, sz)
            if not dp and not op:
                continue
            bdp = min(dp) if dp else None
            bop = min(op) if op else None
            r1 = bdp[0] / bop[0] if bdp and bop else None
            r2 = bdp[0] / nd_pt if bdp and nd_pt else None
            r3 = bk / nd_dc if bk and nd_dc else None
            out.append(f"| {sz[0]}, {sz[1]}, {sz[2]}, {sz[3]} | {dt} | {th} | "
                       f"{fmt(bdp[0], 3) if bdp else 'n/a'} ({bdp[1] if bdp else '-'}) | "
                       f"{fmt(bop[0], 3) if bop else 'n/a'} ({bop[1] if bop else '-'}) | {fmt(nd_pt, 3)} | "
                       f"{fmt(r1)} | {fmt(r2)} | {fmt(r3)} |")
            summary.append((sz, dt, th, r1, r2, r3))
    out.append("")
    out.append("The same ratios in CPU seconds per step (the process's CPU time, all threads; less disturbed "
               "by other processes on a shared machine than wall time; with OMP_WAIT=active it would "
               "also count PyTorch's spinning OpenMP workers); each side's best by CPU seconds:")
    out.append("")
    out.append("| D, L, T, B | dtype | threads | dpcert best DP (CPU s) | Opacus best DP (CPU s) "
               "| PyTorch non-DP (CPU s) | dpcert DP / Opacus DP | dpcert DP / PyTorch non-DP "
               "| dpcert BK / own non-DP |")
    out.append("|---|---|---|---|---|---|---|---|---|")
    for sz in sizes:
        for dt, th in combos:
            dp = [x for x in ((get("dpcert", s, dt, th, sz, "cpu_s"), s) for s in DP_STRATS) if x[0] is not None]
            op = [x for x in ((get("pytorch", m, dt, th, sz, "cpu_s"), m) for m in OPACUS) if x[0] is not None]
            if not dp and not op:
                continue
            nd_pt = get("pytorch", "nondp", dt, th, sz, "cpu_s")
            nd_dc = get("dpcert", "non-dp", dt, th, sz, "cpu_s")
            bk = get("dpcert", "book-keeping", dt, th, sz, "cpu_s")
            bdp, bop = (min(dp) if dp else None), (min(op) if op else None)
            out.append(f"| {sz[0]}, {sz[1]}, {sz[2]}, {sz[3]} | {dt} | {th} | "
                       f"{fmt(bdp[0], 3) if bdp else 'n/a'} ({bdp[1] if bdp else '-'}) | "
                       f"{fmt(bop[0], 3) if bop else 'n/a'} ({bop[1] if bop else '-'}) | {fmt(nd_pt, 3)} | "
                       f"{fmt(bdp[0] / bop[0] if bdp and bop else None)} | "
                       f"{fmt(bdp[0] / nd_pt if bdp and nd_pt else None)} | {fmt(bk / nd_dc if bk and nd_dc else None)} |")
    out.append("")
    out.append("Memory: peak RSS above each process's baseline, MB (dpcert: before the run's memory; PyTorch: "
               "after importing torch and opacus), for dpcert's fastest DP strategy (by wall time), its leanest "
               "DP strategy, its non-private step, Opacus's fastest mode and non-private PyTorch; the ratios of "
               "issue 30's goals; and the ledger's coverage of dpcert's fastest DP strategy (ledger peak / "
               "RSS above baseline):")
    out.append("")
    out.append("| D, L, T, B | dtype | threads | dpcert DP (fastest) | dpcert DP (leanest) | dpcert non-DP "
               "| Opacus DP | PyTorch non-DP | fastest / Opacus [<= 1] | fastest / own non-DP [<= 1.1] "
               "| leanest / Opacus | leanest / own non-DP | ledger coverage [>= 0.95] |")
    out.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|")

    def above(tool, strat, dt, th, sz):
        p, b = get(tool, strat, dt, th, sz, "peak_rss_mb"), get(tool, strat, dt, th, sz, "base_rss_mb")
        return p - b if p is not None and b is not None else None

    for sz in sizes:
        for dt, th in combos:
            dp = [x for x in ((get("dpcert", s, dt, th, sz), s) for s in DP_STRATS) if x[0] is not None]
            op = [x for x in ((get("pytorch", m, dt, th, sz), m) for m in OPACUS) if x[0] is not None]
            if not dp:
                continue
            fast = min(dp)[1]
            leans = [(above("dpcert", s, dt, th, sz), s) for _, s in dp if above("dpcert", s, dt, th, sz) is not None]
            lean = min(leans) if leans else (None, "-")
            m_fast, m_lean = above("dpcert", fast, dt, th, sz), lean[0]
            m_nd = above("dpcert", "non-dp", dt, th, sz)
            m_op = above("pytorch", min(op)[1], dt, th, sz) if op else None
            m_pt = above("pytorch", "nondp", dt, th, sz)
            led = get("dpcert", fast, dt, th, sz, "ledger_peak_mb")

            def rat(a, b):
                return a / b if a is not None and b else None
            out.append(f"| {sz[0]}, {sz[1]}, {sz[2]}, {sz[3]} | {dt} | {th} | {fmt(m_fast, 0)} ({fast}) | "
                       f"{fmt(m_lean, 0)} ({lean[1]}) | {fmt(m_nd, 0)} | "
                       f"{fmt(m_op, 0)} ({min(op)[1] if op else '-'}) | {fmt(m_pt, 0)} | {fmt(rat(m_fast, m_op))} | "
                       f"{fmt(rat(m_fast, m_nd))} | {fmt(rat(m_lean, m_op))} | {fmt(rat(m_lean, m_nd))} | "
                       f"{fmt(rat(led, m_fast), 3)} |")
    if loads:
        out.append("")
        out.append(f"Machine load during the run (1-minute load average, sampled before each configuration): "
                   f"min {min(loads):.1f}, median {sorted(loads)[len(loads) // 2]:.1f}, max {max(loads):.1f} "
                   f"on {os.cpu_count()} cores.")
    out.append("")
    out.append("Every configuration measured (median s/step, CPU s/step of the process, peak RSS MB):")
    out.append("")
    out.append("| D, L, T, B | dtype | threads | tool | strategy / mode | median s | CPU s | peak RSS MB "
               "| baseline RSS MB | ledger peak MB | rounds |")
    out.append("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in sorted(rows, key=lambda r: (int(r["D"]), int(r["T"]), r["dtype"], int(r["threads"]), r["tool"],
                                         r["strategy"])):
        out.append(f"| {r['D']}, {r['L']}, {r['T']}, {r['B']} | {r['dtype']} | {r['threads']} | {r['tool']} | "
                   f"{r['strategy']} | {float(r['median_s']):.3f} | {float(r.get('cpu_s', 'nan')):.3f} | "
                   f"{float(r['peak_rss_mb']):.0f} | {float(r.get('base_rss_mb', 'nan')):.0f} | "
                   f"{float(r['ledger_peak_mb']) if 'ledger_peak_mb' in r else float('nan'):.0f} | "
                   f"{r.get('rounds', '1')} |")
    out.append("")
    out.append("Speed-up from 1 to 2 threads (median s at 1 thread / at 2 threads):")
    out.append("")
    out.append("| D, L, T, B | dtype | tool | strategy / mode | speed-up |")
    out.append("|---|---|---|---|---|")
    for sz in sizes:
        for dt in sorted({c[0] for c in combos}):
            for tool, strats in (("dpcert", DP_STRATS + ["non-dp"]), ("pytorch", ["nondp"] + OPACUS)):
                for s in strats:
                    a, b = get(tool, s, dt, 1, sz), get(tool, s, dt, 2, sz)
                    if a and b:
                        out.append(f"| {sz[0]}, {sz[1]}, {sz[2]}, {sz[3]} | {dt} | {tool} | {s} | {a / b:.2f} |")
    if gemm_txt and os.path.exists(gemm_txt):
        out.append("")
        out.append("GEMM kernels, one thread (`ci/peers/gemm_vs_openblas`; time ratio < 1: ours faster; "
                   "bits differ: share of output elements whose bits differ from ours):")
        out.append("")
        out.append("```")
        with open(gemm_txt) as f:
            out.append(f.read().rstrip())
        out.append("```")
    return "\n".join(out), summary


def write_doc(doc, body):
    if os.path.islink(doc):
        raise SystemExit(f"peers_report: {doc} is a symlink; not writing through it")
    begin, end = "<!-- bench-peers:begin -->", "<!-- bench-peers:end -->"
    text = open(doc).read() if os.path.exists(doc) else "# Performance\n\n" + begin + "\n" + end + "\n"
    if begin not in text or end not in text:
        text = text.rstrip("\n") + "\n\n" + begin + "\n" + end + "\n"
    pre, rest = text.split(begin, 1)
    _, post = rest.split(end, 1)
    new = pre + begin + "\n" + body + "\n" + end + post
    d = os.path.dirname(os.path.abspath(doc))
    fd, tmp = tempfile.mkstemp(prefix=".performance.", dir=d)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(new)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, doc)
    except BaseException:
        os.unlink(tmp)
        raise


def main():
    if len(sys.argv) != 5:
        print("usage: peers_report.py RESULTS GEMM_TXT DOC COMMAND", file=sys.stderr)
        return 2
    rows = parse(sys.argv[1])
    if not rows:
        print(f"peers_report: no RESULT lines in {sys.argv[1]}", file=sys.stderr)
        return 1
    body, summary = build(rows, sys.argv[2], sys.argv[4], parse_loads(sys.argv[1]))
    print(body)
    write_doc(sys.argv[3], body)
    print(f"\nwritten to {sys.argv[3]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
