"""Arrays beside the parameters: data and loaded values go where the parameters already live.

Parameters are made on the current backend and device (:func:`mhattn.set_backend`); after that, every
array a layer, the training loop or the head analysis makes from host data (token ids, targets, head
masks) goes to the *parameters'* namespace and device, whatever the current backend has become since
(:func:`mhattn.backend.asarray` with ``like=`` a parameter: the one function that moves arrays).
Loading copies *into* the parameter arrays, as ``torch.nn.Module.load_state_dict`` does, so an optimiser
built before keeps updating the live arrays.
"""

from __future__ import annotations

import numpy as np

from mhattn.backend import array_namespace, asarray, to_numpy

_HOST_DTYPES = ("bool", "int32", "int64", "float16", "float32", "float64")


def host_dtype(a) -> np.dtype:
    """The NumPy dtype matching ``a``'s dtype (``a`` an array of any backend).

    Raises:
        TypeError: a dtype with no NumPy twin (e.g. torch's bfloat16).
    """
    if isinstance(a, np.ndarray):
        return a.dtype
    xp = array_namespace(a)
    for name in _HOST_DTYPES:
        if a.dtype == getattr(xp, name, None):
            return np.dtype(name)
    raise TypeError(f"dtype {a.dtype} has no NumPy equivalent")


def copy_into(params: dict, values: dict, what="parameter") -> None:
    """``params[n][...] = values[n]`` for every name of ``values``, in place, after checking them all.

    Values are cast to each parameter's dtype and moved to its device (torch's ``load_state_dict`` does
    the same: ``param.copy_(value)``), so the parameter arrays, and everything holding them (an
    optimiser, a ``HeadMaskEvaluator``), stay the same objects.

    Raises:
        KeyError: a name ``params`` does not hold (nothing is copied).
        ValueError: a shape differs from its parameter's (nothing is copied).
        TypeError: a value that is not floating point (nothing is copied).
    """
    unknown = sorted(set(values) - set(params))
    if unknown:
        raise KeyError(f"no {what} named {unknown[:4]}; the model has {sorted(params)[:8]}")
    hosts = {}
    for n, v in values.items():
        shape, target = tuple(getattr(v, "shape", ())), tuple(params[n].shape)
        if shape != target:
            raise ValueError(f"{what} {n} has shape {shape}, the model's has {target}; nothing was loaded")
        host = to_numpy(v)
        if host.dtype.kind != "f":
            raise TypeError(f"{what} {n} has dtype {host.dtype}; expected floating point; nothing was loaded")
        hosts[n] = host
    for n, host in hosts.items():
        p = params[n]
        p[...] = asarray(host, dtype=p.dtype, like=p)
