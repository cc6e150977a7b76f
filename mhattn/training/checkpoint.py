"""``.npz`` checkpoints with versioned metadata, read with ``allow_pickle=False``.

Layout: one array per parameter under ``param/<name>`` plus ``meta``, a 0-d
unicode array holding JSON::

    {"format": "mhattn-checkpoint", "version": 1, "config": {...ModelConfig...},
     "task": {...task metadata...}, "training": {...steps, seconds, accuracies...}}

Unicode arrays load without pickle, so a checkpoint can never run code. Every
problem with a file raises :class:`CheckpointError` naming the file and the fault.

**Shipped names and local files.** ``load_checkpoint("roles-plain")`` names a shipped checkpoint;
anything with a suffix or a folder separator (``"roles-plain.npz"``, ``"./roles-plain"``) or given as a
``pathlib.Path`` is a path. A bare shipped name never silently means a local file, nor the reverse:
when a file ``roles-plain`` or ``roles-plain.npz`` also exists in the working folder, the call is
ambiguous and raises :class:`CheckpointError` (a ``ValueError``) naming both; pass ``"./roles-plain"`` for the local one or
``shipped_path("roles-plain")`` for the shipped one.
"""

from __future__ import annotations

import json
import os
import tempfile
import zipfile
from pathlib import Path

import numpy as np

from mhattn.backend import asarray, to_numpy
from mhattn.nn.device import host_dtype
from mhattn.nn.transformer import ModelConfig, TransformerModel, check_model_dtype, param_shapes

FORMAT, VERSION = "mhattn-checkpoint", 1
DATA_DIR = Path(__file__).resolve().parent.parent / "data"
SHIPPED = {
    "roles-plain": "roles-plain.npz",
    "roles-headdropout": "roles-headdropout.npz",
    "text": "text.npz",
    "roles-6heads": "roles-6heads.npz",  # 6 heads from scratch (notebook 07)
    "text-deep": "text-deep.npz",  # 4 layers x 8 heads on Python's documentation (notebook 10)
    "text-deep12": "text-deep12.npz",  # 4 layers x 12 heads on the same text (notebook 07)
}


class CheckpointError(ValueError):
    """A checkpoint file is missing, corrupt, truncated, of another version, or does not fit its config."""


def _json_number(x):
    """``json.dumps``'s fallback: a NumPy scalar (``np.int64(4)``, ``np.float32(0.1)``, ``np.True_``) as its Python number."""
    if isinstance(x, np.generic) and x.dtype.kind in "biuf":
        return x.item()
    raise TypeError(f"checkpoint metadata must be JSON data (numbers, strings, lists, dicts), got {type(x).__name__}")


def save_checkpoint(path, model: TransformerModel, task_meta: dict, training: dict | None = None):
    """Write ``model`` to ``path`` (``.npz``, the parameters on the host in their dtype).

    ``task_meta`` and ``training`` are JSON data; NumPy numbers in them are written as Python numbers.

    Two saves of one path at once (threads or processes) each write their own temporary file and rename it into
    place: the file holds one of them whole, and neither raises.

    Raises:
        TypeError: metadata that is not JSON data (nothing is written).
    """
    meta = {"format": FORMAT, "version": VERSION, "config": model.cfg.to_dict(), "task": task_meta, "training": training or {}}
    meta_json = json.dumps(meta, default=_json_number)
    arrays = {f"param/{n}": to_numpy(p) for n, p in model.params.items()}
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # a temporary name of this save's own (two saves of one path at once must not share one), then an atomic rename
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    tmp = Path(tmp)
    try:
        with os.fdopen(fd, "wb") as fh:
            np.savez_compressed(fh, meta=np.array(meta_json), **arrays)
        os.chmod(tmp, 0o644)  # mkstemp makes the file 0600; a checkpoint is readable as a plain open() would make it
        os.replace(tmp, path)  # readers never see a half-written file; the last save wins whole
    finally:
        tmp.unlink(missing_ok=True)  # nothing stray when writing or renaming failed
    return path


def _read(path):
    if Path(path).is_file() and not zipfile.is_zipfile(path):
        raise CheckpointError(f"checkpoint {path}: corrupt or truncated .npz (not a readable zip archive)")
    try:
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except FileNotFoundError:
        raise CheckpointError(f"checkpoint {path}: no such file") from None
    except ValueError as err:  # object arrays need pickle
        raise CheckpointError(f"checkpoint {path}: holds data that needs pickle, refused ({err})") from None
    except (zipfile.BadZipFile, EOFError, OSError, KeyError, zipfile.LargeZipFile) as err:
        raise CheckpointError(f"checkpoint {path}: corrupt or truncated .npz ({type(err).__name__}: {err})") from None


