"""``.npz`` checkpoints with versioned metadata, read with ``allow_pickle=False``.

Layout: one array per parameter under ``param/<name>`` plus ``meta``, a 0-d
unicode array holding JSON::

    {"format": "mhattn-checkpoint", "version": 1, "config": {...ModelConfig...},
     "task": {...task metadata...}, "training": {...steps, seconds, accuracies...}}

Unicode arrays load without pickle, so a checkpoint can never run code. Every
problem with a file raises :class:`CheckpointError` naming the file and the fault.
"""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path

import numpy as np

from mhattn.backend import asarray, to_numpy
from mhattn.nn.transformer import ModelConfig, TransformerModel, param_shapes

FORMAT, VERSION = "mhattn-checkpoint", 1
DATA_DIR = Path(__file__).resolve().parent.parent / "data"
SHIPPED = {
    "roles-plain": "roles-plain.npz",
    "roles-headdropout": "roles-headdropout.npz",
    "text": "text.npz",
    "roles-6heads": "roles-6heads.npz",  # 6 heads from scratch (notebook 07)
}


class CheckpointError(ValueError):
    """A checkpoint file is missing, corrupt, truncated, of another version, or does not fit its config."""


def save_checkpoint(path, model: TransformerModel, task_meta: dict, training: dict | None = None):
    """Write ``model`` to ``path`` (``.npz``, float32 parameters on the host)."""
    meta = {"format": FORMAT, "version": VERSION, "config": model.cfg.to_dict(), "task": task_meta, "training": training or {}}
    arrays = {f"param/{n}": to_numpy(p) for n, p in model.params.items()}
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "wb") as fh:
            np.savez_compressed(fh, meta=np.array(json.dumps(meta)), **arrays)
        os.replace(tmp, path)  # readers never see a half-written file
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


def load_checkpoint(path, dtype="float32"):
    """Read a checkpoint.

    Args:
        path: a file path, or the name of a shipped checkpoint (``roles-plain``,
            ``roles-headdropout``, ``text``).
        dtype: parameters are cast to it ("float64" for gradient checks).

    Returns:
        ``(model, meta)``: a :class:`TransformerModel` on the current backend and the metadata dict.

    Raises:
        CheckpointError: missing, corrupt or truncated file, wrong format or version,
            missing/extra/mis-shaped parameters.
    """
    path = DATA_DIR / SHIPPED[path] if str(path) in SHIPPED else Path(path)
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
    params = {n: asarray(found[n].astype(dtype)) for n in expected}
    return TransformerModel(cfg, params=params), meta
