#!/usr/bin/env python3
"""ci/peers/llama_peers.py — dpcert's llama (docs/models.md) in PyTorch, timed per
training step as non-private SGD, Opacus DP-SGD with hooks (per-sample gradients
instantiated) and Opacus ghost clipping; the PyTorch side of `make bench-peers`
(ci/peers/bench-peers.sh, docs/performance.md). Self-contained on purpose (the
certification adapters live elsewhere).

One configuration per process, so that the peak RSS is that configuration's:
  llama_peers.py --mode nondp|opacus-hooks|opacus-ghost --dtype f32|f64|bf16 --threads N [--device cpu|cuda]
                 --dim D --layers L --seq T --batch B [--ffn F --heads H --vocab V]
                 [--warmup W --reps R]
prints one line "RESULT tool=pytorch mode=... median_s=... peak_rss_mb=... base_rss_mb=..."
(base_rss_mb: the resident set after importing torch, before the model: the baseline
the memory goals subtract).

The step: the batch is B fixed examples (random tokens, seed 0), per-example loss =
mean over positions t < T-1 of CE(logits_t, x_{t+1}); DP modes: flat clipping C = 1,
noise multiplier 1, SGD lr 0.1 (the dpcert side uses the same). Timing: wall clock of
zero_grad + forward + backward + optimizer step, median of R steps after W warm-up.
With --device cuda (the GPU run, ci/peers/gpu_step.sh) each step is timed with CUDA events
and the peak is torch.cuda.max_memory_allocated (printed as peak_dev_mb); bf16 is the
parameters' and activations' dtype (a bf16 step as the peers run it, no f32 master copy).
"""
import argparse
import math
import resource
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Attention(nn.Module):
    def __init__(self, D, H, T, theta=10000.0):
        super().__init__()
        self.H, self.hd = H, D // H
        self.wq = nn.Linear(D, D, bias=False)
        self.wk = nn.Linear(D, D, bias=False)
        self.wv = nn.Linear(D, D, bias=False)
        self.wo = nn.Linear(D, D, bias=False)
        i = torch.arange(self.hd // 2, dtype=torch.float64)
        t = torch.arange(T, dtype=torch.float64)
        ang = t[:, None] * torch.pow(torch.tensor(theta, dtype=torch.float64), -2.0 * i / self.hd)[None, :]
        self.register_buffer("cos", torch.cos(ang), persistent=False)  # [T, hd/2]
        self.register_buffer("sin", torch.sin(ang), persistent=False)
        self.register_buffer("mask", torch.triu(torch.ones(T, T, dtype=torch.bool), 1), persistent=False)

    def rope(self, x):  # x [B, T, H, hd]; pairs (2i, 2i+1) rotated by t theta^(-2i/hd)
        B, T, H, hd = x.shape
        x2 = x.reshape(B, T, H, hd // 2, 2)
        x0, x1 = x2[..., 0], x2[..., 1]
        c = self.cos[:T, None, :].to(x.dtype)
        s = self.sin[:T, None, :].to(x.dtype)
        return torch.stack((x0 * c - x1 * s, x0 * s + x1 * c), dim=-1).reshape(B, T, H, hd)

    def forward(self, a):
        B, T, D = a.shape
        q = self.rope(self.wq(a).view(B, T, self.H, self.hd)).transpose(1, 2)
        k = self.rope(self.wk(a).view(B, T, self.H, self.hd)).transpose(1, 2)
        v = self.wv(a).view(B, T, self.H, self.hd).transpose(1, 2)
        s = (q @ k.transpose(-1, -2)) / math.sqrt(self.hd)
        s = s.masked_fill(self.mask[:T, :T], float("-inf"))
        o = torch.softmax(s, dim=-1) @ v
        return self.wo(o.transpose(1, 2).reshape(B, T, D))


class Block(nn.Module):
    def __init__(self, D, H, Fd, T):
        super().__init__()
        self.attn_norm = nn.RMSNorm(D, eps=1e-5)
        self.attn = Attention(D, H, T)
        self.mlp_norm = nn.RMSNorm(D, eps=1e-5)
        self.w_gate = nn.Linear(D, Fd, bias=False)
        self.w_up = nn.Linear(D, Fd, bias=False)
        self.w_down = nn.Linear(Fd, D, bias=False)

    def forward(self, h):
        h = h + self.attn(self.attn_norm(h))
        m = self.mlp_norm(h)
        return h + self.w_down(F.silu(self.w_gate(m)) * self.w_up(m))


class Llama(nn.Module):
    def __init__(self, V, D, L, H, Fd, T):
        super().__init__()
        self.tok_emb = nn.Embedding(V, D)
        self.layers = nn.ModuleList([Block(D, H, Fd, T) for _ in range(L)])
        self.final_norm = nn.RMSNorm(D, eps=1e-5)
        self.lm_head = nn.Linear(D, V, bias=False)

    def forward(self, x):
        h = self.tok_emb(x)
        for blk in self.layers:
            h = blk(h)
        return self.lm_head(self.final_norm(h))


def rss_now_mb():
    """the process's resident set now (VmRSS), MB; 0 if /proc is unreadable"""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return float(line.split()[1]) / 1024.0
    except OSError:
        pass
    return 0.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", required=True, choices=["nondp", "opacus-hooks", "opacus-ghost"])
    ap.add_argument("--dtype", default="f32", choices=["f32", "f64", "bf16"])
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--ffn", type=int, default=0)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=64)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    if a.mode != "nondp":
        import opacus  # noqa: F401  (loaded before the baseline, as torch is)
    base_rss = rss_now_mb()  # the interpreter, torch (and opacus) loaded, before the run's memory
    Fd = a.ffn if a.ffn > 0 else 2 * a.dim
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    dtype = {"f64": torch.float64, "f32": torch.float32, "bf16": torch.bfloat16}[a.dtype]
    dev = torch.device(a.device)
    model = Llama(a.vocab, a.dim, a.layers, a.heads, Fd, a.seq).to(device=dev, dtype=dtype)
    x = torch.randint(0, a.vocab, (a.batch, a.seq)).to(dev)
    inp, tgt = x, x[:, 1:].reshape(-1)
    crit = nn.CrossEntropyLoss(reduction="mean")
    sgd = torch.optim.SGD(model.parameters(), lr=0.1)

    def logits_of(m):
        return m(inp)[:, :-1, :]  # positions t < T-1 predict x_{t+1}

    if a.mode == "nondp":
        opt = sgd

        def step():
            opt.zero_grad(set_to_none=True)
            z = logits_of(model)
            crit(z.reshape(-1, a.vocab), tgt).backward()
            opt.step()
    elif a.mode == "opacus-hooks":
        from opacus import GradSampleModule
        from opacus.optimizers import DPOptimizer
        gsm = GradSampleModule(model, loss_reduction="mean")
        opt = DPOptimizer(sgd, noise_multiplier=1.0, max_grad_norm=1.0, expected_batch_size=a.batch,
                          loss_reduction="mean")

        def step():
            opt.zero_grad(set_to_none=True)
            z = logits_of(gsm)
            crit(z.reshape(-1, a.vocab), tgt).backward()
            opt.step()
    else:
        from opacus.grad_sample.grad_sample_module_fast_gradient_clipping import (
            GradSampleModuleFastGradientClipping)
        from opacus.optimizers import DPOptimizerFastGradientClipping
        from opacus.utils.fast_gradient_clipping_utils import DPLossFastGradientClipping
        gsm = GradSampleModuleFastGradientClipping(model, max_grad_norm=1.0, use_ghost_clipping=True,
                                                   loss_reduction="mean")
        opt = DPOptimizerFastGradientClipping(sgd, noise_multiplier=1.0, max_grad_norm=1.0,
                                              expected_batch_size=a.batch, loss_reduction="mean")
        dploss = DPLossFastGradientClipping(gsm, opt, crit, loss_reduction="mean")

        def step():
            opt.zero_grad(set_to_none=True)
            z = logits_of(gsm)
            dploss(z.reshape(-1, a.vocab), tgt, shape=(a.batch, a.seq - 1)).backward()
            opt.step()

    times, cpus = [], []
    cuda = a.device == "cuda"
    for r in range(a.warmup + a.reps):
        if cuda:
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
        t0, c0 = time.perf_counter(), time.process_time()
        step()
        if cuda:
            e1.record()
            torch.cuda.synchronize()
        t1, c1 = time.perf_counter(), time.process_time()
        if r >= a.warmup:
            times.append(e0.elapsed_time(e1) / 1000.0 if cuda else t1 - t0)
            cpus.append(c1 - c0)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    dev_mb = f" peak_dev_mb={torch.cuda.max_memory_allocated() / 2**20:.1f} device={torch.cuda.get_device_name()}" if cuda else ""
    print(f"RESULT tool=pytorch strategy={a.mode} dtype={a.dtype} threads={a.threads} D={a.dim} L={a.layers} "
          f"T={a.seq} B={a.batch} F={Fd} H={a.heads} V={a.vocab} reps={a.reps} "
          f"median_s={statistics.median(times):.6f} min_s={min(times):.6f} max_s={max(times):.6f} "
          f"cpu_s={statistics.median(cpus):.6f} peak_rss_mb={rss:.1f} base_rss_mb={base_rss:.1f}{dev_mb} "
          f"torch={torch.__version__} opacus={__import__('opacus').__version__ if a.mode != 'nondp' else '-'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
