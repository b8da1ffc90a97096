"""dpcert's llama (docs/models.md "Llama") in plain numpy: per-example losses and exact
per-example gradients by a hand-written backward pass (reverse mode of the definitions in
docs/models.md), for numpy_candidate.py. float64 throughout."""
import numpy as np


def _rms_fwd(v, g, eps):
    r = 1.0 / np.sqrt(np.sum(v * v, axis=-1, keepdims=True) / v.shape[-1] + eps)
    return v * r * g, r


def _rms_bwd(da, v, r, g):
    """a = v r g, r = (mean(v^2) + eps)^-1/2: returns (dv, dg)."""
    D = v.shape[-1]
    dg = np.sum(da * v * r, axis=0)
    gd = g * da
    dv = r * gd - v * (r ** 3) * np.sum(gd * v, axis=-1, keepdims=True) / D
    return dv, dg


def _rope_tables(T, hd, theta):
    i = np.arange(hd // 2)
    ang = np.arange(T)[:, None] * np.power(theta, -2.0 * i / hd)[None, :]  # [T, hd/2]
    return np.cos(ang), np.sin(ang)


def _rope(x, c, s, H, hd, inverse=False):
    """x [T, D]; rotates the column pairs (2i, 2i+1) of every head by the position's angle
    (inverse: by minus the angle, the transpose, for the backward pass)."""
    T = x.shape[0]
    y = x.reshape(T, H, hd // 2, 2)
    u0, u1 = y[..., 0], y[..., 1]
    cc, ss = c[:, None, :], (-s if inverse else s)[:, None, :]
    out = np.stack((u0 * cc - u1 * ss, u0 * ss + u1 * cc), axis=-1)
    return out.reshape(T, H * hd)


class Llama:
    def __init__(self, meta, params):
        self.V, self.D, self.L = int(meta["vocab"]), int(meta["dim"]), int(meta["layers"])
        self.H, self.F, self.T = int(meta["heads"]), int(meta["ffn"]), int(meta["seq"])
        self.tied = meta.get("tied", "0") == "1"
        self.eps, self.theta = float(meta["norm_eps"]), float(meta["rope_theta"])
        self.hd = self.D // self.H
        self.p = params
        self.cos, self.sin = _rope_tables(self.T, self.hd, self.theta)

    def _attn_fwd(self, q, k, v):
        H, hd, T = self.H, self.hd, q.shape[0]
        qh, kh, vh = (x.reshape(T, H, hd).transpose(1, 0, 2) for x in (q, k, v))  # [H, T, hd]
        s = qh @ kh.transpose(0, 2, 1) / np.sqrt(hd)
        mask = np.tril(np.ones((T, T), dtype=bool))
        s = np.where(mask, s, -np.inf)
        s = s - np.max(s, axis=-1, keepdims=True)
        e = np.exp(s)
        P = e / np.sum(e, axis=-1, keepdims=True)
        o = (P @ vh).transpose(1, 0, 2).reshape(T, H * hd)
        return o, (qh, kh, vh, P)

    def _attn_bwd(self, do, cache):
        qh, kh, vh, P = cache
        H, hd, T = self.H, self.hd, do.shape[0]
        doh = do.reshape(T, H, hd).transpose(1, 0, 2)
        dP = doh @ vh.transpose(0, 2, 1)
        dvh = P.transpose(0, 2, 1) @ doh
        dS = P * (dP - np.sum(dP * P, axis=-1, keepdims=True)) / np.sqrt(hd)
        dqh = dS @ kh
        dkh = dS.transpose(0, 2, 1) @ qh
        back = lambda x: x.transpose(1, 0, 2).reshape(T, H * hd)  # noqa: E731
        return back(dqh), back(dkh), back(dvh)

    def loss_grad(self, x, grad=True):
        """Loss of one example (tokens x [T]) and its gradients {name: array}."""
        p, T, eps = self.p, x.shape[0], self.eps
        W = p["tok_emb"] if self.tied else p["lm_head"]
        h = p["tok_emb"][x].copy()
        caches = []
        for l in range(self.L):
            pre = f"layers.{l}."
            h_in = h
            a, r1 = _rms_fwd(h_in, p[pre + "attn_norm"], eps)
            q0, k0, v = a @ p[pre + "wq"].T, a @ p[pre + "wk"].T, a @ p[pre + "wv"].T
            q = _rope(q0, self.cos, self.sin, self.H, self.hd)
            k = _rope(k0, self.cos, self.sin, self.H, self.hd)
            o, ac = self._attn_fwd(q, k, v)
            h_mid = h_in + o @ p[pre + "wo"].T
            m, r2 = _rms_fwd(h_mid, p[pre + "mlp_norm"], eps)
            gt, up = m @ p[pre + "w_gate"].T, m @ p[pre + "w_up"].T
            sg = 1.0 / (1.0 + np.exp(-gt))
            act = gt * sg * up
            h = h_mid + act @ p[pre + "w_down"].T
            caches.append((h_in, a, r1, o, ac, h_mid, m, r2, gt, up, sg, act))
        f, r3 = _rms_fwd(h, p["final_norm"], eps)
        z = f @ W.T  # [T, V]
        zm = np.max(z, axis=1, keepdims=True)
        e = np.exp(z - zm)
        se = np.sum(e, axis=1, keepdims=True)
        lse = zm[:, 0] + np.log(se[:, 0])
        tgt = x[1:]
        loss = np.sum(lse[:-1] - z[np.arange(T - 1), tgt]) / (T - 1)
        if not grad:
            return loss, None
        g = {}
        dz = e / se
        dz[np.arange(T - 1), tgt] -= 1.0
        dz[T - 1] = 0.0
        dz /= (T - 1)
        dW = dz.T @ f
        df = dz @ W
        dh, g["final_norm"] = _rms_bwd(df, h, r3, p["final_norm"])
        for l in reversed(range(self.L)):
            pre = f"layers.{l}."
            h_in, a, r1, o, ac, h_mid, m, r2, gt, up, sg, act = caches[l]
            g[pre + "w_down"] = dh.T @ act
            dact = dh @ p[pre + "w_down"]
            dup = dact * gt * sg
            dgt = dact * up * sg * (1.0 + gt * (1.0 - sg))
            g[pre + "w_up"] = dup.T @ m
            g[pre + "w_gate"] = dgt.T @ m
            dm = dup @ p[pre + "w_up"] + dgt @ p[pre + "w_gate"]
            dv_, g[pre + "mlp_norm"] = _rms_bwd(dm, h_mid, r2, p[pre + "mlp_norm"])
            dh_mid = dh + dv_
            g[pre + "wo"] = dh_mid.T @ o
            do = dh_mid @ p[pre + "wo"]
            dq, dk, dvv = self._attn_bwd(do, ac)
            dq0 = _rope(dq, self.cos, self.sin, self.H, self.hd, inverse=True)
            dk0 = _rope(dk, self.cos, self.sin, self.H, self.hd, inverse=True)
            g[pre + "wq"], g[pre + "wk"], g[pre + "wv"] = dq0.T @ a, dk0.T @ a, dvv.T @ a
            da = dq0 @ p[pre + "wq"] + dk0 @ p[pre + "wk"] + dvv @ p[pre + "wv"]
            dv_, g[pre + "attn_norm"] = _rms_bwd(da, h_in, r1, p[pre + "attn_norm"])
            dh = dh_mid + dv_
        demb = dW.copy() if self.tied else np.zeros_like(p["tok_emb"])
        if not self.tied:
            g["lm_head"] = dW
        np.add.at(demb, x, dh)
        g["tok_emb"] = demb
        return loss, g


def per_example(v, params=None, grad=True):
    """Per-example losses [B] and gradients {name: [B, ...]} (canonical order of v.params)."""
    params = v.params if params is None else params
    model = Llama(v.meta, params)
    tok = v.batch["tokens"].astype(np.int64)
    B = tok.shape[0]
    loss = np.zeros(B)
    grads = {n: np.zeros((B,) + params[n].shape) for n in params} if grad else None
    with np.errstate(all="ignore"):
        for i in range(B):
            loss[i], g = model.loss_grad(tok[i], grad)
            if grad:
                for n in params:
                    grads[n][i] = g[n]
    return loss, grads
