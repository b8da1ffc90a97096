"""PyTorch modules of dpcert's models, built from docs/models.md (imports torch lazily).

    from dpcert_adapter.torch_models import from_vector
    model = from_vector(vector)          # float64, parameters loaded from params.*
    losses = model.per_example_loss(batch)   # [B]

Parameter names follow dpcert's canonical names through `dpcert_name(module_param_name)`.
"""
import math

import numpy as np
import torch
from torch import nn


class MLP(nn.Module):
    """h_{i+1} = tanh(W_i h_i + b_i); logits = W_nh h_nh + b_nh; loss = logsumexp(z) - z[y]."""

    def __init__(self, nin, hidden, classes):
        super().__init__()
        dims = [nin] + list(hidden) + [classes]
        self.layers = nn.ModuleList(nn.Linear(dims[i], dims[i + 1]) for i in range(len(dims) - 1))

    def forward(self, x):
        for i, lin in enumerate(self.layers):
            x = lin(x)
            if i < len(self.layers) - 1:
                x = torch.tanh(x)
        return x

    def per_example_loss(self, batch):
        z = self(batch["x"])
        return torch.logsumexp(z, dim=1) - z.gather(1, batch["y"].long().view(-1, 1))[:, 0]


class RMSNorm(nn.Module):
    def __init__(self, d, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, v):
        r = 1.0 / torch.sqrt((v * v).sum(-1, keepdim=True) / v.shape[-1] + self.eps)
        return v * r * self.weight


class Block(nn.Module):
    def __init__(self, D, H, F, eps, theta):
        super().__init__()
        self.attn_norm = RMSNorm(D, eps)
        self.wq, self.wk, self.wv, self.wo = (nn.Linear(D, D, bias=False) for _ in range(4))
        self.mlp_norm = RMSNorm(D, eps)
        self.w_gate, self.w_up = nn.Linear(D, F, bias=False), nn.Linear(D, F, bias=False)
        self.w_down = nn.Linear(F, D, bias=False)
        self.H, self.theta = H, theta

    def rotary(self, u, T, hd):  # u [B, H, T, hd]
        i = torch.arange(hd // 2, dtype=u.dtype, device=u.device)
        t = torch.arange(T, dtype=u.dtype, device=u.device)
        ang = t[:, None] * torch.pow(torch.tensor(self.theta, dtype=u.dtype), -2.0 * i / hd)[None, :]
        c, s = torch.cos(ang), torch.sin(ang)
        u0, u1 = u[..., 0::2], u[..., 1::2]
        out = torch.empty_like(u)
        out[..., 0::2] = u0 * c - u1 * s
        out[..., 1::2] = u0 * s + u1 * c
        return out

    def forward(self, h):  # [B, T, D]
        B, T, D = h.shape
        hd = D // self.H
        a = self.attn_norm(h)
        q, k, v = (w(a).view(B, T, self.H, hd).transpose(1, 2) for w in (self.wq, self.wk, self.wv))
        q, k = self.rotary(q, T, hd), self.rotary(k, T, hd)
        s = q @ k.transpose(-1, -2) / math.sqrt(hd)
        mask = torch.ones(T, T, dtype=torch.bool, device=h.device).tril()
        s = s.masked_fill(~mask, float("-inf"))
        o = (torch.softmax(s, dim=-1) @ v).transpose(1, 2).reshape(B, T, D)
        h = h + self.wo(o)
        m = self.mlp_norm(h)
        g = self.w_gate(m)
        return h + self.w_down(g / (1 + torch.exp(-g)) * self.w_up(m))


class Llama(nn.Module):
    def __init__(self, V, D, L, H, F, tied, eps=1e-5, theta=10000.0):
        super().__init__()
        self.tok_emb = nn.Embedding(V, D)
        self.layers = nn.ModuleList(Block(D, H, F, eps, theta) for _ in range(L))
        self.final_norm = RMSNorm(D, eps)
        self.tied = tied
        self.lm_head = None if tied else nn.Linear(D, V, bias=False)

    def forward(self, tokens):
        h = self.tok_emb(tokens.long())
        for blk in self.layers:
            h = blk(h)
        h = self.final_norm(h)
        return h @ self.tok_emb.weight.T if self.tied else self.lm_head(h)

    def per_example_loss(self, batch):
        tok = batch["tokens"].long()
        z = self(tok)[:, :-1, :]
        nll = torch.logsumexp(z, dim=-1) - z.gather(-1, tok[:, 1:, None])[..., 0]
        return nll.mean(dim=1)


def dpcert_name(name):
    """torch parameter name -> dpcert canonical name."""
    n = name.replace("layers.", "layers.", 1)
    for a, b in ((".attn_norm.weight", ".attn_norm"), (".mlp_norm.weight", ".mlp_norm"), ("final_norm.weight", "final_norm"),
                 ("tok_emb.weight", "tok_emb"), ("lm_head.weight", "lm_head")):
        n = n.replace(a, b)
    for w in ("wq", "wk", "wv", "wo", "w_gate", "w_up", "w_down"):
        n = n.replace(f".{w}.weight", f".{w}")
    return n


def from_vector(v, dtype=torch.float64):
    """The vector's model with its parameters loaded."""
    m = v.meta
    if m["model"] == "mlp":
        nin, hidden, classes = v.mlp_sizes()
        model = MLP(nin, hidden, classes)
    else:
        model = Llama(int(m["vocab"]), int(m["dim"]), int(m["layers"]), int(m["heads"]), int(m["ffn"]),
                      m.get("tied", "0") == "1", float(m.get("norm_eps", 1e-5)), float(m.get("rope_theta", 1e4)))
    model = model.to(dtype)
    with torch.no_grad():
        for name, p in model.named_parameters():
            src = v.params[dpcert_name(name)]
            p.copy_(torch.from_numpy(np.ascontiguousarray(src)).to(dtype).view_as(p))
    return model
