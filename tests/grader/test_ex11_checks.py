"""Exercise 11's checks, judged in this process: the solution passes, each usual mistake fails with its hint.

The calls go through the worker's own ``call_one`` on a module loaded from the (edited) solution text,
then through the grader's judges, as ``mhattn grade`` does but without a subprocess; the four classic
mistakes are also graded end to end (tests/grader/grader_attacks/cases.py WRONG, in test_grade*.py), and so is an
untiled submission here. The exercise's text demands three things beyond the values, each a named check:
the call's peak memory stays far under one full ``(..., T, S)`` array (MEMORY), a larger ``block_k`` holds
more (BLOCK), and no floating-point warning (WARN, although the worker silences them for every other call).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mhattn.grade import checks_tiled as TL
from mhattn.grade import grade
from mhattn.grade.checks_tiled import HIDDEN, hidden_ex11, visible_ex11
from mhattn.grade.runner import frame
from mhattn.grade.spec import find
from mhattn.grade.verdict import judge_parts
from mhattn.grade.worker import call_one, load, read_frame

PATH = Path(__file__).resolve().parents[2] / "solutions" / "ex11_online_softmax.py"
SOLUTION = PATH.read_text(encoding="utf-8")
EX11 = find("ex11")
POINTS = dict(EX11.checks)

# right values, but the full (..., T, S) scores at once and block_k ignored
UNTILED = """
import numpy as np


