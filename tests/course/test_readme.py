"""README.md is a learner's front page that works wherever it is shown (a clone, a package index, a wheel's metadata).

It stays short (detail lives in CONTRIBUTING.md and on the course site under docs/), links only to absolute URLs
(a relative link breaks on PyPI and in a wheel), carries CI's test command byte for byte, and every repository file
it names exists (and every site page it names is in the site's toctree).
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
MAX_LINES = 150

# the Quickstart commands, exactly as a learner copies them: install, the full run as .ci/run ends, the quick run
INSTALL_LINE = 'pip install -e ".[dev]" && mhattn prune --out prune_report   # install everything, run the main job'
TEST_LINE = "python -m pytest                                             # the whole test suite, notebooks included"
TEST_COMMAND = "python -m pytest"
QUICK_LINE = "python -m pytest tests/lib                                   # the quick run: the library's tests only"

# a path a README names in backticks: under one of the repository's folders, or a top-level file of it
REPO_PATH = re.compile(r"^(docs|notebooks|exercises|benchmarks|tests|scripts|mhattn|\.ci)/[\w.\-/]*$|^[\w.\-]+\.(md|yaml|toml)$")


def _code_spans(text: str) -> list[str]:
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    return re.findall(r"`([^`\n]+)`", text)


def _link_targets(text: str) -> list[str]:
    inline = re.findall(r"\]\(\s*<?([^)\s>]+)", text)  # [text](target) and ![alt](target)
    reference = re.findall(r"^\s*\[[^\]]+\]:\s*(\S+)", text, flags=re.M)  # [label]: target
    html = re.findall(r"""(?:href|src)\s*=\s*["']([^"']+)""", text, flags=re.I)
    return inline + reference + html


def test_the_readme_is_a_front_page_of_at_most_150_lines():
    n = len(README.splitlines())
    assert n <= MAX_LINES, f"README.md has {n} lines (at most {MAX_LINES}): move detail to CONTRIBUTING.md or docs/"


def test_the_link_finder_sees_relative_links():
    """The check below would catch each kind of relative link (a finder that sees nothing passes anything)."""
    sample = "[a](docs/glossary.md) ![b](img.png) [c](#backends)\n[d]: CONTRIBUTING.md\n<a href='x.html'>e</a>"
    assert _link_targets(sample) == ["docs/glossary.md", "img.png", "#backends", "CONTRIBUTING.md", "x.html"]


def test_every_link_is_an_absolute_url():
    targets = _link_targets(README)
    assert targets, "the README links nothing: the link finder is broken"
    relative = [t for t in targets if not re.match(r"https://[\w.-]+\.[a-z]{2,}/", t)]
    assert not relative, f"relative links break on a package index and in a wheel; name the file as `path`: {relative}"


def test_the_quickstart_holds_ci_s_test_command_exactly():
    block = re.search(r"## Quickstart\n.*?```bash\n(.*?)```", README, flags=re.S)
    assert block, "no bash block under ## Quickstart"
    assert block.group(1).splitlines() == [INSTALL_LINE, TEST_LINE, QUICK_LINE]
    assert (ROOT / QUICK_LINE.split("#")[0].split()[-1]).is_dir()  # the quick run's tier is there
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()]
    runs = [line for line in ci if re.match(r"(\S*/)?python -m pytest\b", line)]
    assert runs[-1] == TEST_COMMAND == TEST_LINE.split("#")[0].strip(), runs


def test_every_file_the_readme_names_exists():
    named = sorted({span for span in _code_spans(README) if REPO_PATH.match(span)})
    assert "docs/grading.md" in named and "CONTRIBUTING.md" in named, named  # the pattern finds what it should
    missing = [p for p in named if not (ROOT / p).exists()]
    assert not missing, f"the README names files that do not exist: {missing}"


def test_every_notebook_and_exercise_in_the_tables_exists():
    notebooks = re.findall(r"^\| `(\d\d_\w+)` \|", README, flags=re.M)
    assert notebooks and notebooks == sorted(notebooks), notebooks
    assert [n for n in notebooks if not (ROOT / "notebooks" / f"{n}.py").is_file()] == []
    on_disk = sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.py"))
    assert notebooks == on_disk, f"the course table and notebooks/ disagree: {notebooks} vs {on_disk}"
    exercises = re.findall(r"^\| \d+ \| `(ex\d\d_\w+\.py)` \|", README, flags=re.M)
    assert exercises and all((ROOT / "exercises" / e).is_file() for e in exercises), exercises


def test_every_site_page_the_readme_names_is_in_the_site():
    pages = {p[len("docs/") : -len(".md")] for p in _code_spans(README) if re.fullmatch(r"docs/[\w/]+\.md", p)}
    assert pages, "the README names no page of the site"
    index = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    listed = {line.strip() for block in re.findall(r"```\{toctree\}(.*?)```", index, flags=re.S) for line in block.splitlines()}
    assert pages <= listed, f"pages the README names but the site's toctree lacks: {sorted(pages - listed)}"


def test_the_site_commands_the_readme_names_exist():
    assert "`docs/build.sh OUT`" in README and (ROOT / "docs" / "build.sh").is_file()
    assert "`.readthedocs.yaml`" in README and (ROOT / ".readthedocs.yaml").is_file()
