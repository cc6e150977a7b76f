"""Stand-ins for the mhattn modules an exercise may not run while it is graded.

While exercise 2 is graded, ``mhattn/functional/softmax.py`` is replaced (in the sandbox: a file
bound over it; without one: an import hook in the worker) by source text that defines the same
names, where every function and class of the module raises when used; so is every other module
:mod:`mhattn.grade.routes` refuses for that exercise (tiled attention, the layers, gradcheck, ...:
all but what the exercise's own file may use). Modules that import from a stand-in still import;
a route to the reference through another step (e.g. attention weights computed by mhattn's
attention, which calls mhattn's softmax, or by tiled attention, which does not) raises too.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import types

from mhattn.grade import routes

_HEADER = '''"""Hidden while {exercise} is graded: {module} is the reference for this step."""

from __future__ import annotations


def _hidden(name, *args, **kwargs):
    raise RuntimeError("{module}." + name + " is hidden while {exercise} is graded: write this step yourself")


class _Hidden:
    def __init__(self, name):
        self._name = name

    def __getattr__(self, attr):
        _hidden(self.__dict__.get("_name", "?"))

    def __call__(self, *args, **kwargs):
        _hidden(self._name)

'''


def _literal(value) -> bool:
    if value is None or type(value) in (bool, int, float, str, bytes):
        return True
    return type(value) in (tuple, frozenset) and all(_literal(v) for v in value)


def _line(modname: str, name: str, obj) -> str:
    """One definition of the stand-in for ``modname.name``."""
    if inspect.isfunction(obj) or inspect.isclass(obj) or inspect.isbuiltin(obj):
        origin = getattr(obj, "__module__", None)
        if origin == modname:
            if inspect.isclass(obj):
                return f"class {name}:\n    def __init__(self, *args, **kwargs):\n        _hidden({name!r})\n"
            return f"def {name}(*args, **kwargs):\n    _hidden({name!r})\n"
        if origin and "." not in obj.__qualname__ and "<" not in obj.__qualname__:
            return f"from {origin} import {obj.__qualname__} as {name}"
    if _literal(obj):
        return f"{name} = {obj!r}"
    return f"{name} = _Hidden({name!r})"


_UNIMPORTABLE = '''"""Hidden while {exercise} is graded."""

raise ModuleNotFoundError("{module} is hidden while {exercise} is graded: write this step yourself", name={module!r})
'''


@functools.cache
def stub_source(modname: str, exercise: str) -> str:
    """Python source of the stand-in for ``modname`` while ``exercise`` is graded (one that raises on import where
    the grader cannot import ``modname`` itself, e.g. a missing optional library: the worker could not either)."""
    try:
        module = importlib.import_module(modname)
    except Exception:  # noqa: BLE001 - whatever stops the import here stops it in the worker
        return _UNIMPORTABLE.format(module=modname, exercise=exercise)
    lines = [_HEADER.format(module=modname, exercise=exercise)]
    for name, obj in vars(module).items():
        if name.startswith("__") or isinstance(obj, types.ModuleType) or name == "annotations":
            continue
        lines.append(_line(modname, name, obj))
    if hasattr(module, "__all__"):
        lines.append(f"__all__ = {list(module.__all__)!r}")
    return "\n".join(lines) + "\n"


def stubs_for(modules, exercise: str) -> dict[str, str]:
    """``{module name: stand-in source}`` for ``modules`` (an exercise's banned references) and every module
    :func:`mhattn.grade.routes.refused` names for ``exercise``."""
    return {m: stub_source(m, exercise) for m in sorted({*modules, *routes.refused(exercise)})}
