"""The built course site, served on 127.0.0.1, and Debian's Chromium driven by Playwright (tests/site/test_site.py,
tests/site/test_explorer.py).

The site is built once per session by ``docs/build.sh`` into a temporary folder, or taken from ``$MHATTN_SITE``
when that names a built site. Without Chromium, Playwright or the build's tools the tests skip with the reason,
unless ``MHATTN_REQUIRE_SITE_TESTS=1`` (set by .ci/run), where a missing tool fails them instead.
"""

from __future__ import annotations

import functools
import http.server
import importlib.util
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
BUILD_TIMEOUT_S = 900


def _missing_or_skip(reason: str):
    if os.environ.get("MHATTN_REQUIRE_SITE_TESTS") == "1":
        pytest.fail(f"{reason} (MHATTN_REQUIRE_SITE_TESTS=1: the site tests must run here)")
    pytest.skip(reason)


def require_browser() -> None:
    """Skip (or fail, see the module docstring) without Playwright for Python or Debian's Chromium."""
    if importlib.util.find_spec("playwright") is None:
        _missing_or_skip('playwright is not installed: pip install -e ".[docs]"')
    if not os.access(CHROMIUM, os.X_OK):
        _missing_or_skip(f"{CHROMIUM} not found: apt-get install chromium")


_BUILT: dict[str, tuple[Path, float]] = {}  # "site" -> (folder, seconds): one build per session


def _build(out: Path) -> tuple[Path, float]:
    """``(site folder, seconds)``: docs/build.sh into ``out``."""
    t0 = time.perf_counter()
    proc = subprocess.run(
        ["bash", str(ROOT / "docs" / "build.sh"), str(out)],
        cwd=ROOT,
        env={**os.environ, "PYTHON": sys.executable},
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_S,
    )
    if proc.returncode:
        pytest.fail(f"docs/build.sh failed ({proc.returncode}):\n{(proc.stdout + proc.stderr)[-6000:]}")
    return out, time.perf_counter() - t0


def built_site(tmp_path_factory) -> Path:
    """The built site's folder: ``$MHATTN_SITE`` if set, else a build under pytest's temporary folder, once per
    session (pytest keeps the last few such folders, so the screenshot written there stays to look at)."""
    given = os.environ.get("MHATTN_SITE")
    if given:
        if not (Path(given) / "index.html").is_file():
            pytest.fail(f"MHATTN_SITE={given} has no index.html: build it with docs/build.sh {given}")
        return Path(given)
    missing = [m for m in ("sphinx", "myst_nb", "sphinx_book_theme") if importlib.util.find_spec(m) is None]
    if missing:
        _missing_or_skip(f'the site build needs {", ".join(missing)}: pip install -e ".[docs]"')
    if shutil.which("npm") is None:
        _missing_or_skip("the site build needs npm (MathJax comes from the npm registry): apt-get install npm")
    if "site" not in _BUILT:
        _BUILT["site"] = _build(tmp_path_factory.mktemp("site") / "html")
        print(f"\nsite built by docs/build.sh in {_BUILT['site'][1]:.1f} s: {_BUILT['site'][0]}")
    return _BUILT["site"][0]


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@functools.cache
def serve(site: Path) -> str:
    """``http://127.0.0.1:PORT/``: ``site`` served by http.server on a free port, in a daemon thread."""
    handler = functools.partial(_Quiet, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}/"


def launch(playwright):
    """Debian's Chromium, headless, with no background traffic of its own."""
    return playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
