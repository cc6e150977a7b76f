"""Numerical gradient checks (centred differences), as in CS231n's gradient_check.py.

The check of a backward pass: for a random upstream gradient ``dout``, the
analytic ``d<out, dout>/dx`` from the backward must match the numerical one,
``(f(x + eps e_i) - f(x - eps e_i)) . dout / (2 eps)`` for every entry i.
Run it in float64: float32 rounding (about 6e-8 of each output) divided by ``2 eps`` swamps the
difference quotient, so :func:`check_backward` refuses float32 inputs rather than report errors near
0.3 for a correct backward. Inputs may be arrays of any backend; the perturbed copies stay on their
device, and only the scalar sums come to the host.
"""

from __future__ import annotations

import numpy as np

from mhattn.backend import array_namespace, asarray, to_numpy


def numerical_gradient(f, x, dout, eps=1e-6):
    """Centred-difference gradient of ``sum(f(x) * dout)`` with respect to ``x``.

    The perturbed copies are float64 whatever ``x``'s float dtype: a step of 1e-6 added in float16 (or to a large
    float32 value) rounds back to ``x`` itself and every difference would be 0 (jax-ml/jax#7742). So ``f`` is called
    with float64 arrays; the gradient comes back in ``x``'s dtype.

    Args:
        f: function of one array returning an array shaped like ``dout``.
        x: real floating array of any backend; it is not modified (a float64 copy is perturbed, one entry at a time).
        dout: upstream gradient, shaped like ``f(x)``.
        eps: step size.

    Returns:
        Array shaped like ``x``, of its dtype, on its device.

    Raises:
        TypeError: ``x`` is not a real floating array (an integer input has no small step to take).
    """
    xp = array_namespace(x, dout)
    if not xp.isdtype(x.dtype, "real floating"):
        raise TypeError(f"numerical_gradient: x must be a real floating array, got dtype {x.dtype}; cast it to float64")
    xw = xp.astype(x, xp.float64, copy=True)  # the step is taken in float64
    grad = np.zeros(x.shape, dtype=np.float64)  # host: one number per entry
    for i in np.ndindex(*x.shape):
        old = float(xw[i])
        xw[i] = old + eps
        plus = float(xp.sum(f(xw) * dout))
        xw[i] = old - eps
        minus = float(xp.sum(f(xw) * dout))
        xw[i] = old
        grad[i] = (plus - minus) / (2 * eps)
    return asarray(grad, dtype=x.dtype, like=x)


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
        inputs: the float64 arrays (any one backend) to differentiate with respect to.
        seed: for the random ``dout``.

    Returns:
        A list of floats, ``rel_error(analytic, numerical)`` per input.

    Raises:
        TypeError: an input is not float64 (float32 rounding would swamp the centred differences:
            a correct backward would show errors near 0.3); cast it first, e.g.
            ``xp.astype(x, xp.float64)``, with the parameters it meets.
    """
    xp = array_namespace(*inputs)
    for i, x in enumerate(inputs):
        if x.dtype != xp.float64:
            raise TypeError(
                f"check_backward needs float64 inputs: input {i} has dtype {x.dtype}, whose rounding swamps the "
                f"centred differences (a correct backward would show errors near 0.3); cast it with "
                f"xp.astype(x, xp.float64) (and the parameters it meets) and check again"
            )
    res = forward(*inputs)
    out, cache = res[0], res[-1]
    host = np.random.default_rng(seed).standard_normal(tuple(out.shape))
    dout = asarray(host, dtype=out.dtype, like=out)
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
