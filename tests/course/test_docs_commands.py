"""Snags learners ran into, each checked as a kind: what a newcomer types from the docs works as written.

* every README command that installs a wheel expands to a file (no glob inside quotes);
* a course folder from ``mhattn course init`` checks one notebook with the command its README prints;
* ``mhattn course init`` restores what was deleted, never overwrites an edit, and names the way out (``--force``);
* no notebook tells a wheel user to run a repository file the wheel lacks.

How bad options read is in ``test_cli_errors.py``; the prune table's cells in ``tests/lib/test_prune_table.py``.
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from mhattn import cli

ROOT = Path(__file__).resolve().parents[2]


def _bash_lines(markdown: str) -> list[str]:
    """The command lines of every fenced ```bash block."""
    blocks = re.findall(r"```bash\n(.*?)```", markdown, flags=re.S)
    return [line for block in blocks for line in block.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def _quoted_globs(line: str) -> list[str]:
    """Quoted strings of ``line`` holding ``*`` or ``?`` the shell will not expand (those inside ``$(...)`` it does)."""
    line = re.sub(r"\$\([^)]*\)", "SUBST", line)
    return [q for q in re.findall(r"\"[^\"]*\"|'[^']*'", line) if re.search(r"[*?]", q)]


# --- the README's wheel command --------------------------------------------------------------------------------------


def _wheel_lines() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return [line for line in _bash_lines(text) if ".whl" in line and "install" in line]


def test_the_readme_has_a_wheel_command_and_no_inline_glob_in_quotes():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert _wheel_lines(), "the README gives no bash command that installs the wheel"
    inline = [span for span in re.findall(r"`([^`\n]+)`", text) if ".whl" in span]
    assert not [span for span in inline if _quoted_globs(span)], inline


@pytest.mark.parametrize("line", _wheel_lines() or ["(none)"])
def test_a_readme_wheel_command_parses_and_expands_to_the_wheel_file(tmp_path, line):
    """Run the line with ``pip`` replaced by a function that prints its arguments, beside a wheel in ``dist/``."""
    assert not _quoted_globs(line), f"a glob inside quotes is never expanded: {line}"
    assert subprocess.run(["bash", "-n", "-c", line], capture_output=True).returncode == 0, line
    (tmp_path / "dist").mkdir()
    (tmp_path / "dist" / "mhattn-0.1.0-py3-none-any.whl").write_bytes(b"PK")
    fake = 'pip() { printf \'%s\\n\' "$@"; }; mhattn() { :; }; python() { shift 2; pip "$@"; }\n'
    res = subprocess.run(["bash", "-c", fake + line], cwd=tmp_path, capture_output=True, text=True, timeout=30)
    args = [a for a in res.stdout.splitlines() if ".whl" in a]
    assert args, f"{line!r} printed no wheel argument: {res.stdout!r} {res.stderr!r}"
    for arg in args:
        file_part = re.sub(r"\[[^\]]*\]$", "", arg)
        assert (tmp_path / file_part).is_file(), f"{line!r} passes {arg!r} to pip: no such file"


# --- checking one notebook in a course folder ------------------------------------------------------------------------


def _course(tmp_path) -> Path:
    dest = tmp_path / "my-course"
    assert cli.main(["course", "init", str(dest)]) == 0
    return dest


def test_the_course_extra_holds_what_the_course_folder_commands_need():
    line = re.search(r"^course = \[(.*)\]$", (ROOT / "pyproject.toml").read_text(), flags=re.M)  # tomllib: 3.11+
    names = {re.split(r"[<>=\[ ]", req.strip().strip('"'))[0] for req in line.group(1).split(",")}
    assert {"jupyterlab", "pytest", "nbval", "matplotlib"} <= names


def _tiny_notebook(path: Path) -> None:
    """A two-cell notebook whose stored outputs match only through the sanitizer (a memory address) and mhattn."""
    nbformat = pytest.importorskip("nbformat")
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    cells = [("print(hex(id(object())))", "0x7f0000000000\n"), ("import mhattn\nprint(mhattn.__name__)", "mhattn\n")]
    for n, (source, out) in enumerate(cells, start=1):
        cell = nbformat.v4.new_code_cell(source, execution_count=n)
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=out)]
        nb.cells.append(cell)
    path.write_text(nbformat.writes(nb), encoding="utf-8")


