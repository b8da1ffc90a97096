#!/usr/bin/env python3
"""dpcert's accountant beside the public ones on one grid (docs/accounting.md "Peer accountants").

    python ci/peers/accountants.py --dpcert build/dpcert --out FILE.md   (run by `make test-peers`)

Grid: the Poisson-subsampled Gaussian mechanism, add/remove neighbours, q in {0.001, 0.01, 0.1},
sigma in {0.8, 1, 2}, T in {100, 1000, 10000}, and q = 1 (no sampling; the only case OpenDP
covers) with T in {1, 10, 100}; delta 1e-5: epsilon(delta) from
  dpcert      `dpcert account --accountant rdp` (dp-accounting's order grid; and `--orders opacus`
              for the comparison with Opacus) and `--accountant pld` (the [lower, upper] interval)
  dp_accounting  RdpAccountant (its default orders) and PLDAccountant (value_discretization_interval 1e-4)
  opacus      RDPAccountant, PRVAccountant (eps_error 0.01), GaussianAccountant (GDP, a CLT estimate)
  prv_accountant  PRVAccountant (eps_error 0.01, delta_error 1e-10): estimate and upper bound
  autodp      NoisySGD_Mechanism (RDP, Poisson sampling, improved bound)
  opendp      q = 1 only (it has no Poisson-subsampled Gaussian): make_gaussian (zCDP) composed T
              times, make_zCDP_to_approxDP, then epsilon at delta
Each query is timed alone (wall clock; dpcert's includes the process start). Checks (exit 1
when one fails): Opacus's RDP equal to dpcert's RDP on Opacus's orders (1e-6 relative);
dp_accounting's RDP not below dpcert's on the same orders (it is above where its
fractional-order series does not converge and it drops those orders); autodp's and OpenDP's
bounds not below dpcert's rigorous PLD lower bound; dp_accounting's PLD and prv_accountant's estimate
within their stated error of dpcert's PLD interval (1e-3, eps_error 0.01); Opacus's PRV value (an upper
bound: its estimate plus eps_error 0.01) between dpcert's lower bound and its upper bound + 2 x
0.01, and prv_accountant's upper bound not below dpcert's lower bound. An estimate outside dpcert's
interval while dp_accounting's PLD lies inside it is recorded as that peer's own error, not
counted. A library that raises is recorded in the table. GDP is a CLT approximation, listed, not checked. `--from-json FILE` re-checks and
re-writes the table of an earlier run without recomputing.
"""
import argparse
import json
import signal
import subprocess
import sys
import time
import warnings

warnings.filterwarnings("ignore")
DELTA = 1e-5
LIBS = ["dp_accounting RDP", "dp_accounting PLD", "opacus RDP", "opacus PRV", "opacus GDP", "prv_accountant",
        "autodp RDP", "opendp zCDP"]
GRID = [(q, s, t) for q in (0.001, 0.01, 0.1, 1.0) for s in (0.8, 1.0, 2.0)
        for t in ((100, 1000, 10000) if q < 1 else (1, 10, 100))]
TIMEOUT_S = 300  # a query still running after this is recorded as a timeout (SIGALRM)


def _alarm(signum, frame):
    raise TimeoutError(f"no answer within {TIMEOUT_S} s")


def timed(f):
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(TIMEOUT_S)
    t0 = time.perf_counter()
    try:
        v = f()
    except Exception as e:  # noqa: BLE001 (a library that cannot answer is recorded, not fatal)
        v = f"error: {type(e).__name__}: {str(e)[:80]}"
    finally:
        signal.alarm(0)
    return v, time.perf_counter() - t0


def dpcert(binary, q, s, t, *extra):
    out = subprocess.run([binary, "account", "--q", repr(q), "--sigma", repr(s), "--steps", str(t), "--delta",
                          repr(DELTA), "--json", *extra], check=True, capture_output=True, text=True).stdout
    return json.loads(out)["results"]


