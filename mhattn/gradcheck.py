"""Numerical gradient checks (centred differences), as in CS231n's gradient_check.py.

The check of a backward pass: for a random upstream gradient ``dout``, the
analytic ``d<out, dout>/dx`` from the backward must match the numerical one,
``(f(x + eps e_i) - f(x - eps e_i)) . dout / (2 eps)`` for every entry i.
Run it in float64: float32 rounding swamps the difference quotient.
"""

from __future__ import annotations

import numpy as np

from mhattn.backend import get_array_module, to_numpy


def numerical_gradient(f, x, dout, eps=1e-6):
    """Centred-difference gradient of ``sum(f(x) * dout)`` with respect to ``x``.

    Args:
        f: function of one array returning an array shaped like ``dout``.
        x: float array (NumPy or CuPy); it is not modified (a copy is perturbed).
        dout: upstream gradient, shaped like ``f(x)``.
        eps: step size.

    Returns:
        Array shaped like ``x``, on ``x``'s device.
    """
    xp = get_array_module(x, dout)
    xw = x.copy()
    grad = np.zeros(x.shape, dtype=np.float64)
    flat = xw.reshape(-1)  # a view: writing to it perturbs xw
    for i in range(flat.size):
        old = flat[i].item()
        flat[i] = old + eps
        plus = float((f(xw) * dout).sum())
        flat[i] = old - eps
        minus = float((f(xw) * dout).sum())
        flat[i] = old
        grad.reshape(-1)[i] = (plus - minus) / (2 * eps)
    return xp.asarray(grad.astype(x.dtype))


def rel_error(a, b):
    """``||a - b|| / (||a|| + ||b||)`` over all entries (0 when both are 0).

    Norm-wise, so entries that are zero in both do not blow the ratio up.
    """
    a = to_numpy(a).astype(np.float64)
    b = to_numpy(b).astype(np.float64)
    if a.shape != b.shape:
        raise ValueError(f"rel_error: shapes differ, {a.shape} vs {b.shape}")
    denom = np.linalg.norm(a) + np.linalg.norm(b)
    return float(np.linalg.norm(a - b) / denom) if denom > 0 else 0.0


def check_backward(forward, backward, inputs, *, seed=0, eps=1e-6):
    """Relative errors of ``backward`` against centred differences, one per input.

    Args:
        forward: ``forward(*inputs)`` -> a tuple whose first item is the output
            and whose last is the cache (``(out, cache)`` or ``(out, weights, cache)``).
        backward: ``backward(dout, cache)`` -> the gradients, in the order of ``inputs``.
        inputs: the float64 arrays to differentiate with respect to.
        seed: for the random ``dout``.

    Returns:
        A list of floats, ``rel_error(analytic, numerical)`` per input.
    """
    xp = get_array_module(*inputs)
    res = forward(*inputs)
    out, cache = res[0], res[-1]
    dout = xp.asarray(np.random.default_rng(seed).standard_normal(out.shape)).astype(out.dtype)
    grads = backward(dout, cache)
    grads = grads if isinstance(grads, tuple) else (grads,)
    errors = []
    for i, x in enumerate(inputs):

        def f(xi, i=i):
            args = list(inputs)
            args[i] = xi
            return forward(*args)[0]

        errors.append(rel_error(grads[i], numerical_gradient(f, x, dout, eps)))
    return errors