def online_attention_forward(q, k, v, block_k, mask=None):
    s = q @ k.swapaxes(-1, -2) / np.sqrt(q.shape[-1])  # (..., T, S): what the exercise forbids
    if mask is not None:
        s = np.where(mask, -np.inf, s)
    m = s.max(axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    p = np.exp(s - m)
    l_sum = p.sum(axis=-1, keepdims=True)
    empty = l_sum == 0
    out = (p @ v) / np.where(empty, 1.0, l_sum)
    lse = np.where(empty, -np.inf, m + np.log(np.where(empty, 1.0, l_sum)))
    return out.astype(q.dtype), lse[..., 0].astype(q.dtype)
"""


def run(code, seed=0):
    """``(failed, outcomes)``: ``{check: first reason}`` over the visible and hidden calls, and each call's result."""
    module = load(str(PATH), code)
    failed, outcomes = {}, []
    for call in visible_ex11() + hidden_ex11(np.random.default_rng(seed)):
        args = read_frame(frame(list(call.args)))  # as the worker gets them
        with np.errstate(all="ignore"):  # as the worker sets it for every call: the probe must see through it
            res = call_one(module, {"fn": call.fn, "args": args, "probe": call.probe}, str(PATH))
        outcomes.append((call, res))
        for check, why in judge_parts(call, res, "test", PATH.name, 0):
            if why:
                failed.setdefault(check, why)
    return failed, outcomes


def first_failure(code, seed=0):
    """The reason of the first failing call (visible, then hidden with ``seed``), or None."""
    return next(iter(run(code, seed)[0].values()), None)


@pytest.mark.parametrize("seed", range(4))
def test_the_solution_passes_visible_and_hidden_checks(seed):
    assert first_failure(SOLUTION, seed) is None


def test_every_call_is_probed_and_the_checks_add_up_to_ten():
    calls = visible_ex11() + hidden_ex11(np.random.default_rng(0))
    assert all(c.probe for c in calls)
    assert all(TL.WARN in {check for check, _ in c.judged()} for c in calls)
    assert EX11.points == 10 and {TL.MEMORY, TL.BLOCK, TL.WARN} <= set(POINTS)


def test_the_solutions_peak_memory_is_far_under_one_full_score_array_and_grows_with_the_tile():
    _, outcomes = run(SOLUTION)
    B, h, T, S, _ = TL.PROBE_SHAPE
    full = B * h * T * S * 8
    peaks = [res["value"][1]["peak"] for call, res in outcomes if call.args[0].shape[-2] == T]
    assert len(peaks) == 4  # a visible pair (fixed inputs) and a hidden pair (drawn from the seed)
    for small, large in (peaks[:2], peaks[2:]):
        assert small < full / 16  # the bound is full / 4: room for an untidier tiled loop
        tiles = B * h * T * (TL.PROBE_BLOCKS[1] - TL.PROBE_BLOCKS[0]) * 8
        assert large - small > tiles  # at least one tile's growth; the check asks for a quarter of it


def test_an_untiled_submission_loses_exactly_memory_and_block_with_their_reasons():
    failed, _ = run(UNTILED)
    assert set(failed) == {TL.MEMORY, TL.BLOCK}, failed
    want = "over a quarter of one full (..., T, S) float64 array (128 MiB): keep only (..., T, block_k) tiles"
    assert want in failed[TL.MEMORY]
    assert "peak memory" in failed[TL.BLOCK] and "so block_k is not honoured" in failed[TL.BLOCK]


def test_a_submission_with_its_own_tile_size_loses_block_only():
    code = SOLUTION.replace("range(0, S, block_k)", "range(0, S, 64)").replace("k0 : k0 + block_k", "k0 : k0 + 64")
    assert code.count("k0 + 64") == 3
    failed, _ = run(code)
    assert set(failed) == {TL.BLOCK}, failed
    assert "a tile of 256 keys must hold more than one of 32" in failed[TL.BLOCK]


def test_memory_is_judged_on_a_real_computation_not_on_the_values():
    """A tiled loop with a wrong rescaling loses its values, and with them memory, block and warning (each qualifies a
    right answer, issue 27); zeros of the right shape get neither memory nor block."""
    failed, _ = run(SOLUTION.replace("alpha = np.exp(m - m_safe)", "alpha = np.ones_like(m)"))
    assert {TL.OUT, TL.LSE, TL.MEMORY, TL.BLOCK} <= set(failed), failed  # (the warning point: by the grader's qualify)
    zeros = "import numpy as np\n\ndef online_attention_forward(q, k, v, block_k, mask=None):\n"
    zeros += "    return np.zeros((*q.shape[:-1], v.shape[-1]), q.dtype), np.zeros(q.shape[:-1], q.dtype)\n"
    failed, _ = run(zeros)
    assert {TL.MEMORY, TL.BLOCK} <= set(failed)
    assert "scores only together with the right values" in failed[TL.MEMORY]  # zeros are not the answer


def test_a_floating_point_warning_is_a_named_fault_though_the_values_are_right():
    old = "out = acc / np.where(empty, 1.0, l_sum)"
    assert SOLUTION.count(old) == 1
    code = SOLUTION.replace(old, "out = np.where(empty, 0.0, acc / l_sum)  # 0/0 computed, then thrown away")
    failed, _ = run(code)
    assert set(failed) == {TL.WARN}, failed
    line = code.splitlines().index("    out = np.where(empty, 0.0, acc / l_sum)  # 0/0 computed, then thrown away") + 1
    assert f"RuntimeWarning: invalid value encountered in divide (ex11_online_softmax.py line {line})" in failed[TL.WARN]
    assert "the exercise asks for no warning" in failed[TL.WARN]


@pytest.mark.parametrize("product", ["a @ b", "np.dot(a, b)", "np.vecdot(a[0], b[:, 0])", "np.matvec(a, b[:, 0])"])
def test_a_flag_left_by_a_matrix_product_is_not_a_fault(product):
    """Some OpenBLAS kernels leave ``invalid`` set on finite inputs at random (numpy#24067): the likely cause of the
    point the solution once lost in CI. Here ``inf * 0`` sets the flag for sure; only the product's flag is new."""
    old = "    m = np.full("
    assert SOLUTION.count(old) == 1
    extra = f"    a, b = np.full((1, 1), np.inf), np.zeros((1, 1))\n    _ = {product}  # sets invalid (inf * 0)\n"
    assert first_failure(SOLUTION.replace(old, extra + old)) is None
    module = load(str(PATH), f"import numpy as np\n\ndef f(a, b):\n    return {product}\n")
    probed = call_one(module, {"fn": "f", "args": [np.full((1, 1), np.inf), np.zeros((1, 1))], "probe": True}, str(PATH))
    assert probed["value"][1]["warning"] == ""
    with np.errstate(invalid="warn"), pytest.warns(RuntimeWarning, match="invalid value encountered"):
        eval(product, {"np": np, "a": np.full((1, 1), np.inf), "b": np.zeros((1, 1))})  # the flag is there to ignore


def test_only_numpys_floating_point_warnings_count():
    """A learner's own warning, or a finalizer's (the collector can run during the call), is not a fault."""
    old = "    m = np.full("
    extra = "    import warnings\n    warnings.warn('a note'); warnings.warn('closing', ResourceWarning)\n"
    assert first_failure(SOLUTION.replace(old, extra + old)) is None
    code = "import numpy as np\nimport warnings\n\ndef f(x):\n    warnings.warn('a note')\n    return x / 0.0\n"
    module = load(str(PATH), code)
    probed = call_one(module, {"fn": "f", "args": [np.ones(2)], "probe": True}, str(PATH))
    assert probed["value"][1]["warning"].startswith("RuntimeWarning: divide by zero encountered in divide")


def test_the_probe_leaves_the_worker_silent_for_unprobed_calls():
    module = load(str(PATH), "import numpy as np\n\ndef f(x):\n    return x / 0.0\n")
    with np.errstate(all="ignore"):
        plain = call_one(module, {"fn": "f", "args": [np.ones(2)]}, str(PATH))
        probed = call_one(module, {"fn": "f", "args": [np.ones(2)], "probe": True}, str(PATH))
    assert np.all(np.isinf(plain["value"]))
    assert probed["value"][1]["warning"].startswith("RuntimeWarning: divide by zero encountered in divide")


@pytest.mark.grader
def test_an_untiled_submission_graded_end_to_end_scores_all_but_memory_block_and_warning(tmp_path):
    (tmp_path / "ex11_online_softmax.py").write_text(UNTILED, encoding="utf-8")
    row = grade(tmp_path, only=["ex11"])["exercises"][0]
    lost = {c["name"]: c["reason"] for c in row["checks"] if c["points"] < c["max_points"]}
    assert set(lost) == {TL.MEMORY, TL.BLOCK, TL.WARN}, row["checks"]  # under the memory cap its probe cannot finish
    assert row["points"] == EX11.points - POINTS[TL.MEMORY] - POINTS[TL.BLOCK] - POINTS[TL.WARN]
    assert "keep only (..., T, block_k) tiles" in lost[TL.MEMORY] and "(128 MiB)" in lost[TL.BLOCK]  # the memory cap


def test_hidden_inputs_cover_both_dtypes_both_tile_extremes_masks_and_s_not_t():
    calls = hidden_ex11(np.random.default_rng(1))
    assert len(calls) == len(HIDDEN) + 2  # and the two memory probes, their inputs drawn from the seed
    calls = calls[: len(HIDDEN)]
    seen = set()
    for call in calls:
        q, k, _, block_k = call.args[:4]
        T, S = q.shape[-2], k.shape[-2]
        assert S != T
        mask = call.args[4] if len(call.args) == 5 else None
        if mask is not None:
            assert np.any(np.all(np.broadcast_to(mask, (*q.shape[:-1], S)), axis=-1))  # a row with no allowed key
        seen.add((q.dtype.name, {1: "1", S: "S"}.get(block_k, "mid"), mask is not None))
    assert {(d, t) for d, t, _ in seen} == {(d, t) for d in ("float32", "float64") for t in ("1", "mid", "S")}
    assert {(d, m) for d, _, m in seen} == {(d, m) for d in ("float32", "float64") for m in (True, False)}


@pytest.mark.parametrize(
    "old, new, words",
    [
        ("alpha = np.exp(m - m_safe)", "alpha = np.ones_like(m)", "the running sum and output are not rescaled"),
        ("acc = acc * alpha +", "acc = acc +", "the running output is not rescaled by exp(m_old - m_new)"),
        ("l_sum = l_sum * alpha +", "l_sum = l_sum +", "the running sum is not rescaled by exp(m_old - m_new)"),
        ("lse[..., 0].astype(q.dtype)", "m[..., 0].astype(q.dtype)", "lse is each row's maximum score"),
        ("m + np.log(np.where(", "np.log(np.where(", "add the running maximum back"),
        ("m_safe = np.where(np.isfinite(m_new), m_new, 0.0)", "m_safe = m_new", "NaN where a row's keys so far are all masked"),
        ("np.sqrt(q.shape[-1])", "np.sqrt(k.shape[-2])", "a scaling by 1/sqrt(S), S keys instead of 1/sqrt(d_k)"),
        ("np.sqrt(q.shape[-1])", "1.0", "no scaling instead of 1/sqrt(d_k)"),
        ("lse = np.where(empty, -np.inf,", "lse = np.where(empty, 0.0,", "-inf exactly on the rows with no allowed key (1 here)"),
    ],
)
def test_a_wrong_online_softmax_fails_with_its_hint(old, new, words):
    assert SOLUTION.count(old) == 1, old
    why = first_failure(SOLUTION.replace(old, new))
    assert why is not None and words in why, why
