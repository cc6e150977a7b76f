"""Grade one exercise file in this (fresh) process: ``python -m mhattn.grade.worker NAME FILE SEED OUT``.

Run by :mod:`mhattn.grade.runner` in a subprocess with no stdin and a time limit. Writes
``{"points", "reason"}`` as JSON to OUT. The learner's file is read and compiled from its
source text every time (never from a bytecode cache or an earlier import).
"""

from __future__ import annotations

import ast
import json
import sys
import traceback
import types
from pathlib import Path

import numpy as np

from mhattn.grade.harness import GradeFailure, Sandbox, install_tripwires
from mhattn.grade.spec import Exercise, find


def scan_imports(source: str, ex: Exercise) -> str | None:
    """Reason to refuse the file if it imports a reference for this step, solutions/ or the grader."""
    mhattn_aliases = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "solutions":
                    return f"imports {alias.name}: submissions may not use anything under solutions/"
                if alias.name.startswith("mhattn.grade"):
                    return f"imports {alias.name}: submissions may not use the grader's code"
                if alias.name.startswith("mhattn"):
                    mhattn_aliases.add(alias.asname or alias.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            mod = node.module or ""
            if mod.split(".")[0] == "solutions":
                return f"imports from {mod}: submissions may not use anything under solutions/"
            if mod.startswith("mhattn.grade") or (mod == "mhattn" and any(a.name == "grade" for a in node.names)):
                return f"imports from {mod}: submissions may not use the grader's code"
            if mod.startswith("mhattn"):
                for alias in node.names:
                    if alias.name in ex.banned_names:
                        return f"imports {alias.name} from {mod}: that is mhattn's own reference for this exercise"
                    mhattn_aliases.add(alias.asname or alias.name)
        elif isinstance(node, ast.Attribute) and node.attr in ex.banned_names and _root(node) in mhattn_aliases:
            return f"uses mhattn's {node.attr}: that is mhattn's own reference for this exercise"
    return None


def _root(node):
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def load(path: Path, source: str, box: Sandbox) -> types.ModuleType:
    """Execute the learner's source as a new module named after the file (not put in sys.modules)."""
    module = types.ModuleType(f"submission_{path.stem}")
    module.__file__ = str(path)
    code = compile(source, str(path), "exec")
    box.active = True
    try:
        exec(code, module.__dict__)
    finally:
        box.active = False
    return module


def solutions_used(path: Path) -> str | None:
    """Reason to refuse if any module from a ``solutions`` folder (other than this file's own) got loaded."""
    own = path.resolve().parent
    for mod in list(sys.modules.values()):
        f = getattr(mod, "__file__", None)
        if f and "solutions" in Path(f).resolve().parts and Path(f).resolve().parent != own:
            return f"loaded {f}: submissions may not use anything under solutions/"
    return None


def grade_file(ex: Exercise, path: Path, seed: int) -> tuple[int, str]:
    """(points, one-line reason) for one exercise file."""
    if not path.is_file():
        return 0, f"file not found: {path}"
    source = path.read_text(encoding="utf-8")
    try:
        compile(source, str(path), "exec")
    except SyntaxError as err:
        return 0, f"{path.name} line {err.lineno}: SyntaxError: {err.msg} (the file does not parse)"
    refused = scan_imports(source, ex)
    if refused:
        return 0, refused
    box = Sandbox()
    install_tripwires(ex.banned, box)
    stage = "loading the file"
    try:
        module = load(path, source, box)
        if box.tripped:
            raise GradeFailure(f"the file calls mhattn's own {box.tripped[0]}, the reference for this exercise")
        missing = [f for f in ex.functions if not callable(getattr(module, f, None))]
        if missing:
            return 0, f"missing function(s): {', '.join(missing)}"
        stage = "visible test"
        ex.visible(module, box)
        stage = "hidden test"
        ex.hidden(module, box, np.random.default_rng(seed))
        refused = solutions_used(path)
        if refused:
            return 0, refused
    except GradeFailure as err:
        return 0, f"{stage} failed: {err}"
    except NotImplementedError:
        frame = traceback.extract_tb(sys.exc_info()[2])[-1]
        return 0, f"not implemented yet: {frame.name} raises NotImplementedError"
    except BaseException as err:  # noqa: BLE001 - the learner's exception, reported as its last traceback line
        last = traceback.format_exception_only(type(err), err)[-1].strip()
        lines = [f.lineno for f in traceback.extract_tb(err.__traceback__) if f.filename == str(path)]
        where = f" ({path.name} line {lines[-1]})" if lines else ""
        return 0, f"{stage}: exception {last}{where}"
    return ex.points, "all visible and hidden tests passed"


def main(argv=None) -> int:
    name, file, seed, out = argv if argv is not None else sys.argv[1:]
    ex = find(name)
    np.seterr(all="ignore")  # a learner's overflow shows up as a NaN in the comparison instead
    points, reason = grade_file(ex, Path(file), int(seed))
    Path(out).write_text(json.dumps({"points": points, "reason": reason}), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
