"""Imports run one way: every ``import`` in mhattn (parsed, not run) points down the layer order, and none forms a cycle.

The order is CONTRIBUTING.md's layer line, read from there (``argtypes ← backend ← ... ← commands ← cli``,
lowest first): a unit (a top-level module or package of mhattn; ``mhattn`` is the package's ``__init__``) may
import only units to its left, and only ``classroom`` and ``commands`` import ``grade``. Imports inside functions
count too: a lazy import is still a dependency.
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import pytest

import mhattn

PACKAGE = Path(mhattn.__file__).resolve().parent
CONTRIBUTING = Path(__file__).resolve().parents[2] / "CONTRIBUTING.md"


def layer_order(text: str) -> tuple[str, ...]:
    """The units of the one line of ``text`` that is a backquoted chain ``a ← b ← ...``, lowest first."""
    lines = re.findall(r"^`(\w+(?: ← \w+)+)`$", text, flags=re.M)
    assert len(lines) == 1, f"expected one layer line in CONTRIBUTING.md, found {len(lines)}"
    return tuple(lines[0].split(" ← "))


ORDER = layer_order(CONTRIBUTING.read_text(encoding="utf-8"))
ONLY_IMPORTED_BY = {"grade": {"classroom", "commands"}}


def module_name(path: Path) -> str:
    """``mhattn.heads.jobs`` for ``mhattn/heads/jobs.py``; a package's ``__init__.py`` is the package."""
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(source: str, module: str, is_package: bool, known=frozenset()) -> set[str]:
    """Every ``mhattn`` module named by an ``import`` or ``from ... import`` anywhere in ``source``
    (``from package import sub`` names ``package.sub`` where that is one of the ``known`` modules)."""
    found = set()
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the package, up level - 1
                up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(up + ([node.module] if node.module else []))
            found.update(f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names)
    return {m for m in found if m == "mhattn" or m.startswith("mhattn.")}


@functools.cache
def module_graph(root: Path = PACKAGE) -> dict[str, set[str]]:
    """``{module: modules of mhattn it imports}`` for every ``.py`` file under ``root`` (parsed once; do not mutate)."""
    paths = {module_name(path): path for path in sorted(root.rglob("*.py"))}
    return {
        name: imported_modules(path.read_text(encoding="utf-8"), name, path.name == "__init__.py", set(paths))
        for name, path in paths.items()
    }


def unit(module: str) -> str:
    """The layer unit of a module: ``mhattn.heads.jobs`` -> ``heads``; the package itself -> ``mhattn``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "mhattn"


def wrong_way(graph: dict[str, set[str]]) -> list[str]:
    """The imports of ``graph`` that break the layer rules, as readable lines (empty: none)."""
    rank = {u: i for i, u in enumerate(ORDER)}
    bad = []
    for src, targets in sorted(graph.items()):
        for dst in sorted(targets):
            a, b = unit(src), unit(dst)
            if a == b:
                continue
            if a not in rank or b not in rank:
                bad.append(f"{src} -> {dst}: {a if a not in rank else b} has no place in the layer order")
            elif rank[b] > rank[a]:
                bad.append(f"{src} -> {dst}: {a} imports {b}, a layer above it")
            elif b in ONLY_IMPORTED_BY and a not in ONLY_IMPORTED_BY[b]:
                bad.append(f"{src} -> {dst}: only {' and '.join(sorted(ONLY_IMPORTED_BY[b]))} import {b}")
    return bad


def cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import cycle among the modules of ``graph`` (``[a, b, ..., a]``), or ``[]``."""
    state, stack = {}, []

    def visit(m):
        state[m] = "open"
        stack.append(m)
        for t in sorted(graph.get(m, ())):
            if state.get(t) == "open":
                return stack[stack.index(t) :] + [t]
            if t not in state and (found := visit(t)):
                return found
        stack.pop()
        state[m] = "done"
        return []

    for m in sorted(graph):
        if m not in state and (found := visit(m)):
            return found
    return []


def test_every_unit_of_the_package_has_a_place_in_the_order():
    units = {unit(m) for m in module_graph()}
    assert units == set(ORDER), f"missing from ORDER: {units - set(ORDER)}; gone from the package: {set(ORDER) - units}"


def test_no_import_runs_against_the_layer_order():
    graph = module_graph()
    assert sum(len(t) for t in graph.values()) > 100, "the parser found too few imports to mean anything"
    assert wrong_way(graph) == []


def test_the_imports_form_no_cycle():
    assert cycle(module_graph()) == []


WRONG_WAY = {  # what the check must say -> (importing module, imported module)
    "functional imports nn, a layer above it": ("mhattn.functional.mha", "mhattn.nn.attention"),
    "plots imports heads, a layer above it": ("mhattn.plots.pruning", "mhattn.heads.expectation"),
    "grade imports classroom, a layer above it": ("mhattn.grade.checks", "mhattn.classroom.summary"),
    "only classroom and commands import grade": ("mhattn.cli", "mhattn.grade.runner"),
    "newthing has no place in the layer order": ("mhattn.heads.jobs", "mhattn.newthing"),
}


@pytest.mark.parametrize("words", list(WRONG_WAY))
def test_the_check_fails_on_a_wrong_way_import(words):
    """A synthetic graph: the real one plus one import that runs the wrong way is refused, with words that say why."""
    src, dst = WRONG_WAY[words]
    graph = {**module_graph(), src: {dst}}
    assert [line for line in wrong_way(graph) if words in line] == [f"{src} -> {dst}: {words}"]


def test_the_check_finds_a_cycle_and_the_parser_resolves_relative_imports():
    assert cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert cycle({"a": {"b"}, "b": set()}) == []
    text = (
        "from . import jobs\nfrom ..nn import attention\nimport mhattn.backend as B\ndef f():\n    from mhattn.course import x\n"
    )
    found = {"mhattn.heads.jobs", "mhattn.nn", "mhattn.backend", "mhattn.course"}
    assert imported_modules(text, "mhattn.heads.table", False, {"mhattn.heads.jobs"}) == found
    assert "mhattn.heads" in imported_modules(text, "mhattn.heads.table", False)  # not known as a module: the package
