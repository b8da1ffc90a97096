#!/usr/bin/env python3
"""dpcert's PLD accountant per call against the public PLD/PRV accountants on one fixed grid
(issue 30 goal 6; the table of docs/accounting.md §10 "PLD grid against the peers").

    ci/peers/pld-peers.sh BUILD        (or: python3 ci/peers/pld_peers.py --bench BUILD/bench/accountant_bench_pld_grid [--reps N] [--out FILE.md])

Not part of `make test`: it needs dp_accounting and prv_accountant from PyPI, installed by
ci/peers/pld-peers.sh into BUILD/acct-peers-venv.

Grid (the same as accountant/bench/bench_pld_grid.c): Poisson-subsampled Gaussian (sigma 1) and
Laplace (b 2), q in {0.001, 0.01, 0.1}, T in {1000, 10000, 100000}, epsilon at delta 1e-5,
add/remove neighbours. Peers, each at its default accuracy:
  dp_accounting  PLDAccountant() (value_discretization_interval 1e-4, pessimistic), events
                 SelfComposed(PoissonSampled(q, Gaussian(sigma) | Laplace(b)), T)
  prv_accountant DPSGDAccountant(sigma, q, T) (its defaults eps_error 0.1, delta_error 1e-9):
                 Gaussian only (it has no subsampled Laplace)
dpcert: accountant/bench/bench_pld_grid.c (acct_pld_epsilon in process, default grid).
Per call = a fresh accountant, its composition and one epsilon query; timed as the CPU time of
the process (time.process_time, and CLOCK_PROCESS_CPUTIME_ID on dpcert's side: the machine is
shared, so wall time would measure the neighbours; wall time is printed too), the median of
--reps calls (each peer query is also bounded by --timeout seconds of wall time).
The ratio column is the fastest peer's CPU time over dpcert's. Every peer estimate is checked
against dpcert's interval widened by the peer's own stated error (dp_accounting: 1e-3 at its
discretisation; prv_accountant: its eps_error 0.1) and prv_accountant's upper bound must not
be below dpcert's lower bound; a failed check is printed and makes the exit status 1.
"""
import argparse
import json
import signal
import statistics
import subprocess
import sys
import time
import warnings

warnings.filterwarnings("ignore")
DELTA = 1e-5


class Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise Timeout()


def timed(f, reps, timeout):
    cpu, wall, val = [], [], None
    for _ in range(reps):
        signal.signal(signal.SIGALRM, _alarm)
        signal.alarm(timeout)
        c0, w0 = time.process_time(), time.perf_counter()
        try:
            val = f()
        except Timeout:
            return f"timeout ({timeout} s)", None, None
        except Exception as e:  # noqa: BLE001 (a library that cannot answer is recorded)
            return f"error: {type(e).__name__}: {str(e)[:60]}", None, None
        finally:
            signal.alarm(0)
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - w0)
    if val is None:  # not applicable (prv_accountant has no subsampled Laplace)
        return None, None, None
    return val, 1e3 * statistics.median(cpu), 1e3 * statistics.median(wall)