def _meta(path, arrays):
    if "meta" not in arrays or arrays["meta"].dtype.kind != "U" or arrays["meta"].ndim != 0:
        raise CheckpointError(f"checkpoint {path}: no 'meta' entry; not an mhattn checkpoint")
    try:
        meta = json.loads(str(arrays["meta"]))
    except json.JSONDecodeError as err:
        raise CheckpointError(f"checkpoint {path}: metadata is not valid JSON ({err})") from None
    if meta.get("format") != FORMAT:
        raise CheckpointError(f"checkpoint {path}: format {meta.get('format')!r}, expected {FORMAT!r}")
    if meta.get("version") != VERSION:
        raise CheckpointError(f"checkpoint {path}: version {meta.get('version')!r}; this mhattn reads version {VERSION}")
    return meta


def shipped_path(name) -> Path:
    """The file of the shipped checkpoint ``name`` (one of :data:`SHIPPED`).

    Raises:
        KeyError: not a shipped name (the message lists them).
    """
    if name not in SHIPPED:
        raise KeyError(f"{name!r} is not a shipped checkpoint; shipped: {', '.join(SHIPPED)}")
    return DATA_DIR / SHIPPED[name]


def resolve(path) -> Path:
    """The file ``load_checkpoint(path)`` reads (the rule is in the module docstring).

    Raises:
        CheckpointError (a ValueError): ``path`` is a bare shipped name and a local file of that name (or
            with ``.npz``) exists.
    """
    if not isinstance(path, str) or path not in SHIPPED:
        return Path(path)
    local = [Path(c) for c in (path, path + ".npz") if Path(c).exists()]
    if local:
        raise CheckpointError(
            f"{path!r} names both the shipped checkpoint {shipped_path(path)} and the local file "
            f"{local[0].resolve()}; pass './{local[0]}' for the local file or shipped_path({path!r}) for the shipped one"
        )
    return shipped_path(path)


def load_checkpoint(path, dtype=None, *, into=None):
    """Read a checkpoint into a new model, or into an existing one.

    Args:
        path: a file path, or the name of a shipped checkpoint (``roles-plain``, ``roles-headdropout``,
            ``text``, ``roles-6heads``); see the module docstring for which a name means.
        dtype: parameters are cast to it ("float64" for gradient checks); default float32, or ``into``'s.
        into: a :class:`TransformerModel` of the same config to load into: its parameter arrays are
            overwritten in place, as torch's ``load_state_dict`` does, so an optimiser built on them keeps
            working; its dtype and device stay. On any error it is left unchanged.

    Returns:
        ``(model, meta)``: a :class:`TransformerModel` (new, on the current backend and device; or ``into``)
        and the metadata dict.

    Raises:
        CheckpointError: missing, corrupt or truncated file, wrong format or version,
            missing/extra/mis-shaped parameters, or a config unlike ``into``'s.
            A bare shipped name that a local file also has (see :func:`resolve`).
        ValueError: a ``dtype`` unlike ``into``'s, or other than float32 and float64 (a float16 model is refused).
    """
    path = resolve(path)
    if dtype is not None:
        check_model_dtype(dtype, "dtype")
    if into is not None and dtype is not None and np.dtype(dtype) != host_dtype(into.params["embed.W"]):
        raise ValueError(f"dtype={dtype!r} differs from the model's ({host_dtype(into.params['embed.W'])}); leave it out")
    arrays = _read(path)
    meta = _meta(path, arrays)
    try:
        cfg = ModelConfig(**meta["config"])
    except (TypeError, ValueError, KeyError) as err:
        raise CheckpointError(f"checkpoint {path}: bad model config ({err})") from None
    expected = param_shapes(cfg)
    found = {k[len("param/") :]: v for k, v in arrays.items() if k.startswith("param/")}
    missing, extra = sorted(set(expected) - set(found)), sorted(set(found) - set(expected))
    if missing or extra:
        raise CheckpointError(f"checkpoint {path}: parameters do not match its config: missing {missing[:4]}, extra {extra[:4]}")
    for name, shape in expected.items():
        if found[name].shape != shape or found[name].dtype.kind != "f":
            raise CheckpointError(
                f"checkpoint {path}: parameter {name} is {found[name].dtype}{found[name].shape}, config expects float{shape}"
            )
    if into is not None:
        if into.cfg != cfg:
            raise CheckpointError(f"checkpoint {path}: its config {cfg} differs from the model's {into.cfg}")
        into.load_params({n: found[n] for n in expected})
        return into, meta
    params = {n: asarray(found[n].astype(dtype or "float32")) for n in expected}
    return TransformerModel(cfg, params=params), meta
