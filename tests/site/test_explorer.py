"""The head-ablation explorer (docs/explorer.md) in Chromium: heads switched off by clicking their buttons show the
loss, accuracy and additive expectation that mhattn computes live for that subset (HeadMaskEvaluator on
``mhattn prune``'s evaluation set), to the precision shown; the percentile agrees with the shipped data and the
attention map with mhattn's.

Skips without Chromium, Playwright or the site's build tools, as tests/site/test_site.py does.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
from site_browser import built_site, launch, require_browser, serve

from mhattn.heads.jobs import settings_for
from mhattn.heads.mask_eval import HeadMaskEvaluator
from mhattn.heads.roles import POSITIONAL_THRESHOLD, attention_maps, detect_roles
from mhattn.training.checkpoint import load_checkpoint
from mhattn.training.tasks import task_from_meta

pytestmark = pytest.mark.slow  # every test here needs the site built and a browser: over a minute

DATA = Path(__file__).resolve().parents[2] / "docs" / "explorer" / "data.json"
MODELS = ("roles-plain", "roles-headdropout")
H = 12


def close_to_shown(text, value):
    """``value`` equals the number ``text`` shows, to the digits shown (plus float32 noise of 1e-6 relative)."""
    mantissa = re.sub(r"e.*$", "", text.strip().rstrip("%"))
    decimals = len(mantissa.split(".")[1]) if "." in mantissa else 0
    exponent = int(text.split("e")[1]) if "e" in text else 0
    half_unit = 0.5 * 10.0 ** (exponent - decimals)
    return abs(float(text.rstrip("%")) - value) <= half_unit * (1 + 1e-9) + 1e-6 * abs(value)


def test_close_to_shown_is_strict():
    assert close_to_shown("0.000325754", 0.00032575393) and not close_to_shown("0.000325754", 0.0003257)
    assert close_to_shown("6.52514", 6.525141716) and not close_to_shown("6.52514", 6.5252)
    assert close_to_shown("24.48%", 24.4832) and not close_to_shown("24.48%", 24.49)


@pytest.fixture(scope="module")
def data():
    return json.loads(DATA.read_text())


def test_shipped_data_is_small_and_complete(data):
    assert DATA.stat().st_size < 400_000
    assert set(data["models"]) == set(MODELS)
    for rec in data["models"].values():
        assert len(rec["loss"]) == len(rec["acc"]) == 2**H and len(rec["roles"]) == H
        assert rec["loss"][2**H - 1] < rec["loss"][0]  # all heads beat none


@pytest.fixture(scope="module")
def live():
    """``name -> (evaluator, ids)`` on ``mhattn prune``'s evaluation set, as the explorer's numbers claim."""
    out = {}
    for name in MODELS:
        model, meta = load_checkpoint(name)
        task = task_from_meta(meta["task"])
        ids, targets = task.eval_set(settings_for(task, {}).eval_size)
        out[name] = (HeadMaskEvaluator(model, ids, targets), model, ids)
    return out


def _mask(off):
    m = np.ones((1, H))
    m[0, list(off)] = 0.0
    return m


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    require_browser()
    from playwright.sync_api import sync_playwright

    base = serve(built_site(tmp_path_factory))
    with sync_playwright() as pw:
        browser = launch(pw)
        pg = browser.new_page()
        pg.goto(base + "explorer.html", wait_until="load")
        yield pg
        browser.close()


def _show(page, name, off):
    """Reload the page (all heads on), click the heads ``off`` in ``name``'s section; ``{data-role: text}``."""
    page.reload(wait_until="load")
    for j in off:
        page.click(f'button[data-model="{name}"][data-head="{j}"]')
    section = page.locator(f'section[data-model="{name}"]')
    pressed = [section.locator(f'button[data-head="{j}"]').get_attribute("aria-pressed") for j in range(H)]
    assert pressed == ["false" if j in off else "true" for j in range(H)]
    roles = ("loss", "acc", "full", "additive", "percentile", "kept", "map-caption")
    return {r: section.locator(f'[data-role="{r}"]').inner_text() for r in roles}


def test_twelve_toggles_per_model(page):
    for name in MODELS:
        assert page.locator(f'button[data-model="{name}"][data-head]').count() == H


