"""dpcert's mlp and llama (docs/models.md) written once against a numpy-like array namespace.

    from dpcert_adapter.array_models import per_example_loss
    losses = per_example_loss(xp, v.meta, params, batch)     # [B]

`xp` is any module with numpy's names used below: `numpy`, `jax.numpy`, or TensorFlow's
`tf.experimental.numpy` (with numpy behaviour enabled). `params` maps dpcert's canonical names
to arrays of `xp` (docs/models.md shapes: a weight `[out, in]` maps x to `W x`); `batch` holds
`x` [B, in] and `y` [B] (mlp) or `tokens` [B, T] (llama). The JAX and TensorFlow adapters
differentiate this function with their own autodiff; the computation is the reference's
(docs/models.md), so `dpcert certify` compares their per-example norms and losses with it.
"""


def _logsumexp(xp, z):
    """logsumexp over the last axis, max-subtracted (docs/models.md)."""
    m = xp.max(z, axis=-1, keepdims=True)
    return m[..., 0] + xp.log(xp.sum(xp.exp(z - m), axis=-1))


def _nll(xp, z, y, classes):
    """logsumexp(z) - z[y] over the last axis; y integer labels of z's leading shape."""
    onehot = xp.asarray(xp.arange(classes)[None, ...] == xp.reshape(y, (-1, 1)), dtype=z.dtype)
    onehot = xp.reshape(onehot, tuple(z.shape[:-1]) + (classes,))
    return _logsumexp(xp, z) - xp.sum(z * onehot, axis=-1)


def mlp_loss(xp, meta, params, x, y):
    """h_{i+1} = tanh(W_i h_i + b_i); logits = W_nh h_nh + b_nh; loss = logsumexp(z) - z[y]."""
    nh = len([h for h in meta.get("hidden", "").split(",") if h])
    h = x
    for i in range(nh + 1):
        h = h @ xp.transpose(params[f"layers.{i}.weight"]) + params[f"layers.{i}.bias"]
        if i < nh:
            h = xp.tanh(h)
    return _nll(xp, h, y, int(meta["classes"]))


def _rmsnorm(xp, v, g, eps):
    r = 1.0 / xp.sqrt(xp.sum(v * v, axis=-1, keepdims=True) / v.shape[-1] + eps)
    return v * r * g


def _rotary(xp, u, theta):
    """u [B, H, T, hd]: pairs (2i, 2i+1) rotated by t theta^(-2i/hd)."""
    T, hd = u.shape[-2], u.shape[-1]
    i = xp.asarray(xp.arange(hd // 2), dtype=u.dtype)
    t = xp.asarray(xp.arange(T), dtype=u.dtype)
    ang = t[:, None] * xp.power(xp.asarray(theta, dtype=u.dtype), -2.0 * i / hd)[None, :]
    c, s = xp.cos(ang), xp.sin(ang)
    u0, u1 = u[..., 0::2], u[..., 1::2]
    return xp.reshape(xp.stack([u0 * c - u1 * s, u0 * s + u1 * c], axis=-1), tuple(u.shape))


def llama_loss(xp, meta, params, tokens):
    """The tiny llama of docs/models.md: mean next-token loss of each sequence, [B]."""
    D, L, H = int(meta["dim"]), int(meta["layers"]), int(meta["heads"])
    eps, theta = float(meta.get("norm_eps", 1e-5)), float(meta.get("rope_theta", 1e4))
    B, T = tokens.shape[0], tokens.shape[1]
    hd = D // H
    emb = params["tok_emb"]
    h = xp.take(emb, tokens, axis=0)                                   # [B, T, D]
    causal = xp.arange(T)[:, None] >= xp.arange(T)[None, :]           # [T, T]
    for l in range(L):
        p = lambda n: params[f"layers.{l}.{n}"]  # noqa: E731
        a = _rmsnorm(xp, h, p("attn_norm"), eps)
        q, k, v = (xp.transpose(xp.reshape(a @ xp.transpose(p(w)), (B, T, H, hd)), (0, 2, 1, 3)) for w in ("wq", "wk", "wv"))
        q, k = _rotary(xp, q, theta), _rotary(xp, k, theta)
        s = (q @ xp.transpose(k, (0, 1, 3, 2))) / (hd ** 0.5)           # [B, H, T, T]
        s = xp.where(causal, s, -float("inf"))
        e = xp.exp(s - xp.max(s, axis=-1, keepdims=True))
        o = (e / xp.sum(e, axis=-1, keepdims=True)) @ v                 # [B, H, T, hd]
        h = h + xp.reshape(xp.transpose(o, (0, 2, 1, 3)), (B, T, D)) @ xp.transpose(p("wo"))
        m = _rmsnorm(xp, h, p("mlp_norm"), eps)
        g = m @ xp.transpose(p("w_gate"))
        h = h + (g / (1.0 + xp.exp(-g)) * (m @ xp.transpose(p("w_up")))) @ xp.transpose(p("w_down"))
    h = _rmsnorm(xp, h, params["final_norm"], eps)
    head = params["tok_emb"] if meta.get("tied", "0") == "1" else params["lm_head"]
    z = (h @ xp.transpose(head))[:, :-1, :]                             # [B, T-1, V]
    return xp.mean(_nll(xp, z, tokens[:, 1:], int(meta["vocab"])), axis=-1)


def per_example_loss(xp, meta, params, batch):
    """The per-example losses [B] of the vector's model at `params` on `batch`."""
    if meta["model"] == "llama":
        return llama_loss(xp, meta, params, batch["tokens"])
    return mlp_loss(xp, meta, params, batch["x"], batch["y"])
