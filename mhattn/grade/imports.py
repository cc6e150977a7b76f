"""Which installed packages a graded submission may import: the standard library, numpy, mhattn.

The exercises are written with NumPy by hand. Another installed library that computes the step
(``torch.softmax``, ``scipy.special.softmax``, torch's autograd for a backward, ``torch.nn.MultiheadAttention``
for a parameter count) is a reference for it, like mhattn's own, so only numpy and what mhattn itself
requires (without extras) are importable while grading. In the sandbox every other entry of every
package folder is out of sight (:mod:`mhattn.grade.sandbox`); in both modes the worker refuses the
import with a clear message (without a sandbox that hook, like the stand-ins, can be undone).
"""

from __future__ import annotations

import functools
import importlib.metadata as md
import re
from pathlib import Path

ROOTS = ("numpy", "mhattn")
SITE_GLOBS = ("lib/python3*/site-packages", "lib/python3*/dist-packages", "lib/python3/dist-packages",
              "local/lib/python3*/site-packages", "local/lib/python3*/dist-packages", "lib64/python3*/site-packages")  # fmt: skip


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@functools.lru_cache(maxsize=1)
def allowed_distributions() -> frozenset[str]:
    """numpy, mhattn and every distribution they require (extras left out), names normalised."""
    found, todo = set(), list(ROOTS)
    while todo:
        name = _norm(todo.pop())
        if name in found:
            continue
        found.add(name)
        try:
            requires = md.requires(name) or []
        except md.PackageNotFoundError:
            continue
        todo += [m.group(0) for r in requires if "extra" not in r and (m := re.match(r"[A-Za-z0-9._-]+", r))]
    return frozenset(found)


def _top_entries(dist) -> set[str]:
    """First path components of a distribution's files (its packages, modules, ``.libs``, ``.dist-info``)."""
    files = dist.files or []
    names = {f.parts[0] for f in files if f.parts and f.parts[0] not in ("..", "__pycache__")}
    if not names:  # no RECORD (e.g. some system packages): its top_level.txt, or its own name
        names = set((dist.read_text("top_level.txt") or dist.metadata["Name"]).split())
    return names


def allowed_entries(site_dir: Path) -> list[Path]:
    """Entries of ``site_dir`` that belong to an allowed distribution other than mhattn (bound on its own)."""
    out = set()
    for name in allowed_distributions() - {"mhattn"}:
        for dist in md.distributions(name=name, path=[str(site_dir)]):
            out |= {site_dir / n for n in _top_entries(dist)}
    return sorted(p for p in out if p.exists() and not p.is_symlink())


@functools.lru_cache(maxsize=1)
def allowed_modules() -> tuple[str, ...]:
    """Top-level import names of the allowed distributions (the standard library is allowed besides)."""
    names = {"mhattn"}
    for name in allowed_distributions() - {"mhattn"}:
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:
            continue
        names |= {n.split(".")[0] for n in _top_entries(dist) if not n.endswith((".dist-info", ".egg-info", ".libs"))}
    return tuple(sorted(names))


def site_dirs(roots) -> list[Path]:
    """Package folders (``site-packages``, ``dist-packages``) at or under ``roots`` that exist."""
    found = set()
    for root in roots:
        root = Path(root)
        if root.name in ("site-packages", "dist-packages"):
            found.add(root)
        for pattern in SITE_GLOBS:
            found.update(root.glob(pattern))
    return sorted({p.resolve() for p in found if p.is_dir()})
