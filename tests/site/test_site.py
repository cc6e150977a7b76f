"""The course site in a real browser: every page of the built site (docs/build.sh), served on 127.0.0.1 and
opened in Debian's Chromium, loads with no console error, no failed request and no request off the machine, with
all math typeset by the site's own MathJax, every image decoded and every internal link and anchor resolving.

Each page is visited once (the ``visits`` fixture) and the tests check what was recorded. Skips without Chromium,
Playwright or the build's tools (tests/site/site_browser.py says how CI makes them run).
"""

from __future__ import annotations

import importlib
import inspect
import time
from urllib.parse import unquote, urljoin, urlsplit

import pytest
from site_browser import built_site, launch, require_browser, serve

pytestmark = pytest.mark.slow  # every test here needs the site built and a browser: over a minute

SCREENSHOT_PAGE = "notebooks/02_scaled_dot_product_attention.html"
API_MODULES = ("functional", "nn", "optim", "training", "heads", "backend", "gradcheck")

# run in the page once it has loaded: MathJax's first typesetting done, then every image decoded
_SETTLE = """async () => {
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) await MathJax.startup.promise;
  const imgs = [...document.images];
  imgs.forEach((i) => { i.loading = "eager"; });
  await Promise.all(imgs.map((i) => i.decode().catch(() => null)));
  await document.fonts.ready;
}"""

_REPORT = """() => ({
  ids: [...document.querySelectorAll("[id]")].map((e) => e.id)
    .concat([...document.querySelectorAll("a[name]")].map((e) => e.name)),
  links: [...document.querySelectorAll("a[href]")].map((a) => a.href),
  images: [...document.images].map((i) => ({ src: i.currentSrc || i.src, width: i.naturalWidth })),
  math: document.querySelectorAll(".math").length,
  untypeset: [...document.querySelectorAll(".math")].filter((e) => !e.querySelector("mjx-container"))
    .map((e) => e.textContent.slice(0, 80)),
  mjx: document.querySelectorAll("mjx-container").length,
  mathErrors: [...document.querySelectorAll("mjx-merror, .MathJax_Error, [data-mjx-error]")]
    .map((e) => e.textContent.slice(0, 80)),
})"""


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    require_browser()
    return built_site(tmp_path_factory)


def _pages(site):
    """Every HTML page of the site, as paths relative to its root (theme templates under _static are no pages)."""
    skip = ("_static", "_sources", "_images", "_screenshots")
    return sorted(p.relative_to(site).as_posix() for p in site.rglob("*.html") if p.relative_to(site).parts[0] not in skip)


def _visit(context, base, path, screenshot=None):
    """Open one page and return what happened: console errors, failed and off-machine requests, the page's report."""
    rec = {"console": [], "failed": [], "offsite": []}
    page = context.new_page()
    page.on("console", lambda m: rec["console"].append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: rec["console"].append(f"uncaught: {e}"))
    page.on("requestfailed", lambda r: rec["failed"].append(f"{r.url}: {r.failure}"))
    page.on("response", lambda r: rec["failed"].append(f"{r.url}: HTTP {r.status}") if r.status >= 400 else None)
    page.goto(base + path, wait_until="load")
    page.evaluate(_SETTLE)
    page.wait_for_load_state("networkidle")  # nothing left in flight to be cut off when the page closes
    rec.update(page.evaluate(_REPORT))
    if screenshot is not None:
        screenshot.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(screenshot))
    page.close()
    return rec


