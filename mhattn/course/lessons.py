"""Small experiments the notebooks show: numbers behind the claims, computed once, here.

- :func:`dot_product_variance`: Var(q . k) grows like d_k; dividing by sqrt(d_k) brings it back to 1
  (Vaswani et al. 2017, §3.2.1, footnote 4).
- :func:`softmax_saturation`: unscaled scores make near one-hot weights and a near-zero softmax Jacobian.
- :func:`query_gradient_norms`: the gradient that actually reaches q, with and without 1/sqrt(d_k).
- :func:`naive_softmax`: exp without subtracting the row maximum, to show the overflow.
- :func:`softmax_backward_diagonal_only`: a deliberately wrong backward for the gradient-check demo.
- :func:`offset_mass`: how much weight each head puts at each cyclic offset (notebook 05).
- :func:`weights_bytes`, :func:`time_attention`: the cost of the ``(B, h, T, T)`` weights.
"""

from __future__ import annotations

import time

import numpy as np

from mhattn.backend import to_numpy
from mhattn.functional.attention import scaled_dot_product_attention_backward, scaled_dot_product_attention_forward
from mhattn.functional.softmax import SoftmaxCache, softmax_forward


def dot_product_variance(d_k_values, n: int = 20_000, seed: int = 0) -> list[dict]:
    """Sample variance of ``q . k`` and ``q . k / sqrt(d_k)`` for q, k with N(0, 1) entries.

    Returns:
        One dict per d_k: ``{"d_k", "var_raw", "var_scaled"}`` (theory: d_k and 1).
    """
    rng = np.random.default_rng(seed)
    rows = []
    for d_k in d_k_values:
        q, k = rng.standard_normal((n, d_k)), rng.standard_normal((n, d_k))
        dots = (q * k).sum(axis=1)  # (n,) one dot product per pair
        rows.append({"d_k": int(d_k), "var_raw": float(dots.var()), "var_scaled": float((dots / np.sqrt(d_k)).var())})
    return rows


def softmax_saturation(d_k: int, S: int = 16, n: int = 2_000, scaled: bool = True, seed: int = 0) -> dict:
    """How peaked the weights of one query over S random keys are, with or without 1/sqrt(d_k).

    Returns:
        ``{"max_weight"``: mean largest weight per row (1/S = flat, 1 = one-hot),
        ``"grad_norm"``: mean Frobenius norm of the softmax Jacobian ``diag(p) - p p^T``}.
    """
    rng = np.random.default_rng(seed)
    q, k = rng.standard_normal((n, 1, d_k)), rng.standard_normal((n, S, d_k))
    scores = (q @ k.swapaxes(-1, -2))[:, 0]  # (n, S)
    if scaled:
        scores = scores / np.sqrt(d_k)
    p, _ = softmax_forward(scores)
    jac = np.einsum("ns,st->nst", p, np.eye(S)) - p[:, :, None] * p[:, None, :]  # (n, S, S)
    return {"max_weight": float(p.max(axis=1).mean()), "grad_norm": float(np.linalg.norm(jac, axis=(1, 2)).mean())}


def query_gradient_norms(d_k: int, S: int = 16, n: int = 2_000, scaled: bool = True, seed: int = 0):
    """``||dL/dq||`` for n single queries over S random keys, with or without the 1/sqrt(d_k) scaling.

    q, k, v and the upstream gradient ``dout`` have N(0, 1) entries. The gradient reaching q is
    ``sum_s dscores_s k_s`` (times 1/sqrt(d_k) when scaled): the softmax Jacobian applied to
    ``dweights``, then multiplied by the keys. Unscaled attention is computed with mhattn's scaled
    attention on ``q * sqrt(d_k)`` (same scores), and the chain rule gives ``dq = sqrt(d_k) dq'``.

    Returns:
        float64 array ``(n,)``: one gradient norm per query.
    """
    rng = np.random.default_rng(seed)
    q, dout = rng.standard_normal((n, 1, 1, d_k)), rng.standard_normal((n, 1, 1, d_k))  # (B, h, T=1, d_k)
    k, v = rng.standard_normal((n, 1, S, d_k)), rng.standard_normal((n, 1, S, d_k))  # (B, h, S, d_k)
    c = 1.0 if scaled else np.sqrt(d_k)
    _, _, cache = scaled_dot_product_attention_forward(q * c, k, v)
    dq, _, _ = scaled_dot_product_attention_backward(dout, cache)  # (n, 1, 1, d_k)
    return np.linalg.norm((c * dq).reshape(n, d_k), axis=1)


