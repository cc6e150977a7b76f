"""Optimisers on parameter dicts: SGD and Adam, with weight decay and gradient-norm clipping.

Adam: Kingma & Ba 2015, Algorithm 1 (bias-corrected moments). Its weight decay is
*decoupled* (AdamW, Loshchilov & Hutter 2019): ``p -= lr * wd * p`` beside the Adam
step, so decay does not pass through the adaptive scaling. SGD's weight decay is the
classic L2 term added to the gradient.

Both update the parameter arrays **in place** (``p -= ...``, which the array API standard
allows), as ``torch.optim`` does: give an optimiser any subset of a module's dict, e.g.
``SGD({"W_o": mha.params["W_o"]}, lr=0.05)``, and the module's own ``W_o`` changes. Parameters
may be arrays of any backend (NumPy, CuPy, torch, array-api-strict); each update is made with
its parameter's namespace, on its device. A parameter with no gradient in a step is left alone
(torch skips a parameter whose ``.grad`` is ``None``); a gradient under a name the optimiser
does not hold is an error, so a misspelt name cannot pass silently (modules keep the gradient of
their input ``head_mask`` apart from ``grads``, so ``SGD(mha.params).step(mha.grads)`` always fits).

**Tied weights.** One array held under two names (say an embedding reused as the output layer)
is one parameter, as in a torch module, whose ``parameters()`` lists a shared tensor once and
whose ``.grad`` sums the gradients of every use. So the optimiser dedupes by identity
(``is``): each step adds the gradients given under all of the array's names and updates the
array once, keeping one momentum/moment state for it (under its first name). Views of one
buffer that are different array objects count as different parameters.

Caches made before a step see the new values, so step after the backward that uses them.
Hyperparameters are Python floats and every update is computed in the parameter's own
dtype: float32 stays float32 whatever scalar type ``lr``, ``clip`` or ``max_norm`` had.
``lr`` may be 0 (warm-up schedules start there); a negative one is refused.
"""

from __future__ import annotations

import math

import numpy as np

from mhattn.backend import array_namespace, is_array