def peers():
    """name -> f(q, s, t) returning epsilon (or (estimate, upper)); None where not applicable."""
    import dp_accounting
    from dp_accounting import pld as dpa_pld, rdp as dpa_rdp
    from opacus.accountants import GaussianAccountant, PRVAccountant as OpPRV, RDPAccountant
    from prv_accountant import PRVAccountant, PoissonSubsampledGaussianMechanism
    from autodp.mechanism_zoo import NoisySGD_Mechanism

    def event(q, s, t):
        g = dp_accounting.GaussianDpEvent(s)
        return dp_accounting.SelfComposedDpEvent(g if q == 1 else dp_accounting.PoissonSampledDpEvent(q, g), t)

    def dpa_rdp_eps(q, s, t):
        a = dpa_rdp.RdpAccountant()
        a.compose(event(q, s, t))
        return a.get_epsilon(DELTA)

    def dpa_pld_eps(q, s, t):
        a = dpa_pld.PLDAccountant(value_discretization_interval=1e-4)
        a.compose(event(q, s, t))
        return a.get_epsilon(DELTA)

    def opacus(cls, **kw):
        def f(q, s, t):
            a = cls()
            a.history = [(s, q, t)]
            return a.get_epsilon(DELTA, **kw)
        return f

    def prv(q, s, t):
        a = PRVAccountant(prvs=PoissonSubsampledGaussianMechanism(noise_multiplier=s, sampling_probability=q),
                          max_self_compositions=t, eps_error=0.01, delta_error=1e-10)
        lo, est, up = a.compute_epsilon(delta=DELTA, num_self_compositions=[t])
        return (est, up)

    def autodp(q, s, t):
        return NoisySGD_Mechanism(prob=q, sigma=s, niter=t).get_approxDP(DELTA)

    def opendp(q, s, t):
        if q != 1:
            return None
        import opendp.prelude as dp
        dp.enable_features("contrib")
        space = dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.l2_distance(T=float)
        m = dp.c.make_composition([dp.m.make_gaussian(*space, scale=s)] * t)
        curve = dp.c.make_zCDP_to_approxDP(m).map(1.0)
        return curve.epsilon(DELTA)

    libs = {
        "dp_accounting RDP": dpa_rdp_eps, "dp_accounting PLD": dpa_pld_eps,
        "opacus RDP": opacus(RDPAccountant), "opacus PRV": opacus(OpPRV), "opacus GDP": opacus(GaussianAccountant),
        "prv_accountant": prv, "autodp RDP": autodp, "opendp zCDP": opendp,
    }
    assert list(libs) == LIBS
    return libs


def versions():
    import importlib.metadata as md
    return {p: md.version(p) for p in ("dp-accounting", "opacus", "prv-accountant", "autodp", "opendp", "torch")}


def fmt(v):
    if v is None:
        return "n/a"
    if isinstance(v, str):
        return v
    if isinstance(v, tuple):
        return f"{v[0]:.4f} (up {v[1]:.4f})"
    return f"{v:.4f}"


def check(row, res):
    """The agreement checks of the module docstring; returns a list of problems (dpcert against a
    peer). A library that raises is recorded in the table, not counted here."""
    bad = []
    rdp, rdp_op, lo, up = row["dpcert RDP"], row["dpcert RDP (opacus orders)"], row["dpcert PLD lo"], row["dpcert PLD up"]
    v = res.get("opacus RDP")  # the same orders and conversion: equal up to rounding
    if isinstance(v, float) and abs(v - rdp_op) > 1e-6 * rdp_op:
        bad.append(f"opacus RDP {v:.9g} vs dpcert RDP {rdp_op:.9g} on Opacus's orders")
    v = res.get("dp_accounting RDP")  # its orders; never below ours (it drops orders it cannot evaluate)
    if isinstance(v, float) and v < rdp * (1 - 1e-6):
        bad.append(f"dp_accounting RDP {v:.9g} below dpcert RDP {rdp:.9g} on the same orders")
    for name in ("autodp RDP", "opendp zCDP"):  # other bounds: valid, i.e. not below dpcert's rigorous lower bound
        v = res.get(name)
        if isinstance(v, float) and v < lo - 1e-9:
            bad.append(f"{name} {v:.6g} below dpcert's PLD lower bound {lo:.6g}")
    v = res.get("dp_accounting PLD")  # its own discretisation (value_discretization_interval 1e-4)
    if isinstance(v, float) and not (lo - 1e-3 - 1e-9 <= v <= up + 1e-3 + 1e-9):
        bad.append(f"dp_accounting PLD {v:.6g} outside dpcert PLD [{lo:.6g}, {up:.6g}] +- 1e-3")
    v = res.get("opacus PRV")  # its upper bound: estimate + eps_error 0.01 + its discretisation
    if isinstance(v, float) and not (lo - 1e-9 <= v <= up + 0.02 + 1e-9):
        bad.append(f"opacus PRV {v:.6g} outside [dpcert PLD lower {lo:.6g}, upper {up:.6g} + 2 eps_error]")
    v = res.get("prv_accountant")
    if isinstance(v, (tuple, list)):
        if not (lo - 0.01 - 1e-9 <= v[0] <= up + 0.01 + 1e-9):
            msg = f"prv_accountant estimate {v[0]:.6g} outside dpcert PLD [{lo:.6g}, {up:.6g}] +- 0.01"
            w = res.get("dp_accounting PLD")  # a second, independent PLD estimate breaks the tie
            if isinstance(w, float) and lo - 1e-3 - 1e-9 <= w <= up + 1e-3 + 1e-9:
                msg = "peer: " + msg + f" (dp_accounting PLD {w:.6g} agrees with dpcert: prv_accountant's own error)"
            bad.append(msg)
        if v[1] < lo - 1e-9:
            bad.append(f"prv_accountant upper bound {v[1]:.6g} below dpcert's PLD lower bound {lo:.6g}")
    return bad


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dpcert", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--from-json", help="re-check and re-write the table of an earlier run's JSON")
    a = ap.parse_args()
    if a.from_json:
        return report(a.out, json.load(open(a.from_json)))
    libs = peers()
    rows, times = [], {}
    for q, s, t in GRID:
        row = {"q": q, "sigma": s, "T": t}
        r, dt = timed(lambda: dpcert(a.dpcert, q, s, t, "--accountant", "rdp"))
        times.setdefault("dpcert RDP", []).append(dt)
        row["dpcert RDP"] = r["rdp"]["epsilon"]
        r, _ = timed(lambda: dpcert(a.dpcert, q, s, t, "--accountant", "rdp", "--orders", "opacus"))
        row["dpcert RDP (opacus orders)"] = r["rdp"]["epsilon"]
        r, dt = timed(lambda: dpcert(a.dpcert, q, s, t, "--accountant", "pld"))
        times.setdefault("dpcert PLD", []).append(dt)
        row["dpcert PLD lo"], row["dpcert PLD up"] = r["pld"]["epsilon_lower"], r["pld"]["epsilon_upper"]
        res = {}
        for name, f in libs.items():
            v, dt = timed(lambda: f(q, s, t))
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                v = float(v)
            res[name] = v
            if v is not None and not isinstance(v, str):
                times.setdefault(name, []).append(dt)
        row.update(res)
        rows.append(row)
        with open(a.out.rsplit(".", 1)[0] + ".partial.json", "w") as f:  # progress survives an interrupted run
            json.dump({"rows": rows}, f, default=str)
        print(f"accountants: q {q} sigma {s} T {t}: dpcert RDP {row['dpcert RDP']:.4f} PLD "
              f"[{row['dpcert PLD lo']:.4f}, {row['dpcert PLD up']:.4f}]; " +
              "; ".join(f"{k} {fmt(v)}" for k, v in res.items()), flush=True)
    run = {"versions": versions(), "delta": DELTA, "libraries": list(libs), "rows": rows,
           "seconds_per_query": {k: {"mean": sum(v) / len(v), "max": max(v), "n": len(v)} for k, v in times.items()}}
    with open(a.out.rsplit(".", 1)[0] + ".json", "w") as f:
        json.dump(run, f, indent=1, default=str)
    return report(a.out, run)