@pytest.mark.slow  # over 10 s on 2 loaded cores
def test_check_one_notebook_works_in_a_course_folder_as_its_readme_says(tmp_path, capsys):
    pytest.importorskip("nbval")
    dest = _course(tmp_path)
    out = capsys.readouterr().out
    lines = _bash_lines((dest / "README.md").read_text(encoding="utf-8"))
    check = [line.split("#")[0].split() for line in lines if "--nbval" in line]
    assert len(check) == 1 and check[0][:3] == ["python", "-m", "pytest"], lines
    command = check[0]
    assert " ".join(command[:-1]) in out  # what init prints is the same command
    sanitize = command[command.index("--nbval-sanitize-with") + 1]
    assert (dest / sanitize).is_file() and (dest / command[-1]).is_file()  # the notebook named there exists
    _tiny_notebook(dest / "notebooks" / "99_tiny.ipynb")
    argv = [sys.executable, *command[1:-1], "-p", "no:randomly", "notebooks/99_tiny.ipynb"]
    res = subprocess.run(argv, cwd=dest, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0 and "2 passed" in res.stdout, res.stdout[-3000:] + res.stderr[-2000:]


# --- course init restores, keeps edits, and names the way out --------------------------------------------------------


def test_init_restores_a_deleted_notebook_beside_an_edit_and_names_the_way_out(tmp_path, capsys):
    dest = _course(tmp_path)
    notebook = dest / "notebooks" / "03_manual_backprop.ipynb"
    original = notebook.read_bytes()
    exercise, other = dest / "exercises" / "ex01_split_heads.py", dest / "exercises" / "ex02_softmax.py"
    exercise.write_text("MY WORK 1\n", encoding="utf-8")
    other.write_text("MY WORK 2\n", encoding="utf-8")
    notebook.unlink()
    capsys.readouterr()
    assert cli.main(["course", "init", str(dest)]) == 0
    out = capsys.readouterr().out
    assert notebook.read_bytes() == original  # restored
    assert exercise.read_text(encoding="utf-8") == "MY WORK 1\n" and other.read_text(encoding="utf-8") == "MY WORK 2\n"
    assert "exercises/ex01_split_heads.py" in out and "exercises/ex02_softmax.py" in out
    assert f"mhattn course init {dest} --force" in out and ".bak" in out  # the way out, named

    # --force FILE: that file only; the learner's version is moved aside, never lost, even the second time
    assert cli.main(["course", "init", str(dest), "--force", "exercises/ex01_split_heads.py"]) == 0
    assert exercise.with_name("ex01_split_heads.py.bak").read_text(encoding="utf-8") == "MY WORK 1\n"
    assert b"NotImplementedError" in exercise.read_bytes()
    assert other.read_text(encoding="utf-8") == "MY WORK 2\n"  # not named: untouched
    exercise.write_text("MY WORK 3\n", encoding="utf-8")
    assert cli.main(["course", "init", str(dest), "--force", "exercises/ex01_split_heads.py"]) == 0
    assert exercise.with_name("ex01_split_heads.py.bak").read_text(encoding="utf-8") == "MY WORK 1\n"
    assert exercise.with_name("ex01_split_heads.py.bak2").read_text(encoding="utf-8") == "MY WORK 3\n"


def test_init_force_names_an_unknown_file(tmp_path, capsys):
    dest = _course(tmp_path)
    with pytest.raises(SystemExit) as exc:
        cli.main(["course", "init", str(dest), "--force", "notebooks/nope.ipynb"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "notebooks/nope.ipynb is not a course file" in err and err.count("\n") == 1


def test_the_folder_readme_force_command_works_from_inside_the_folder(tmp_path, capsys, monkeypatch):
    dest = _course(tmp_path)
    line = next(x for x in _bash_lines((dest / "README.md").read_text(encoding="utf-8")) if "--force" in x)
    argv = line.split("#")[0].split()
    assert argv[:3] == ["mhattn", "course", "init"]
    target = dest / argv[-1]
    original = target.read_bytes()
    target.write_bytes(b"{}")
    monkeypatch.chdir(dest)
    assert cli.main(argv[1:]) == 0
    assert target.read_bytes() == original and target.with_name(target.name + ".bak").read_bytes() == b"{}"


# --- notebooks never send a wheel user to a repository file -----------------------------------------------------------

REPO_ONLY = ("benchmarks/", "scripts/", "tests/", "solutions/", "exercises_src/", ".ci/")
QUALIFIER = re.compile(r"repository|a clone|in a clone", re.I)


def _notebook_paragraphs():
    """(notebook, paragraph) for every markdown paragraph, code line and text output of the stored notebooks."""
    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        nb = json.loads(path.read_text(encoding="utf-8"))
        for cell in nb["cells"]:
            source = "".join(cell["source"])
            parts = source.split("\n\n") if cell["cell_type"] == "markdown" else source.splitlines()
            for out in cell.get("outputs", []):
                parts += "".join(out.get("text", "")).splitlines()
            yield from ((path.name, part) for part in parts)


def test_no_notebook_sends_a_wheel_user_to_a_repository_file():
    bad = [(name, text) for name, text in _notebook_paragraphs()
           if any(d in text for d in REPO_ONLY) and not QUALIFIER.search(text)]  # fmt: skip
    assert not bad, "name the repository (or give the wheel's way) where a notebook mentions these:\n" + "\n".join(
        f"{name}: {text[:160]}" for name, text in bad
    )


def test_every_python_m_command_in_the_notebooks_is_in_the_package():
    modules = {m for _, text in _notebook_paragraphs() for m in re.findall(r"python -m (mhattn[\w.]*)", text)}
    assert "mhattn.course.scaling" in modules
    assert all(importlib.util.find_spec(m) is not None for m in modules), modules


def test_the_packaged_scaling_benchmark_writes_a_record(tmp_path, capsys):
    from mhattn.course import scaling

    out = tmp_path / "r.json"
    argv = ["--lengths", "8", "16", "--repeats", "1", "--d-model", "16", "--num-heads", "2", "--attention", "tiled"]
    assert scaling.main([*argv, "--out", str(out)]) == 0
    rec = json.loads(out.read_text())
    assert [r["T"] for r in rec["rows"]] == [8, 16] and rec["attention"] == "tiled"
    assert rec["rows"][1]["weights_bytes"] == 2 * 2 * 16 * 16 * 4  # (B, h, T, T) float32
    assert all(r["forward_s"] > 0 and r["backward_s"] > 0 for r in rec["rows"])
