"""Which mhattn modules an exercise may run while it is graded: every other one is a stand-in.

A step's answer can come from many mhattn functions besides the one the exercise names: exercise 4's
backward from tiled attention's backward, exercise 2's softmax from tiled attention with identity keys
and values, exercise 3's weights from tiled attention with identity values, a parameter count from freshly
built parameters. Listing those by hand always misses one, so the rule is the other way round:

* an exercise may use what its own file imports from mhattn (:data:`USES`: the skeleton's imports,
  e.g. exercise 4 may call ``softmax_backward``; ``tests/test_grade_routes.py`` checks the table against
  ``exercises_src/``), and exercise 10 the loss functions the worker builds (:data:`WORKER`);
* the modules those functions need, found by a static call graph of the package (:func:`graph`):
  every name a function refers to, in its own module or imported from another, and the top-level code
  of each module it lives in (that runs on import);
* :data:`UTILITIES`, whatever the exercise: where arrays live and generic array helpers (the array API
  backend package: its arrays, host arrays, the scatter-add, one-hot and uniform helpers, the number checks);
  no step of the course is computed there.

Every other mhattn module below the grader that defines a function or a class is *refused*
(:func:`refused`): replaced by a stand-in whose functions raise (:mod:`mhattn.grade.stubs`). Packages
above the grader (:data:`ABOVE`: the grader itself, the class layer, the commands) are not importable
at all (:mod:`mhattn.grade.guard`). Nothing here imports the modules it reads.
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass, field
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1]
ABOVE = ("grade", "classroom", "commands", "cli", "__main__")  # mhattn.<name>: above the grader, or the grader
UTILITIES = ("mhattn.backend", "mhattn.backend.arrays", "mhattn.backend.host", "mhattn.backend.extra", "mhattn.backend.argtypes")
WORKER = "worker"  # in USES: the mhattn functions the worker's loss functions import (exercise 10)
USES = {  # what each exercise's own file imports from mhattn (the skeleton in exercises_src/)
    "ex03_attention_forward": ("mhattn.functional:softmax_forward",),
    "ex04_attention_backward": ("mhattn.functional.softmax:SoftmaxCache", "mhattn.functional.softmax:softmax_backward"),
    "ex06_mha_forward": tuple(f"mhattn.functional:{n}" for n in ("combine_heads_forward",
                              "scaled_dot_product_attention_forward", "split_heads_forward")),
    "ex07_mha_backward": tuple(f"mhattn.functional:{n}_{way}" for n in ("combine_heads", "linear",
                               "scaled_dot_product_attention", "split_heads") for way in ("backward", "forward")),
    "ex10_random_removal": (WORKER,),
}  # fmt: skip


@dataclass
class Module:
    """What one module binds at top level and what each binding refers to."""

    name: str
    is_package: bool
    defines: set = field(default_factory=set)  # functions and classes defined here
    bound: set = field(default_factory=set)  # every top-level name bound here (defs, assignments)
    aliases: dict = field(default_factory=dict)  # name -> "mhattn.x" (a module) or "mhattn.x:y" (an object)
    refs: dict = field(default_factory=dict)  # binding -> names it refers to, unresolved: ("name", "attr", ...)
    top: set = field(default_factory=set)  # names the module's top-level code refers to (runs on import)


def module_names(package: Path = PACKAGE) -> dict[str, Path]:
    """``{module name: source file}`` of every mhattn module below the grader.

    Only importable modules count: every folder on the way is a package (has ``__init__.py``) and every name is an
    identifier, so the course materials shipped as data in the wheel (``course_materials/notebooks/*.py``) are
    neither modules nor run.
    """
    out = {}
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package.parent).with_suffix("").parts
        folders = [package.parent.joinpath(*parts[:i]) for i in range(1, len(parts))]
        if not all(p.isidentifier() for p in parts) or not all((f / "__init__.py").is_file() for f in folders):
            continue
        parts = parts[:-1] if parts[-1] == "__init__" else parts
        if len(parts) == 1 or parts[1] not in ABOVE:
            out[".".join(parts)] = path
    return out


def _absolute(node: ast.ImportFrom, module: Module) -> str:
    if not node.level:
        return node.module or ""
    base = module.name.split(".")
    base = base[: len(base) - node.level + (1 if module.is_package else 0)]
    return ".".join(base + ([node.module] if node.module else []))


def _imports(node, module: Module, into: dict) -> None:
    """Record the mhattn names an import statement binds, in ``into``."""
    if isinstance(node, ast.Import):
        for a in node.names:
            if a.name.split(".")[0] == "mhattn":
                into[a.asname or a.name.split(".")[0]] = a.name if a.asname else "mhattn"
    elif isinstance(node, ast.ImportFrom):
        src = _absolute(node, module)
        if src.split(".")[0] == "mhattn":
            for a in node.names:
                into[a.asname or a.name] = f"{src}:{a.name}"


def _chains(nodes) -> set:
    """Every name read in ``nodes``, with the attributes taken of it: ``F.softmax_forward`` -> ("F", "softmax_forward")."""
    out = set()
    for root in nodes:
        for node in ast.walk(root):
            if isinstance(node, ast.Attribute):
                chain, inner = [node.attr], node.value
                while isinstance(inner, ast.Attribute):
                    chain.append(inner.attr)
                    inner = inner.value
                if isinstance(inner, ast.Name):
                    out.add((inner.id, *reversed(chain)))
            elif isinstance(node, ast.Name):
                out.add((node.id,))
    return out


def _local_imports(root, module: Module) -> set:
    """Names imported inside a function or class body, as references (``from mhattn.x import y`` refers to y)."""
    local: dict = {}
    for node in ast.walk(root):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            _imports(node, module, local)
    module.aliases.update({k: v for k, v in local.items() if k not in module.aliases})
    return {(k,) for k in local}


def _top_level(stmts, module: Module) -> None:
    for node in stmts:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            module.defines.add(node.name)
            module.bound.add(node.name)
            module.refs[node.name] = _chains([node]) | _local_imports(node, module)
            heads = [*node.decorator_list, *getattr(node, "bases", []), *[k.value for k in getattr(node, "keywords", [])]]
            if not isinstance(node, ast.ClassDef):
                heads += [*node.args.defaults, *(d for d in node.args.kw_defaults if d is not None)]
            module.top |= _chains(heads)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            _imports(node, module, module.aliases)
        elif isinstance(node, (ast.If, ast.Try)):
            module.top |= _chains([getattr(node, "test", ast.Constant(None))])
            handlers = [h.body for h in getattr(node, "handlers", [])]
            for body in (node.body, node.orelse, getattr(node, "finalbody", []), *handlers):
                _top_level(body, module)
        else:
            targets = [t for n in ast.walk(node) if isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign))
                       for t in (n.targets if isinstance(n, ast.Assign) else [n.target])]  # fmt: skip
            names = {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
            chains = _chains([node])
            module.bound |= names
            for name in names:
                module.refs[name] = chains
            module.top |= chains


@functools.lru_cache(maxsize=1)
def graph() -> dict[str, Module]:
    """The static view of every mhattn module below the grader (parsed, never imported)."""
    out = {}
    for name, path in module_names().items():
        module = Module(name, path.name == "__init__.py")
        _top_level(ast.parse(path.read_text(encoding="utf-8"), str(path)).body, module)
        out[name] = module
    return out


def resolve(target: str, chain=(), seen=None) -> set[str]:
    """Nodes (``"module:name"``, or ``"module"`` for a whole module) that ``target`` plus attributes ``chain`` names."""
    mods, seen = graph(), set() if seen is None else seen
    if (target, chain) in seen:
        return set()
    seen.add((target, chain))
    if ":" in target:
        mod, name = target.split(":")
        sub = f"{mod}.{name}"
        if sub in mods and name not in mods[mod].bound and name not in mods[mod].aliases:
            return resolve(sub, chain, seen)
        if mod in mods and name in mods[mod].aliases:
            return resolve(mods[mod].aliases[name], chain, seen)
        return {target} if mod in mods else set()
    if target not in mods:
        return set()
    return resolve(f"{target}:{chain[0]}", chain[1:], seen) if chain else {target}


def _refs_of(mod: Module, names) -> set[str]:
    out = set()
    for chain in names:
        if chain[0] in mod.bound:
            out.add(f"{mod.name}:{chain[0]}")
        elif chain[0] in mod.aliases:
            out |= resolve(mod.aliases[chain[0]], tuple(chain[1:]))
    return out


def closure(entries) -> set[str]:
    """Every node the ``entries`` (``"module:name"``) may run or read, and the modules they live in."""
    mods, todo, seen = graph(), [n for e in entries for n in resolve(e)], set()
    while todo:
        node = todo.pop()
        if node in seen:
            continue
        seen.add(node)
        mod, _, name = node.partition(":")
        if mod not in seen:
            todo.append(mod)
        if name:
            todo += _refs_of(mods[mod], mods[mod].refs.get(name, ()))
        else:  # a module: its top-level code runs on import, and a module used whole exposes everything
            todo += _refs_of(mods[mod], mods[mod].top)
    return seen


@functools.lru_cache(maxsize=1)
def worker_uses() -> tuple[str, ...]:
    """The mhattn names the worker's own loss functions import (exercise 10's ``mha_loss``)."""
    worker = Module("mhattn.grade.worker", False)
    tree = ast.parse(Path(__file__).with_name("worker.py").read_text(encoding="utf-8"))
    found: dict = {}
    for node in ast.walk(tree):
        _imports(node, worker, found)
    return tuple(sorted(v for v in found.values() if ":" in v))


def entries(exercise: str) -> tuple[str, ...]:
    """What ``exercise`` may call of mhattn: its file's imports, the utilities (an unknown name: the utilities only)."""
    uses = [u for e in USES.get(exercise, ()) for u in (worker_uses() if e == WORKER else (e,))]
    return (*uses, *UTILITIES)


@functools.cache
def needed(exercise: str) -> frozenset[str]:
    """The modules whose code runs when ``exercise`` uses what it may (they stay real)."""
    return frozenset(n.partition(":")[0] for n in closure(entries(exercise)))


@functools.cache
def refused(exercise: str) -> tuple[str, ...]:
    """The mhattn modules replaced by stand-ins while ``exercise`` is graded: every module below the grader that
    defines a function or a class, except those :func:`needed` by what the exercise may use."""
    keep = needed(exercise)
    return tuple(sorted(n for n, m in graph().items() if m.defines and n not in keep))


def reaches(node: str, targets) -> bool:
    """Whether ``node`` (``"module:name"``) may run any of ``targets`` (``"module:name"``, resolved)."""
    want = {t for x in targets for t in resolve(x)}
    return bool(closure([node]) & want)