def report(out, run):
    """Checks every row, writes the markdown table; 1 when dpcert disagrees with a peer."""
    run.setdefault("libraries", LIBS)
    problems, peer_off = [], []
    for row in run["rows"]:
        res = {k: (tuple(v) if isinstance(v, list) else v) for k, v in row.items() if k in run["libraries"]}
        for b in check(row, res):
            (peer_off if b.startswith("peer: ") else problems).append(
                f"q {row['q']} sigma {row['sigma']} T {row['T']}: {b.removeprefix('peer: ')}")
    errors = [f"q {row['q']} sigma {row['sigma']} T {row['T']}: {k}: {v}" for row in run["rows"]
              for k, v in row.items() if isinstance(v, str) and v.startswith("error")]
    cols = ["dpcert RDP", "dpcert PLD lo", "dpcert PLD up"] + run["libraries"]
    with open(out, "w") as f:
        f.write(f"versions: {json.dumps(run.get('versions', {}))}; delta {run.get('delta', DELTA)}\n\n")
        f.write("| q | sigma | T | " + " | ".join(cols) + " |\n|" + "---|" * (3 + len(cols)) + "\n")
        for row in run["rows"]:
            f.write(f"| {row['q']} | {row['sigma']} | {row['T']} | " +
                    " | ".join(fmt(tuple(v) if isinstance(v, list) else v) for v in (row.get(c) for c in cols)) + " |\n")
        f.write("\n| accountant | queries | mean s/query | max s/query |\n|---|---|---|---|\n")
        for k, v in run.get("seconds_per_query", {}).items():
            f.write(f"| {k} | {v['n']} | {v['mean']:.4f} | {v['max']:.4f} |\n")
        f.write("\nlibrary errors: " + ("none" if not errors else "\n" + "\n".join("- " + e for e in errors)) + "\n")
        f.write("\npeers outside their own stated error (another peer agrees with dpcert): " +
                ("none" if not peer_off else "\n" + "\n".join("- " + p for p in peer_off)) + "\n")
        f.write("\nproblems: " + ("none" if not problems else "\n" + "\n".join("- " + p for p in problems)) + "\n")
    for p in problems:
        print("accountants: DISAGREE:", p)
    print(f"accountants: {len(run['rows'])} grid points, {len(errors)} library errors, {len(problems)} disagreements; "
          f"table in {out}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
