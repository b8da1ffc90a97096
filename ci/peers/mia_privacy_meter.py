#!/usr/bin/env python3
"""`dpcert mia` beside ML Privacy Meter (`privacy-meter` 1.0.1 on PyPI) on the same target models
and the same member/non-member split (docs/audits.md "Peer: ML Privacy Meter").

    python ci/peers/mia_privacy_meter.py --dpcert build/dpcert --work DIR --out FILE.md   (make test-peers)

1. `dpcert mia --noise-key 3 --signals DIR/signals.safetensors --report DIR/report` trains the
   runs of docs/audits.md §3 (non-DP control, DP-SGD at epsilon 1 and 8, DP-ZO at 8; R = 8 models
   each, every example a member of exactly R/2) and writes every model's loss on every example
   and the membership bits; report.json holds dpcert's own attack statistics.
2. Privacy Meter's reference attack (`privacy_meter.metric.ReferenceMetric` with
   `hypothesis_test.linear_itp_threshold_func` at its default FPR grid `logspace(-5, 0, 100)`)
   runs on exactly those models: each model is the target in turn (its members = its "train"
   split, its non-members = "test"), the other R - 1 models are the reference models, and the
   models are privacy_meter `Model`s whose `get_loss` returns the loss dpcert computed for that
   model and example (the signals are identical; only the attacks differ). Its predictions are
   pooled over the R targets, as dpcert pools its scores: TPR and FPR at each threshold of its
   grid, AUC by the trapezoid rule over them (sklearn's `auc`, as its CombinedMetricResult), TPR
   at the largest pooled FPR <= 1e-3 and <= 1e-2.
Exit 1 when either tool fails to run or when the non-DP control's AUCs disagree on whether it
leaks (both must exceed 0.5 by the Hanley-McNeil 99.9 % margin of dpcert's report).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "conformance", "adapters", "python"))
from dpcert_adapter import load_file  # noqa: E402

FPRS = (1e-3, 1e-2)


def privacy_meter_reference(loss, member):
    """Pooled (fpr[], tpr[]) of Privacy Meter's reference attack; loss [R, P], member [R, P]."""
    from sklearn.metrics import auc
    from privacy_meter.dataset import Dataset
    from privacy_meter.hypothesis_test import linear_itp_threshold_func
    from privacy_meter.information_source import InformationSource
    from privacy_meter.information_source_signal import ModelLoss
    from privacy_meter.metric import ReferenceMetric
    from privacy_meter.model import Model

    class Precomputed(Model):
        """A trained dpcert model seen through its losses: the input feature is the example's index."""

        def __init__(self, losses):
            super().__init__(model_obj=None, loss_fn=None)
            self.losses = losses

        def get_loss(self, batch_samples, batch_labels, per_point=True):
            return self.losses[np.asarray(batch_samples, dtype=np.int64)]

        def get_logits(self, batch_samples):
            raise NotImplementedError

        def get_grad(self, batch_samples, batch_labels):
            raise NotImplementedError

        def get_intermediate_outputs(self, layers, batch_samples, forward_pass=True):
            raise NotImplementedError

    R, P = loss.shape
    tp = fp = None
    npos = nneg = 0
    for t in range(R):
        idx = np.arange(P)
        ds = Dataset(data_dict={"train": {"x": idx[member[t] == 1], "y": np.zeros(int(member[t].sum()))},
                                "test": {"x": idx[member[t] == 0], "y": np.zeros(int((member[t] == 0).sum()))}},
                     default_input="x", default_output="y")
        target = InformationSource(models=[Precomputed(loss[t])], datasets=[ds])
        refs = InformationSource(models=[Precomputed(loss[s]) for s in range(R) if s != t], datasets=[ds])
        with tempfile.TemporaryDirectory() as logs:  # Privacy Meter caches signals by file name: one dir per target
            m = ReferenceMetric(target_info_source=target, reference_info_source=refs, signals=[ModelLoss()],
                                hypothesis_test_func=linear_itp_threshold_func, logs_dirname=logs)
            m.prepare_metric()
            r = m.run_metric()[0]
        tp = r.tp if tp is None else tp + r.tp
        fp = r.fp if fp is None else fp + r.fp
        npos += int(member[t].sum())
        nneg += int((member[t] == 0).sum())
    fpr, tpr = fp / nneg, tp / npos
    order = np.lexsort((tpr, fpr))
    a = float(auc(fpr[order], tpr[order]))
    at = {f: float(max([tpr[i] for i in range(len(fpr)) if fpr[i] <= f], default=0.0)) for f in FPRS}
    return a, at


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dpcert", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--noise-key", default="3")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    sig = os.path.join(a.work, "signals.safetensors")
    cmd = [a.dpcert, "mia", "--noise-key", a.noise_key, "--quiet", "--signals", sig, "--report", os.path.join(a.work, "report")]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        print(f"mia-peer: {' '.join(cmd)} exited {p.returncode}:\n{p.stdout[-2000:]}{p.stderr[-2000:]}")
        return 1
    t, meta = load_file(sig)
    rep = json.load(open(os.path.join(a.work, "report", "report.json")))
    runs = meta["runs"].split(";")
    import importlib.metadata as md
    lines = [f"`{' '.join(cmd[1:])}`; privacy-meter {md.version('privacy-meter')}; "
             f"{t['loss'].shape[1]} models x {t['loss'].shape[2]} examples per run\n",
             "| run | epsilon | tool / attack | AUC | TPR at FPR 1e-3 | TPR at FPR 1e-2 |", "|---|---|---|---|---|---|"]
    bad = []
    for k, run in enumerate(runs):
        kind, eps = run.split(":")
        rr = rep["runs"][k]
        for name, at in rr["attacks"].items():
            pts = {pt["fpr_target"]: pt["tpr"] for pt in at["at_fpr"]}
            lines.append(f"| {kind} | {float(eps):.4g} | dpcert {name} | {at['auc']:.4f} +- {at['auc_se']:.4f} | "
                         f"{pts.get(1e-3, float('nan')):.4f} | {pts.get(1e-2, float('nan')):.4f} |")
        auc_pm, at_pm = privacy_meter_reference(t["loss"][k], t["member"])
        lines.append(f"| {kind} | {float(eps):.4g} | privacy-meter reference | {auc_pm:.4f} | {at_pm[1e-3]:.4f} | "
                     f"{at_pm[1e-2]:.4f} |")
        print(f"mia-peer: {kind} eps {float(eps):.4g}: dpcert AUCs " +
              ", ".join(f"{n} {x['auc']:.4f}" for n, x in rr["attacks"].items()) +
              f"; privacy-meter reference AUC {auc_pm:.4f}, TPR@1e-3 {at_pm[1e-3]:.4f}", flush=True)
        if kind == "non-dp":
            se = max(x["auc_se"] for x in rr["attacks"].values())
            if not (auc_pm > 0.5 + 3.29 * se and max(x["auc"] for x in rr["attacks"].values()) > 0.5 + 3.29 * se):
                bad.append(f"the non-DP control: privacy-meter AUC {auc_pm:.4f}, dpcert's best "
                           f"{max(x['auc'] for x in rr['attacks'].values()):.4f}: not both leaking")
    with open(a.out, "w") as f:
        f.write("\n".join(lines) + "\n\nproblems: " + ("none" if not bad else "; ".join(bad)) + "\n")
    print(f"mia-peer: table in {a.out}" + ("" if not bad else "; " + "; ".join(bad)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
