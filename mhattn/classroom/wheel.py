"""Pack the mhattn being run into a wheel (pure Python: the package's files and its installed metadata).

Used by the Gradescope zip, so an instructor who installed mhattn from a wheel or a clone ships the very
code that graded their own checks. The layout follows the wheel format (PEP 427): the package, then
``mhattn-<version>.dist-info/`` with METADATA, WHEEL, entry_points.txt and RECORD (sha256 of each file).
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata as md
import zipfile
from pathlib import Path

import mhattn

WHEEL = "Wheel-Version: 1.0\nGenerator: mhattn.classroom.wheel\nRoot-Is-Purelib: true\nTag: py3-none-any\n"


def _package_files(pkg: Path):
    for p in sorted(pkg.rglob("*")):
        if p.is_file() and "__pycache__" not in p.parts and p.suffix not in (".pyc", ".pyo"):
            yield f"mhattn/{p.relative_to(pkg).as_posix()}", p.read_bytes()


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def build_wheel(dest: Path) -> Path:
    """Write ``mhattn-<version>-py3-none-any.whl`` into ``dest`` and return its path.

    Raises:
        importlib.metadata.PackageNotFoundError: mhattn is importable but not installed (no metadata).
    """
    dist = md.distribution("mhattn")
    version = dist.version
    info = f"mhattn-{version}.dist-info"
    files = list(_package_files(Path(mhattn.__file__).resolve().parent))
    files.append((f"{info}/METADATA", (dist.read_text("METADATA") or dist.read_text("PKG-INFO") or "").encode()))
    files.append((f"{info}/WHEEL", WHEEL.encode()))
    entry_points = dist.read_text("entry_points.txt")
    if entry_points:
        files.append((f"{info}/entry_points.txt", entry_points.encode()))
    record = "\n".join([*(_record_line(n, d) for n, d in files), f"{info}/RECORD,,"]) + "\n"
    path = Path(dest) / f"mhattn-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in [*files, (f"{info}/RECORD", record.encode())]:
            z.writestr(zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0)), data, zipfile.ZIP_DEFLATED)
    return path
