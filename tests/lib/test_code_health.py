"""Sizes a reader can hold in their head: no module of mhattn or of the tests over 300 lines, no function of mhattn
over 40 code lines (CONTRIBUTING.md, STYLE: "when a file grows past that, it is two concepts").

A function's code lines are the lines of its body that hold code: its docstring, blank lines and comment-only lines
do not count, and a nested function's lines count for the function around it too. The source is read, not run.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import mhattn

PACKAGE = Path(mhattn.__file__).resolve().parent
TESTS = Path(__file__).resolve().parents[1]
MAX_MODULE_LINES = 300
MAX_FUNCTION_CODE_LINES = 40
NOT_CODE = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER}


def code_line_numbers(source: str) -> set[int]:
    """The numbers of the lines of ``source`` that hold a token of code (every line of a multi-line string)."""
    found = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type not in NOT_CODE:
            found.update(range(tok.start[0], tok.end[0] + 1))
    return found


def function_sizes(source: str) -> list[tuple[int, str, int]]:
    """``(line, name, code lines)`` of every function and method in ``source``, nested ones included."""
    code, sizes = code_line_numbers(source), []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        body = set(range(node.body[0].lineno, node.end_lineno + 1))
        first = node.body[0]
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
            body -= set(range(first.lineno, first.end_lineno + 1))  # the docstring
        sizes.append((node.lineno, node.name, len(body & code)))
    return sizes


def too_long_modules(root: Path, limit: int = MAX_MODULE_LINES) -> list[str]:
    """``"path: N lines"`` for each ``.py`` file under ``root`` longer than ``limit`` lines."""
    lengths = {path: len(path.read_text(encoding="utf-8").splitlines()) for path in sorted(root.rglob("*.py"))}
    return [f"{path.relative_to(root.parent)}: {n} lines" for path, n in lengths.items() if n > limit]


def too_long_functions(root: Path, limit: int = MAX_FUNCTION_CODE_LINES) -> list[str]:
    """``"path:line name: N code lines"`` for each function under ``root`` with more than ``limit`` code lines."""
    return [
        f"{path.relative_to(root.parent)}:{line} {name}: {n} code lines"
        for path in sorted(root.rglob("*.py"))
        for line, name, n in function_sizes(path.read_text(encoding="utf-8"))
        if n > limit
    ]


def test_no_module_of_the_package_is_over_300_lines():
    assert len(list(PACKAGE.rglob("*.py"))) > 50, "found too few modules to mean anything"
    assert too_long_modules(PACKAGE) == []


def test_no_test_module_is_over_300_lines():
    assert too_long_modules(TESTS) == []


def test_no_function_of_the_package_is_over_40_code_lines():
    assert sum(len(function_sizes(p.read_text(encoding="utf-8"))) for p in PACKAGE.rglob("*.py")) > 500
    assert too_long_functions(PACKAGE) == []


def _function(code_lines: int) -> str:
    """A function with ``code_lines`` lines of code, a docstring, blank lines, comments and a multi-line string."""
    body = ['    """A docstring', '    of two lines."""', "", "    # a comment", '    text = """one', 'two"""']
    body += [f"    x{i} = {i}  # a trailing comment" for i in range(code_lines - 3)] + ["", "    return text"]
    return "def f():\n" + "\n".join(body) + "\n"


def test_the_count_skips_docstring_blank_and_comment_lines_and_the_checks_fail_past_the_limits(tmp_path):
    assert function_sizes(_function(40)) == [(1, "f", 40)]
    nested = "def outer():\n    '''Doc.'''\n\n    def inner():\n        return 1\n\n    return inner\n"
    assert function_sizes(nested) == [(1, "outer", 3), (4, "inner", 1)]
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "ok.py").write_text(_function(40) + "\n" * (300 - _function(40).count("\n")), encoding="utf-8")
    assert too_long_modules(package) == [] and too_long_functions(package) == []
    (package / "big.py").write_text(_function(41) + "y = 1\n" * 290, encoding="utf-8")
    assert too_long_functions(package) == ["pkg/big.py:1 f: 41 code lines"]
    assert too_long_modules(package) == [f"pkg/big.py: {_function(41).count(chr(10)) + 290} lines"]


def test_the_step_files_hold_no_numpy_branch_and_no_engine():
    """Issues 28 and 33: a step file reads ``xp.`` calls only: no NumPy-only branch, and neither the engine, its
    thread pool nor a speed helper is named there (the words themselves, as ``grep -rE`` would find them)."""
    steps = sorted((PACKAGE / "functional").glob("*.py"))
    assert len(steps) > 10
    branching = [
        p.name
        for p in steps
        if re.search(r"is_numpy|executor|kernels|xp_extra|threading|ThreadPool", p.read_text(encoding="utf-8"))
    ]
    assert branching == []


def test_the_version_is_written_once():
    """Issue 33: ``mhattn.__version__`` is the one place; pyproject.toml reads it, the installed metadata agrees."""
    import importlib.metadata

    import mhattn

    pyproject = (PACKAGE.parent / "pyproject.toml").read_text(encoding="utf-8")
    assert not re.search(r"^version\s*=\s*\"", pyproject, flags=re.M) and 'dynamic = ["version"]' in pyproject
    assert 'version = { attr = "mhattn.__version__" }' in pyproject
    assert importlib.metadata.version("mhattn") == mhattn.__version__


def private_imports(root: Path) -> list[str]:
    """``"path:line module.name"`` for each ``from mhattn.x import _name`` under ``root``: a private name taken from
    another module (make it public where it is, or move it)."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("mhattn"):
                found += [f"{path.relative_to(root.parent)}:{node.lineno} {node.module}.{a.name}"
                          for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]  # fmt: skip
    return found


def test_no_module_of_the_package_imports_a_private_name_of_another():
    assert private_imports(PACKAGE) == []


def test_the_private_import_check_finds_one(tmp_path):
    (tmp_path / "pkg").mkdir()
    source = "from mhattn.heads.prune import PruneSettings, _copy\nfrom mhattn import __version__\n"
    (tmp_path / "pkg" / "a.py").write_text(source)
    assert private_imports(tmp_path / "pkg") == ["pkg/a.py:1 mhattn.heads.prune._copy"]