# heads switched off, per model: one, six and ten of them, drawn once with a fixed seed
SUBSETS = [sorted(np.random.default_rng(7).choice(H, size=k, replace=False).tolist()) for k in (1, 6, 10)]


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("off", SUBSETS, ids=lambda off: f"{len(off)}off")
def test_clicked_subset_shows_mhattns_loss(page, live, name, off):
    ev = live[name][0]
    shown = _show(page, name, off)
    result = ev.evaluate(_mask(off))
    assert close_to_shown(shown["loss"], result["loss"]), (shown["loss"], result["loss"])
    assert close_to_shown(shown["acc"], 100 * result["acc"]), (shown["acc"], result["acc"])
    assert shown["kept"] == f"{H - len(off)} of {H}"
    full = ev.evaluate()
    full_loss, full_acc = re.fullmatch(r"loss (\S+), accuracy (\S+)", shown["full"]).groups()
    assert close_to_shown(full_loss, full["loss"]) and close_to_shown(full_acc, 100 * full["acc"])
    assert shown["map-caption"].startswith(f"Attention of head {off[-1]} (")  # the last head switched is the one drawn


@pytest.mark.parametrize("name", MODELS)
def test_additive_expectation_is_full_plus_single_costs(page, live, name):
    ev, off = live[name][0], SUBSETS[1]
    base = ev.evaluate()["loss"]
    expected = base + sum(ev.evaluate(_mask([j]))["loss"] - base for j in off)
    shown = _show(page, name, off)["additive"].split()[0]
    # the page sums six rounded costs: allow their rounding on top of the shown digits
    assert abs(float(shown) - expected) <= 1e-5 * abs(expected) + 1e-9, (shown, expected)
    one = _show(page, name, SUBSETS[0])
    assert one["additive"].split()[0] == one["loss"]  # one head off: the additive guess is the measurement


@pytest.mark.parametrize("name", MODELS)
def test_percentile_among_subsets_of_its_size(page, data, name):
    loss = data["models"][name]["loss"]
    off = SUBSETS[1]
    m = sum(1 << j for j in range(H) if j not in off)
    same = [x for i, x in enumerate(loss) if bin(i).count("1") == H - len(off)]
    lower = sum(x < loss[m] for x in same)
    text = _show(page, name, off)["percentile"]
    assert len(same) == math.comb(H, len(off)) == 924
    assert f"a higher one than {lower} of the other {len(same) - 1} subsets with {len(off)} heads removed" in text


@pytest.mark.parametrize("name", MODELS)
def test_attention_map_is_mhattns(page, live, data, name):
    _, model, ids = live[name]
    sample = data["models"][name]["sample"]
    assert sample["ids"] == ids[0].tolist()
    weights = attention_maps(model, ids[:1])[0, 0]  # (h, T, T)
    np.testing.assert_allclose(np.array(sample["attention"]), weights, atol=5e-4 + 1e-6)
    head = SUBSETS[0][-1]
    _show(page, name, [head])
    cells = page.locator(f'section[data-model="{name}"] svg[data-role="map"] rect')
    T = len(ids[0])
    assert cells.count() == T * T
    opacity = [float(cells.nth(i).get_attribute("fill-opacity")) for i in (0, T + 1, T * T - 1)]
    expect = [max(sample["attention"][head][i // T][i % T], 0.02) for i in (0, T + 1, T * T - 1)]
    assert opacity == pytest.approx(expect, abs=5e-4)


@pytest.mark.parametrize("name", MODELS)
def test_role_stats_are_detect_roles_and_other_means_neither_share_reaches_the_threshold(live, data, name):
    _, model, ids = live[name]
    rec = data["models"][name]
    assert data["role_threshold"] == POSITIONAL_THRESHOLD
    rarity = task_from_meta(load_checkpoint(name)[1]["task"]).rarity()
    roles = detect_roles(attention_maps(model, ids), ids, rarity)
    assert rec["roles"] == [r["role"] for r in roles]
    for r, s in zip(roles, rec["role_stats"], strict=True):
        assert s["offset"] == r["offset"]
        assert s["offset_fraction"] == pytest.approx(r["offset_fraction"], abs=5e-4)
        assert s["rare_fraction"] == pytest.approx(r["rare_fraction"], abs=5e-4)
        neither = max(s["offset_fraction"], s["rare_fraction"]) < data["role_threshold"]
        assert (r["role"] == "other") == neither


@pytest.mark.parametrize("name", MODELS)
def test_legend_says_what_other_means_and_titles_give_the_shares(page, data, name):
    rec = data["models"][name]
    page.reload(wait_until="load")
    section = page.locator(f'section[data-model="{name}"]')
    legend = section.locator('[data-role="legend"]').inner_text()
    assert "other when neither share reaches 90%" in legend and "no offset or rare-token role at its threshold" in legend
    assert f"Here {rec['roles'].count('other')} of {H} heads are other." in legend
    for j in range(H):
        title = section.locator(f'button[data-head="{j}"]').get_attribute("title")
        s = rec["role_stats"][j]
        assert title.startswith(f"role: {rec['roles'][j]}. Largest weight at offset {s['offset']:+d} for ")
        assert (
            f"{100 * s['offset_fraction']:.2f}% of queries" in title
            and f"rarest token for {100 * s['rare_fraction']:.2f}%" in title
        )
