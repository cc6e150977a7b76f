"""Exercise 11 pays its memory points for tiled code only (issue 34): a child process holding the full scores, and
answers pasted in for the probes' inputs, both lose them.

- The memory cap is per process, so the worker of exercise 11 may start no process or thread
  (:func:`mhattn.grade.guard.no_children`): a submission that computes the full ``(..., T, S)`` scores in a forked
  child, and pads its own memory to look tiled, loses the memory and block checks, in both modes.
- The visible probes' inputs are fixed (seed 11, in every install) and run in the learner's visible tests only; the
  grader's pair is drawn from the hand-in's seed, so a submission that recognises the visible inputs and returns
  stored answers fails it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from mhattn.grade import checks_tiled as TL
from mhattn.grade import grade
from mhattn.grade.runner import plan
from mhattn.grade.spec import find

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "grader"))

from classroom_cases import SOLUTIONS  # noqa: E402
from test_grading_trust import MODES  # noqa: E402

pytestmark = pytest.mark.grader
EX11 = "ex11_online_softmax.py"

# the solution for small inputs; for the probes' S = 8192 keys, the untiled answer in a fresh Python started from a
# child (its address space starts small, under the cap it inherits), and a tile of padding held here (the parent's
# peak then looks tiled: above half a tile, growing with block_k)
FORKED = """

_tiled = online_attention_forward
CHILD = (
    "import sys, numpy as np\\n"
    "q, k, v = (np.load(sys.argv[1] + n) for n in ('q.npy', 'k.npy', 'v.npy'))\\n"
    "s = np.einsum('...td,...sd->...ts', q, k) / np.sqrt(q.shape[-1])  # (..., T, S), without BLAS's buffers\\n"
    "m = s.max(axis=-1, keepdims=True); s -= m; np.exp(s, out=s); l_sum = s.sum(axis=-1, keepdims=True)\\n"
    "np.save(sys.argv[1] + 'out.npy', np.einsum('...ts,...sd->...td', s, v) / l_sum)\\n"
    "np.save(sys.argv[1] + 'lse.npy', (m + np.log(l_sum))[..., 0])\\n"
)


def online_attention_forward(q, k, v, block_k, mask=None):
    import os, sys, tempfile
    if k.shape[-2] < 4096:
        return _tiled(q, k, v, block_k, mask)
    pad = np.ones((*q.shape[:-1], block_k))  # (..., T, block_k)
    where = tempfile.mkdtemp() + "/"
    for name, a in (("q", q), ("k", k), ("v", v)):
        np.save(where + name + ".npy", a)
    pid = os.fork()
    if pid == 0:
        os.dup2(os.open(where + "err", os.O_WRONLY | os.O_CREAT), 2)
        os.execv(sys.executable, [sys.executable, "-c", "import sys; sys.path[:0] = " + repr(sys.path) + "\\n" + CHILD,
                                  where])
    os.waitpid(pid, 0)
    if not os.path.exists(where + "out.npy"):
        raise RuntimeError(open(where + "err").read()[-300:])
    return np.load(where + "out.npy") + 0 * pad.sum(), np.load(where + "lse.npy")
"""


@pytest.mark.parametrize("use_sandbox", MODES)
def test_the_full_scores_in_a_child_process_lose_the_memory_points(tmp_path, use_sandbox):
    (tmp_path / EX11).write_text(SOLUTIONS[EX11] + FORKED, encoding="utf-8")
    row = grade(tmp_path, only=["ex11"], seed=2, sandbox_mode=use_sandbox)["exercises"][0]
    failed = {c["name"]: c["reason"] for c in row["checks"] if c["points"] < c["max_points"]}
    assert {TL.MEMORY, TL.BLOCK} <= set(failed), row
    assert "Resource temporarily unavailable" in failed[TL.MEMORY] or "BlockingIOError" in failed[TL.MEMORY], failed
    assert row["points"] == 10 - 2 - 1 - 1  # memory, block, and the warning check of those calls


def test_the_hidden_memory_probes_draw_their_inputs_from_the_seed():
    def probes(calls):
        return [c for c in calls if c.args[1].shape[-2] == TL.PROBE_SHAPE[3]]

    visible = probes(TL.visible_ex11())
    one, again, other = (probes(TL.hidden_ex11(np.random.default_rng(s))) for s in (5, 5, 6))
    assert len(visible) == len(one) == 2 and [c.args[3] for c in one] == list(TL.PROBE_BLOCKS)
    assert all(c.local for c in visible) and not any(c.local for c in one)  # the grader runs the seeded pair only
    calls, n_visible = plan(find("ex11"), 5)
    assert len(probes(calls)) == 2 and all(c.args[0] is not visible[0].args[0] for c in probes(calls))
    assert np.array_equal(one[0].args[0], again[0].args[0])  # a seed repeats its grading
    for a, b in ((one, other), (one, visible)):
        assert not any(np.array_equal(x, y) for x, y in zip(a[0].args[:3], b[0].args[:3], strict=True))


PASTED = """

_tiled = online_attention_forward
_KNOWN = {}


def online_attention_forward(q, k, v, block_k, mask=None):
    if k.shape[-2] < 4096:
        return _tiled(q, k, v, block_k, mask)
    known = np.random.default_rng(11).standard_normal(q.shape)  # the visible probes' q, as the grader draws it
    if not np.array_equal(known, q):
        return np.zeros((*q.shape[:-1], v.shape[-1])), np.zeros(q.shape[:-1])
    pad = np.ones((*q.shape[:-1], block_k))  # (..., T, block_k): a tile's worth of memory
    if "out" not in _KNOWN:  # stands in for answers pasted into the file, computed here once, untiled, uncapped
        _KNOWN["out"], _KNOWN["lse"] = _tiled(q, k, v, 512)
    return _KNOWN["out"] + 0 * pad.sum(), _KNOWN["lse"]
"""


def test_answers_for_the_fixed_probe_inputs_lose_the_memory_points(tmp_path):
    (tmp_path / EX11).write_text(SOLUTIONS[EX11] + PASTED, encoding="utf-8")
    row = grade(tmp_path, only=["ex11"], seed=2, sandbox_mode=False)["exercises"][0]
    failed = {c["name"] for c in row["checks"] if c["points"] < c["max_points"]}
    assert {TL.MEMORY, TL.BLOCK} <= failed, row
    assert {TL.OUT, TL.LSE, TL.OUT_MASK, TL.LSE_MASK}.isdisjoint(failed)  # the values of every other call are right