def peers():
    import dp_accounting
    from dp_accounting import pld
    from prv_accountant.dpsgd import DPSGDAccountant

    def dpa(mech, par, q, t):
        ev = dp_accounting.GaussianDpEvent(par) if mech == "gaussian" else dp_accounting.LaplaceDpEvent(par)
        acc = pld.PLDAccountant()
        acc.compose(dp_accounting.SelfComposedDpEvent(dp_accounting.PoissonSampledDpEvent(q, ev), t))
        return acc.get_epsilon(DELTA)

    def prv(mech, par, q, t):
        if mech != "gaussian":
            return None
        lo, est, up = DPSGDAccountant(noise_multiplier=par, sampling_probability=q, max_steps=t).compute_epsilon(
            delta=DELTA, num_steps=t)
        return (est, up)

    return {"dp_accounting PLD": dpa, "prv_accountant": prv}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench", required=True, help="accountant_bench_pld_grid binary")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--peer-reps", type=int, default=1)
    ap.add_argument("--timeout", type=int, default=600)
    ap.add_argument("--out", help="write the markdown table here")
    ap.add_argument("--json-out", help="write every number here")
    a = ap.parse_args()
    # the harness's header, rows and reproduce line are the other lines (docs/benchmarks.md)
    ours = [json.loads(l) for l in subprocess.run([a.bench, "-w", "0", "-n", str(a.reps), "--json"], check=True,
                                                  capture_output=True, text=True).stdout.splitlines() if l.startswith("{")]
    libs = peers()
    rows, bad = [], []
    for o in ours:
        row = dict(o)
        for name, f in libs.items():
            v, c, w = timed(lambda: f(o["mechanism"], o["param"], o["q"], o["T"]), a.peer_reps, a.timeout)
            row[name] = {"value": v, "cpu_ms": c, "wall_ms": w}
            lo, up = o["lower"], o["upper"]
            # above epsilon ~700 the peers' float64 evaluation underflows and over-estimates
            # (../shared/notes/accounting-anchors.md §4.5): no check there
            if c is not None and v is not None and o["upper"] < 700:
                if name == "dp_accounting PLD" and not (lo - 1e-3 <= v <= up + 1e-3 + 1e-4 * o["T"] ** 0.5):
                    bad.append(f"{name} {v:.6g} outside dpcert [{lo:.6g}, {up:.6g}] at {o['mechanism']} q {o['q']} "
                               f"T {o['T']}")
                if name == "prv_accountant":
                    if not (lo - 0.1 <= v[0] <= up + 0.1):
                        bad.append(f"{name} estimate {v[0]:.6g} outside dpcert [{lo:.6g}, {up:.6g}] +- 0.1")
                    if v[1] < lo:
                        bad.append(f"{name} upper {v[1]:.6g} below dpcert's lower bound {lo:.6g}")
        times = [row[n]["cpu_ms"] for n in libs if row[n]["cpu_ms"] is not None]
        row["fastest_peer_cpu_ms"] = min(times) if times else None
        row["ratio"] = row["fastest_peer_cpu_ms"] / o["cpu_ms"] if times else None
        rows.append(row)
        print(f"{o['mechanism']} q {o['q']} T {o['T']}: dpcert [{o['lower']:.6f}, {o['upper']:.6f}] {o['cpu_ms']:.2f} "
              f"ms; " + "; ".join(f"{n} {fmt(row[n]['value'])} {fmt_ms(row[n]['cpu_ms'])}" for n in libs) +
              (f"; fastest / dpcert = {row['ratio']:.1f}x" if row["ratio"] else ""), flush=True)
    table = ["| mechanism | q | T | dpcert [lower, upper] | dpcert CPU ms | dp_accounting PLD | ms | "
             "prv_accountant est / upper | ms | fastest peer / dpcert |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        d, p = r["dp_accounting PLD"], r["prv_accountant"]
        table.append(f"| {r['mechanism']} | {r['q']} | {r['T']} | [{r['lower']:.6f}, {r['upper']:.6f}] | "
                     f"{r['cpu_ms']:.2f} | {fmt(d['value'])} | {fmt_ms(d['cpu_ms'])} | {fmt(p['value'])} | "
                     f"{fmt_ms(p['cpu_ms'])} | {r['ratio']:.1f} |" if r["ratio"] else " - |")
    text = "\n".join(table) + "\n"
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump(rows, f, indent=1, default=str)
    for b in bad:
        print("CHECK FAILED:", b)
    ratios = [r["ratio"] for r in rows if r["ratio"]]
    if ratios:
        print(f"fastest peer / dpcert per call: min {min(ratios):.1f}x, median {statistics.median(ratios):.1f}x, "
              f"max {max(ratios):.1f}x over {len(ratios)} queries")
    return 1 if bad else 0


def fmt(v):
    if v is None:
        return "n/a"
    if isinstance(v, str):
        return v
    if isinstance(v, tuple):
        return f"{v[0]:.5f} / {v[1]:.5f}"
    return f"{v:.6f}"


def fmt_ms(c):
    return "-" if c is None else f"{c:.0f}"


if __name__ == "__main__":
    sys.exit(main())