def naive_softmax(scores):
    """``exp(s) / sum(exp(s))`` with no max subtraction: overflows to inf/inf = NaN for large scores.

    NumPy's overflow warnings are silenced here, so the NaN is the only sign of trouble.
    """
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.exp(scores)
        return e / e.sum(axis=-1, keepdims=True)


def softmax_backward_diagonal_only(dprobs, cache: SoftmaxCache):
    """WRONG on purpose: keeps only the Jacobian's diagonal ``p_i (1 - p_i)`` and drops ``-p_i p_j``."""
    p = cache.probs
    return p * (1 - p) * dprobs


def offset_mass(weights):
    """Mean attention weight of each head at each cyclic offset: query t on key (t - o) mod T.

    Args:
        weights: ``(B, h, T, T)`` per-head self-attention weights, of any array library (copied to the host).

    Returns:
        float64 ``(h, T)``: entry ``[i, o]`` is head i's mean weight on the key o places back.
    """
    w = to_numpy(weights).astype(np.float64)  # to the host: any library, any device
    T = w.shape[-1]
    t = np.arange(T)
    return np.stack([w[:, :, t, (t - o) % T].mean(axis=(0, 2)) for o in range(T)], axis=1)  # (h, T)


def weights_bytes(B: int, h: int, T: int, S: int | None = None, dtype="float32") -> int:
    """Bytes of the attention weights ``(B, h, T, S)``: the one tensor that grows like T^2."""
    S = T if S is None else S
    return int(B * h * T * S * np.dtype(dtype).itemsize)


def _synchronizer(x):
    """A function that waits until the device of ``x`` has finished its queued work (does nothing on a CPU).

    GPU libraries launch kernels asynchronously; each has its own way to wait: CuPy the array's
    ``cupy.cuda.Device.synchronize``, torch ``torch.cuda.synchronize`` for a CUDA tensor.
    """
    library = type(x).__module__.split(".")[0]
    if library == "cupy":
        return x.device.synchronize
    if library == "torch" and x.device.type == "cuda":
        import torch

        return lambda: torch.cuda.synchronize(x.device)
    return lambda: None


def time_attention(mha, x, repeats: int = 3) -> dict:
    """Best-of-``repeats`` seconds for ``mha.forward(x)`` and ``mha.backward``, after one untimed warm-up call.

    The warm-up pays for first-use costs (memory allocation, CuPy's kernel compilation); on a GPU
    (CuPy, torch CUDA) the device is synchronised before each clock reading.

    Args:
        mha: a :class:`mhattn.nn.MultiHeadAttention`.
        x: ``(B, T, d_model)`` array of any supported library, on ``mha``'s device.

    Returns:
        ``{"forward_s", "backward_s"}``.
    """
    from mhattn.backend import array_namespace

    sync = _synchronizer(x)
    dout = array_namespace(x).ones_like(x)
    mha.forward(x, need_weights=False)  # warm-up, untimed
    mha.backward(dout)
    best_f = best_b = float("inf")
    for _ in range(repeats):
        sync()
        t0 = time.perf_counter()
        mha.forward(x, need_weights=False)
        sync()
        t1 = time.perf_counter()
        mha.backward(dout)
        sync()
        t2 = time.perf_counter()
        best_f, best_b = min(best_f, t1 - t0), min(best_b, t2 - t1)
    return {"forward_s": best_f, "backward_s": best_b}
