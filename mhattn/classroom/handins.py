"""One student's hand-in: a folder or a ``.zip`` of exercise files, found, unpacked safely, hashed and seeded.

A hand-in that cannot be graded raises :class:`HandinError` with the reason; that costs its student only.
A zip is read entry by entry with limits: no entry may leave its folder (``../``, an absolute path, a link),
the declared sizes are bounded, and each exercise file is read at most one byte past the grader's size limit,
so an entry that lies about its size (a zip bomb) cannot fill the disk or the memory.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import stat
import zipfile
from pathlib import Path, PurePosixPath

from mhattn.grade.scan import MAX_BYTES
from mhattn.grade.spec import EXERCISES

FILENAMES = {ex.filename for ex in EXERCISES}
MAX_ENTRIES = 2000  # a hand-in is a few files; a notebook folder with checkpoints a few hundred
MAX_DECLARED = 256 << 20  # what the whole zip says it unpacks to
MAX_DEPTH = 4  # folders above the exercise files (alice/course/exercises/ex01...)
CLASS_SEED_BITS = 128


class HandinError(Exception):
    """This hand-in cannot be graded; the message is the reason shown in the gradebook."""


def class_seed() -> int:
    """A fresh class seed: 128 random bits (:mod:`secrets`), beyond any search; ``--seed`` still gives one."""
    return secrets.randbits(CLASS_SEED_BITS)


def student_seed(class_seed: int, student: str, handin: str = "") -> int:
    """The hidden tests' seed of one hand-in: 64 bits of HMAC-SHA256 keyed by the class seed, of the student id and
    the hand-in's hash (:func:`files_hash`).

    Keyed, one seed says nothing of the key or of a classmate's seed (as a plain hash of a short class seed
    did); with the hash, a changed hand-in gets new inputs, so no two submissions let a student learn them.
    The seed goes to the instructor's files only; ``mhattn grade FOLDER --seed <it>`` repeats the grade.
    """
    key = str(int(class_seed)).encode()
    msg = "\0".join(("mhattn-grade", str(student), str(handin))).encode("utf-8", "surrogateescape")
    return int.from_bytes(hmac.new(key, msg, hashlib.sha256).digest()[:8], "big")


def _folder_files(root: Path) -> dict[str, list[Path]]:
    """``{exercise filename: [paths]}`` under ``root`` (links are listed, not followed)."""
    found: dict[str, list[Path]] = {}
    todo = [(root, 0)]
    while todo:
        folder, depth = todo.pop()
        try:
            entries = sorted(folder.iterdir())
        except OSError as err:
            raise HandinError(f"cannot read {folder.name}: {err.strerror}") from None
        for p in entries:
            if p.name in FILENAMES and (p.is_symlink() or p.is_file()):
                found.setdefault(p.name, []).append(p)
            elif p.is_dir() and not p.is_symlink() and depth < MAX_DEPTH and not p.name.startswith((".", "__")):
                todo.append((p, depth + 1))
    return found


def _one_folder(found: dict[str, list], what: str):
    """The folder that holds most of the exercise files (its files), or HandinError when there are none."""
    if not found:
        names = f"{EXERCISES[0].filename} ... {EXERCISES[-1].filename}"
        raise HandinError(f"no exercise files ({names}) in {what}")
    parents: dict = {}
    for paths in found.values():
        for p in paths:
            parents.setdefault(p.parent, []).append(p)
    best = max(parents, key=lambda d: (len(parents[d]), -len(str(d))))
    return best


def _check_entry(info: zipfile.ZipInfo) -> None:
    name = info.filename.replace("\\", "/")
    parts = PurePosixPath(name).parts
    if name.startswith("/") or ".." in parts or (parts and ":" in parts[0]):
        raise HandinError(f"the zip entry {info.filename[:80]!r} would be written outside its folder: refused")
    if stat.S_ISLNK(info.external_attr >> 16):
        raise HandinError(f"the zip entry {info.filename[:80]!r} is a link: hand in the files themselves")


def _unzip(src: Path, dest: Path) -> Path:
    """The exercise files of zip ``src``, written flat into ``dest``; returns ``dest``."""
    try:
        with zipfile.ZipFile(src) as z:
            infos = z.infolist()
            if len(infos) > MAX_ENTRIES:
                raise HandinError(f"the zip holds {len(infos)} entries (more than {MAX_ENTRIES}): refused")
            if sum(i.file_size for i in infos) > MAX_DECLARED:
                raise HandinError(f"the zip would unpack to more than {MAX_DECLARED >> 20} MiB (a zip bomb?): refused")
            for info in infos:
                _check_entry(info)
            wanted, entry = {}, {}
            for info in infos:
                path = PurePosixPath(info.filename.replace("\\", "/"))
                if not info.is_dir() and path.name in FILENAMES and not path.parts[0].startswith(("__MACOSX", ".")):
                    wanted.setdefault(path.name, []).append(path)
                    entry[path] = info
            folder = _one_folder(wanted, src.name)
            for path, info in entry.items():
                if path.parent == folder:
                    with z.open(info) as f:
                        (dest / path.name).write_bytes(f.read(MAX_BYTES + 1))  # too long: the grader says so
    except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, EOFError, OSError, RuntimeError) as err:
        raise HandinError(f"{src.name} is not a readable zip file ({type(err).__name__}: {str(err)[:120]})") from None
    return dest


def unpack(src: Path, dest: Path) -> Path:
    """The folder to grade for hand-in ``src`` (a folder, a ``.zip``, or a folder holding one ``.zip``).

    A folder is graded where it is (the grader checks its links itself); a zip is unpacked into ``dest``.

    Raises:
        HandinError: an empty folder, a broken or unsafe zip, no exercise file found.
    """
    src = Path(src)
    if src.is_symlink():
        raise HandinError(f"{src.name} is a link: hand in the folder or zip itself")
    if src.is_file():
        if src.suffix.lower() != ".zip":
            raise HandinError(f"{src.name} is neither a folder nor a .zip")
        return _unzip(src, dest)
    found = _folder_files(src)
    if not found:
        zips = [p for p in sorted(src.iterdir()) if p.suffix.lower() == ".zip" and p.is_file() and not p.is_symlink()]
        if len(zips) == 1:
            return _unzip(zips[0], dest)
    return _one_folder(found, f"the folder {src.name}")


def files_hash(folder: Path) -> str:
    """sha256 of what is graded in ``folder``: each exercise file's name and bytes (a link: its target)."""
    h = hashlib.sha256()
    for name in sorted(FILENAMES):
        p = folder / name
        h.update(name.encode() + b"\0")
        if p.is_symlink():
            h.update(b"link:" + str(p.readlink()).encode())
        elif p.is_file():
            with p.open("rb") as f:
                h.update(f.read(MAX_BYTES + 1))
        h.update(b"\0")
    return h.hexdigest()