def _scalar(name, value, low=0.0, strict=False):
    """``value`` as a Python float, checked to be finite and ``> low`` (``strict``) or ``>= low``."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a real number, got {value!r}") from None
    if not math.isfinite(x) or x < low or (strict and x == low):
        raise ValueError(f"{name} must be a finite number {'>' if strict else '>='} {low:g}, got {value!r}")
    return x


def _global_norm(grads):
    """``sqrt(sum of g^2)`` over all arrays, correct even where a square overflows or underflows their dtype."""
    xp = array_namespace(*grads)
    # an overflowing sum is detected below and redone scaled: no warning from NumPy (or array-api-strict, built on it)
    with np.errstate(over="ignore", under="ignore"):
        total = math.sqrt(sum(float(xp.sum(g * g)) for g in grads))
    tiny = max((float(xp.finfo(g.dtype).smallest_normal) for g in grads), default=0.0)
    if math.isfinite(total) and total * total >= tiny * 2**20:  # the plain sum (the common case) is exact enough
        return total
    peak = max((float(xp.max(xp.abs(g))) for g in grads if math.prod(g.shape)), default=0.0)
    if peak == 0.0 or not math.isfinite(peak):
        return peak
    return peak * math.sqrt(sum(float(xp.sum((g / peak) ** 2)) for g in grads))


def clip_grad_norm(grads, max_norm):
    """Scale all gradients together so their global ℓ2 norm is at most ``max_norm``.

    The squares are summed directly; when that sum overflows (or is too small to be exact)
    in the gradients' dtype, the norm is ``m * sqrt(sum((g / m)^2))`` with ``m`` the largest
    ``|g|``, so float32 gradients of 1e20 give a norm of 1e21, not ``inf``.

    Args:
        grads: dict name -> array (any float dtype, one backend and device; each keeps its dtype).
        max_norm: a positive number, or ``None`` (no clipping, just the norm).

    Returns:
        ``(clipped, total_norm)``: a new dict (the inputs are not modified) and the norm
        before clipping, a Python float.

    Raises:
        ValueError/TypeError: ``max_norm`` is not a positive finite number.
    """
    if max_norm is not None:
        max_norm = _scalar("max_norm", max_norm, strict=True)
    total = _global_norm(list(grads.values()))
    if max_norm is None or total <= max_norm:
        return dict(grads), total
    scale = max_norm / (total + 1e-12)
    return {n: g * scale for n, g in grads.items()}, total


class _Optimizer:
    """Shared checks: the parameters an optimiser holds and the gradients a step receives."""

    def __init__(self, params, lr):
        if not isinstance(params, dict):
            raise TypeError(f"params must be a dict name -> array, got {type(params).__name__}")
        for n, p in params.items():
            if not is_array(p) or not array_namespace(p).isdtype(p.dtype, "real floating"):
                raise TypeError(f"parameter {n!r} must be a floating-point array, got {getattr(p, 'dtype', type(p))}")
        self.params, self.lr = params, lr

    @property
    def lr(self):
        """The learning rate, a Python float ``>= 0`` (0 is allowed: warm-up schedules start there)."""
        return self._lr

    @lr.setter
    def lr(self, value):
        self._lr = _scalar("lr", value)

    def _firsts(self):
        """``id(array)`` -> the first name (in ``params`` order) holding it: tied weights are one parameter."""
        first = {}
        for n, p in self.params.items():
            first.setdefault(id(p), n)
        return first

    def _checked(self, grads):
        """The gradients to apply, one per distinct array (tied names summed), clipped, and their norm.

        Raises on a name, shape, library, device or dtype that does not fit.
        """
        first, merged = self._firsts(), {}
        for n, g in grads.items():
            if n not in self.params:
                raise KeyError(f"gradient for unknown parameter {n!r} (this optimiser holds {sorted(self.params)[:8]})")
            p = self.params[n]
            if tuple(getattr(g, "shape", ())) != tuple(p.shape) or not hasattr(g, "shape"):
                raise ValueError(f"gradient {n!r} has shape {getattr(g, 'shape', None)}, its parameter has {tuple(p.shape)}")
            if type(p) is not np.ndarray or type(g) is not np.ndarray:
                array_namespace(p, g)  # one library, one device (TypeError / ValueError naming both)
            if g.dtype != p.dtype:
                raise TypeError(f"gradient {n!r} has dtype {g.dtype}, its parameter has {p.dtype}")
            o = first[id(p)]
            merged[o] = merged[o] + g if o in merged else g
        return clip_grad_norm(merged, self.clip)


class SGD(_Optimizer):
    """``v = momentum v + (g + wd p)``; ``p -= lr v``, in place.

    Args:
        params: dict name -> float array (updated in place by :meth:`step`; an array held under two
            names is one parameter, see the module docstring on tied weights).
        lr, momentum, weight_decay: the usual; clip: max global gradient norm or ``None``.

    Raises:
        TypeError/ValueError: a parameter is not a float array, or a hyperparameter is out of range.
    """

    def __init__(self, params, lr=0.1, momentum=0.0, weight_decay=0.0, clip=None):
        super().__init__(params, lr)
        self.momentum = _scalar("momentum", momentum)
        self.weight_decay = _scalar("weight_decay", weight_decay)
        self.clip = None if clip is None else _scalar("clip", clip, strict=True)
        self.velocity = {}

    def step(self, grads):
        """One update from ``grads`` (a dict with some or all of the parameters' names; the gradients
        of tied names are added and their array updated once).

        Returns:
            The gradient norm before clipping (of the summed gradients of tied names).

        Raises:
            KeyError: a name the optimiser does not hold. ValueError/TypeError: a gradient's shape/dtype
            differs, or it is an array of another library or device than its parameter.
        """
        grads, norm = self._checked(grads)
        for n, g in grads.items():
            p = self.params[n]
            if self.weight_decay:
                g = g + self.weight_decay * p
            if self.momentum:
                g = self.momentum * self.velocity[n] + g if n in self.velocity else array_namespace(g).asarray(g, copy=True)
                self.velocity[n] = g
            p -= self.lr * g
        return norm


class Adam(_Optimizer):
    """Adam with decoupled weight decay (AdamW when ``weight_decay > 0``), in place.

    Args:
        params: dict name -> float array (updated in place by :meth:`step`; tied names are one
            parameter, with one ``m``/``v`` under the first name).
        lr, betas, eps: Kingma & Ba's alpha, (beta1, beta2), epsilon.
        weight_decay: decoupled decay rate; skipped for 1-D parameters (biases, LayerNorm).
        clip: max global gradient norm, or ``None``.

    Attributes:
        t: steps taken; ``steps[name]``: steps that updated ``name`` (its bias correction).

    Raises:
        TypeError/ValueError: a parameter is not a float array, or a hyperparameter is out of range.
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, clip=None):
        super().__init__(params, lr)
        self.betas = tuple(_scalar(f"betas[{i}]", b) for i, b in enumerate(betas))
        if len(self.betas) != 2 or max(self.betas) >= 1.0:
            raise ValueError(f"betas must be two numbers in [0, 1), got {betas!r}")
        self.eps = _scalar("eps", eps, strict=True)
        self.weight_decay = _scalar("weight_decay", weight_decay)
        self.clip = None if clip is None else _scalar("clip", clip, strict=True)
        self.t, self.steps = 0, {}
        firsts = set(self._firsts().values())
        self.m = {n: array_namespace(p).zeros_like(p) for n, p in params.items() if n in firsts}
        self.v = {n: array_namespace(p).zeros_like(p) for n, p in params.items() if n in firsts}

    def step(self, grads):
        """One update (Kingma & Ba 2015, Algorithm 1); ``grads``, the returned norm and the errors as :meth:`SGD.step`."""
        grads, norm = self._checked(grads)
        self.t += 1
        b1, b2 = self.betas
        for n, g in grads.items():
            p, xp = self.params[n], array_namespace(self.params[n])
            if n not in self.m:  # an entry added to the dict after the optimiser was built
                self.m[n], self.v[n] = xp.zeros_like(p), xp.zeros_like(p)
            t = self.steps[n] = self.steps.get(n, 0) + 1
            self.m[n] *= b1
            self.m[n] += (1.0 - b1) * g
            self.v[n] *= b2
            self.v[n] += (1.0 - b2) * (g * g)
            update = (self.m[n] / (1.0 - b1**t)) / (xp.sqrt(self.v[n] / (1.0 - b2**t)) + self.eps)
            if self.weight_decay and p.ndim > 1:
                update += self.weight_decay * p
            p -= self.lr * update
        return norm