@pytest.fixture(scope="module")
def visits(site):
    """``{page path: record}`` for every page, and the screenshot of one notebook page under the site folder."""
    from playwright.sync_api import sync_playwright

    base = serve(site)
    t0 = time.perf_counter()
    with sync_playwright() as pw:
        browser = launch(pw)
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        offsite = []

        def guard(route):  # nothing leaves the machine: record and refuse any other host
            if urlsplit(route.request.url).hostname != "127.0.0.1":
                offsite.append(route.request.url)
                return route.abort()
            return route.continue_()

        context.route("**/*", guard)
        out = {}
        for path in _pages(site):
            shot = site / "_screenshots" / "notebook.png" if path == SCREENSHOT_PAGE else None
            out[path] = _visit(context, base, path, shot)
            out[path]["offsite"], offsite[:] = list(offsite), []
        browser.close()
    print(f"\n{len(out)} pages checked in Chromium in {time.perf_counter() - t0:.1f} s")
    return base, out


def _problems(visits, key):
    return {p: r[key] for p, r in visits[1].items() if r[key]}


def test_every_expected_page_was_visited(visits):
    pages = set(visits[1])
    expected = {"index.html", "glossary.html", "exercises.html", "explorer.html", "api/functional.html", SCREENSHOT_PAGE}
    assert expected <= pages, f"missing pages: {expected - pages}"
    assert sum(p.startswith("notebooks/") for p in pages) >= 10


def test_no_console_error(visits):
    assert not _problems(visits, "console")


def test_no_failed_request(visits):
    assert not _problems(visits, "failed")


def test_no_request_leaves_the_machine(visits):
    assert not _problems(visits, "offsite")


def test_all_math_typeset(visits):
    records = visits[1]
    assert not _problems(visits, "mathErrors"), "MathJax error nodes"
    assert not _problems(visits, "untypeset"), "math elements MathJax left as text"
    with_math = [p for p, r in records.items() if r["math"]]
    assert SCREENSHOT_PAGE in with_math  # the attention notebook's formulas are there to be typeset
    assert all(records[p]["mjx"] >= records[p]["math"] for p in with_math)


def test_every_image_decoded(visits):
    bad = {p: [i["src"][:100] for i in r["images"] if i["width"] == 0] for p, r in visits[1].items()}
    assert not {p: b for p, b in bad.items() if b}
    assert sum(len(r["images"]) for r in visits[1].values()) > 10  # the notebooks' figures are there


def test_internal_links_and_anchors_resolve(site, visits):
    base, records = visits
    broken = []
    for page, rec in records.items():
        for href in rec["links"]:
            if not href.startswith(base):
                continue  # a link to another site is never followed (no request leaves the machine)
            parts = urlsplit(href)
            target = unquote(parts.path[len(urlsplit(base).path) :]) or "index.html"
            if target.endswith("/"):
                target += "index.html"
            if not (site / target).is_file():
                broken.append(f"{page}: {href} (no file {target})")
            elif parts.fragment and target in records and unquote(parts.fragment) not in records[target]["ids"]:
                broken.append(f"{page}: {href} (no anchor #{unquote(parts.fragment)} in {target})")
    assert not broken, "\n".join(broken[:40])
    assert urljoin(base, "index.html") in records["glossary.html"]["links"]  # links were collected at all


def _public_names(name):
    module = importlib.import_module(f"mhattn.{name}")
    if hasattr(module, "__all__"):
        return list(module.__all__)
    own = [n for n, v in vars(module).items() if not n.startswith("_") and getattr(v, "__module__", None) == module.__name__]
    consts = [n for n, v in vars(module).items() if n.isupper() and not inspect.ismodule(v)]
    return own + consts


@pytest.mark.parametrize("name", API_MODULES)
def test_api_reference_lists_every_public_name(visits, name):
    ids = set(visits[1][f"api/{name}.html"]["ids"])
    missing = [n for n in _public_names(name) if f"mhattn.{name}.{n}" not in ids]
    assert not missing, f"mhattn.{name}: no API entry for {missing}"


def test_screenshot_of_a_notebook_page_written(site, visits):
    shot = site / "_screenshots" / "notebook.png"
    assert shot.is_file() and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000
    print(f"\nscreenshot of {SCREENSHOT_PAGE}: {shot}")
