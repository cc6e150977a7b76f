"""Checks for exercise 11: attention over key tiles with the online softmax.

``visible_ex11()`` (fixed small inputs a learner can read) and ``hidden_ex11(rng)`` (fresh
shapes, float32 and float64, tiles of 1 key, of all S keys and in between, masks with a row
that has no allowed key, S != T) return the list of :class:`~mhattn.grade.harness.Call` to make.
The expected ``out`` is mhattn's plain attention; the expected ``lse`` is mhattn's tiled
attention's (``-inf`` on a row with no allowed key). When a result is wrong, the grader
compares it with the usual wrong online softmaxes (:func:`_online` with a rescaling left out,
a wrong scaling, the running maximum as the lse) and names the one it matches.

Every call is probed (:class:`~mhattn.grade.harness.Call` ``probe``): the worker sends back the call's peak memory
(``tracemalloc``) and its first warning, so the checks also hold the exercise to its text. Two visible calls on
``S = 8192`` keys test the memory (``local``: in the learner's visible tests; the grader makes two hidden ones instead,
their inputs drawn from the hand-in's seed), once their ``out`` and ``lse`` are right: at ``block_k = 32`` the peak
must stay under a quarter of one full ``(..., T, S)`` float64 array and hold at least half a tile of scores
(:data:`MEMORY`), and at ``block_k = 256`` it must grow by at least a quarter of the larger tile (:data:`BLOCK`: a
submission that ignores ``block_k`` holds as much at both).
``tracemalloc`` sees NumPy's arrays only, so the exercise also runs under :data:`MEMORY_CAP`, a hard address-space
limit set in the worker before the file is loaded (:func:`mhattn.grade.guard.cap_memory`) and smaller than one full
score array of that test: an untiled answer runs out of memory whatever holds its scores (``mmap``, ``ctypes``), and
may start no process or thread (:func:`mhattn.grade.guard.no_children`: a child's memory is its own). Any
floating-point warning (a ``0/0`` or ``-inf - -inf`` on a row with no allowed key) fails :data:`WARN`, and so does silencing
one (the file's text: :func:`mhattn.grade.scan.silencing`; the call: :class:`mhattn.grade.probe.QuietWatch`), except
the flags a matrix product leaves, which some OpenBLAS kernels set at random (:data:`mhattn.grade.probe.PRODUCT_FLAGS`).
The memory, block and warning checks qualify the values (:data:`QUALIFIERS`): each scores only beside them.
"""

from __future__ import annotations

import functools

import numpy as np

from mhattn.functional import scaled_dot_product_attention_forward
from mhattn.functional.attention_tiled import tiled_attention_forward
from mhattn.grade.harness import QUALIFIED, Call, GradeFailure, check_array, check_neginf, tol_for, tuple_of

# The named checks (points in spec.EXERCISES): each call's out and lse count for one of them.
OUT, LSE = "out without mask", "lse without mask"
OUT_MASK, LSE_MASK = "out with a mask (a row with no allowed key)", "lse with a mask (-inf on a row with no allowed key)"

MEMORY = "memory: (..., T, block_k) tiles, never the full (..., T, S) scores"
BLOCK = "block_k honoured: a larger tile holds more memory"
WARN = "no floating-point warning"

FN = "online_attention_forward"
NAN_HINT = ("NaN where a row's keys so far are all masked: its running max is -inf and exp(-inf - (-inf)) is NaN; "
            "use 0 in place of a -inf max (and divide by l only where l > 0)")  # fmt: skip


def _scores(q, k, mask):
    """Scaled, masked scores ``(..., T, S)`` in float64 (for the hints only)."""
    s = q.astype(np.float64) @ k.astype(np.float64).swapaxes(-1, -2) / np.sqrt(q.shape[-1])
    return s if mask is None else np.where(mask, -np.inf, s)


def _online(q, k, v, block_k, mask, rescale_sum, rescale_out):
    """The online softmax with the rescaling by ``exp(m_old - m_new)`` of the sum and/or output left out (hints)."""
    s_all, v = _scores(q, k, mask), v.astype(np.float64)
    m = np.full((*s_all.shape[:-1], 1), -np.inf)  # (..., T, 1)
    l_sum, acc = np.zeros_like(m), np.zeros((*s_all.shape[:-1], v.shape[-1]))
    for k0 in range(0, s_all.shape[-1], block_k):
        s = s_all[..., k0 : k0 + block_k]  # (..., T, bk)
        m_new = np.maximum(m, s.max(axis=-1, keepdims=True))
        m_safe = np.where(np.isfinite(m_new), m_new, 0.0)
        p, alpha = np.exp(s - m_safe), np.exp(m - m_safe)
        l_sum = l_sum * (alpha if rescale_sum else 1.0) + p.sum(axis=-1, keepdims=True)
        acc = acc * (alpha if rescale_out else 1.0) + p @ v[..., k0 : k0 + block_k, :]
        m = m_new
    safe = np.where(l_sum == 0, 1.0, l_sum)
    return acc / safe, np.where(l_sum == 0, -np.inf, m + np.log(safe))[..., 0]


def _candidates(q, k, v, block_k, mask):
    """``{fault: (out, lse)}`` of the usual wrong online softmaxes on these inputs."""
    found = {
        "the running sum and output are not rescaled by exp(m_old - m_new) when a tile raises the maximum":
            _online(q, k, v, block_k, mask, False, False),
        "the running output is not rescaled by exp(m_old - m_new) when a tile raises the maximum (the sum is)":
            _online(q, k, v, block_k, mask, True, False),
        "the running sum is not rescaled by exp(m_old - m_new) when a tile raises the maximum (the output is)":
            _online(q, k, v, block_k, mask, False, True),
    }  # fmt: skip
    d_k, S = q.shape[-1], k.shape[-2]
    for name, c in (("no scaling", 1.0), ("a scaling by 1/d_k", 1.0 / d_k), ("a scaling by 1/sqrt(S), S keys", S**-0.5)):
        qc = q.astype(np.float64) * (c * np.sqrt(d_k))  # mhattn divides by sqrt(d_k) again
        out, lse, _ = tiled_attention_forward(qc, *_f64(k, v), mask, workers=1)
        found[f"{name} instead of 1/sqrt(d_k)"] = (out, lse)
    top, lse = _scores(q, k, mask).max(axis=-1), _lse64(q, k, v, mask)  # (..., T) each
    found["lse is each row's maximum score: add the log of the running sum"] = (None, top)
    log_l = np.where(top > -np.inf, lse - top, -np.inf)  # log of the running sum
    found["lse is the log of the running sum only: add the running maximum back"] = (None, log_l)
    return found


def _lse64(q, k, v, mask):
    """mhattn's log-sum-exp of each score row, in float64 ``(..., T)``."""
    return tiled_attention_forward(*_f64(q, k, v), mask, workers=1)[1]


def _f64(*arrays):
    return tuple(a.astype(np.float64) for a in arrays)


def _close(want, got):
    return want.shape == got.shape and np.allclose(want, got, rtol=1e-3, atol=1e-3)


def _hint(q, k, v, block_k, mask, part):
    """A hint for a wrong ``out`` (part 0) or ``lse`` (part 1): the common fault it matches, if any."""

    def hint(got):
        with np.errstate(all="ignore"):
            if np.any(np.isnan(got)):
                return NAN_HINT if mask is not None else None
            empty = np.isneginf(_lse64(q, k, v, mask))  # (..., T) rows with no allowed key
            cut = (lambda a: np.where(empty, 0, a)) if part else (lambda a: a)
            right = cut(_lse64(q, k, v, mask) if part else scaled_dot_product_attention_forward(*_f64(q, k, v), mask)[0])
            for fault, pair in _candidates(q, k, v, block_k, mask).items():
                want = None if pair[part] is None else cut(pair[part])
                if want is not None and not _close(want, right) and _close(want, cut(got)):
                    return f"this matches an online softmax where {fault}"
        return None

    return hint


def _probe(got) -> tuple:
    """``(value, {"peak": int, "warning": str})`` from a probed call's result (GradeFailure if it is not that)."""
    if not (isinstance(got, tuple) and len(got) == 2 and isinstance(got[1], dict)):
        raise GradeFailure("the grading process sent a malformed probe of the call")
    report = got[1]
    if set(report) != {"peak", "warning"} or type(report["peak"]) is not int or type(report["warning"]) is not str:
        raise GradeFailure("the grading process sent a malformed probe of the call")
    return got[0], report


def _warn_judge(what):
    def judge(got):
        said = _probe(got)[1]["warning"]
        if said:
            raise GradeFailure(f"{what}: {said}; the exercise asks for no warning (avoid -inf - (-inf), 0/0 and log(0)"
                               " on a row with no allowed key rather than silencing them)")  # fmt: skip

    return judge


def _call(q, k, v, block_k, mask, what, atol):
    """One call of ``online_attention_forward``; ``out`` judged against plain attention, ``lse`` against the tiled path."""
    out, _, _ = scaled_dot_product_attention_forward(q, k, v, mask)
    _, lse, _ = tiled_attention_forward(q, k, v, mask, workers=1)
    what = f"{FN}({what})"

    def judge_out(got):
        got = _probe(got)[0]
        tuple_of(what, 2, "(out, lse)")(got)
        check_array(f"{what}: out", got[0], out, atol, hint=_hint(q, k, v, block_k, mask, 0))

    def judge_lse(got):
        got = _probe(got)[0]
        tuple_of(what, 2, "(out, lse)")(got)
        check_neginf(f"{what}: lse", got[1], lse, atol, rtol=atol, hint=_hint(q, k, v, block_k, mask, 1))

    args = (q, k, v, block_k) if mask is None else (q, k, v, block_k, mask)
    parts = ((OUT if mask is None else OUT_MASK, judge_out), (LSE if mask is None else LSE_MASK, judge_lse))
    return Call(FN, args, parts=(*parts, (WARN, _warn_judge(what))), probe=True, memory_note=CAP_NOTE)


# the memory probes: float64, no mask, S keys far more than T queries, so the full scores dwarf a tile
PROBE_SHAPE, PROBE_BLOCKS = (1, 2, 1024, 8192, 8), (32, 256)  # (B, h, T, S, d_k = d_v), (small, large) block_k
MIB = float(1 << 20)
FULL_SCORES = PROBE_SHAPE[0] * PROBE_SHAPE[1] * PROBE_SHAPE[2] * PROBE_SHAPE[3] * 8  # bytes of one (..., T, S) float64
MEMORY_CAP = 96 << 20  # address space after loading the file (mhattn.grade.guard.cap_memory): 3/4 of FULL_SCORES
CAP_NOTE = (f"exercise 11 runs under a memory cap of {MEMORY_CAP >> 20} MiB beyond what the grader's process held "
            f"before loading your file, less than one full (..., T, S) float64 score array of its largest test "
            f"({FULL_SCORES >> 20} MiB): keep only (..., T, block_k) tiles")  # fmt: skip
VALUES = (OUT, LSE, OUT_MASK, LSE_MASK)
QUALIFIERS = ((MEMORY, (OUT, LSE)), (BLOCK, (OUT, LSE)), (WARN, VALUES))  # each scores only beside right values


def _probe_value(what, got, out, lse) -> int:
    """The peak memory of a memory call, once its ``(out, lse)`` is right (a stub's zeros keep no memory point)."""
    value, report = _probe(got)
    try:
        tuple_of(what, 2, "(out, lse)")(value)
        check_array(f"{what}: out", value[0], out, 1e-9)
        check_array(f"{what}: lse", value[1], lse, 1e-9, rtol=1e-9)
    except GradeFailure as err:  # the value checks name the fault; this one is its consequence
        raise GradeFailure(f"{QUALIFIED}: {err}") from None
    return report["peak"]


@functools.cache
def _fixed_probe_inputs():
    """The visible memory probes' inputs (seed 11, the same in every install: a learner can read them)."""
    return _probe_inputs(np.random.default_rng(11))


def _probe_inputs(rng):
    """``(q, k, v, out, lse)`` of a pair of memory probes, drawn from ``rng`` (the expected values with mhattn's
    tiled attention, which never holds the full scores either)."""
    B, h, T, S, d = PROBE_SHAPE
    q, k, v = (rng.standard_normal((B, h, n, d)) for n in (T, S, S))
    out, lse, _ = tiled_attention_forward(q, k, v, None, workers=1)
    return q, k, v, out, lse


def _memory_calls(rng=None):
    """The two probed calls of :data:`MEMORY` and :data:`BLOCK`: the same inputs at a small and a large ``block_k``;
    the visible pair's inputs are fixed (``local``: the learner's visible tests run it, the grader does not), a hidden
    pair's drawn from the hand-in's seed (answers pasted in for the visible pair do not meet it)."""
    q, k, v, out, lse = _fixed_probe_inputs() if rng is None else _probe_inputs(rng)
    column = PROBE_SHAPE[0] * PROBE_SHAPE[1] * PROBE_SHAPE[2] * 8  # bytes of one key's scores (..., T, 1)
    (small, large), seen = PROBE_BLOCKS, {}  # seen: the small tile's peak, for the large tile's judge (judged in order)
    what = [f"{FN}(q {q.shape}, k {k.shape}, v {v.shape} float64, block_k={b})" for b in PROBE_BLOCKS]

    def judge_small(got):
        seen["peak"] = peak = _probe_value(what[0], got, out, lse)
        if peak > FULL_SCORES / 4:
            raise GradeFailure(f"{what[0]}: peak memory {peak / MIB:.1f} MiB, over a quarter of one full (..., T, S) "
                               f"float64 array ({FULL_SCORES / MIB:.0f} MiB): keep only (..., T, block_k) tiles")  # fmt: skip
        if peak < column * small / 2:
            raise GradeFailure(f"{what[0]}: peak memory {peak / MIB:.3f} MiB, under half of one (..., T, block_k) tile "
                               "of scores: were the scores computed at all?")  # fmt: skip

    def judge_large(got):
        peak = _probe_value(what[1], got, out, lse)
        if "peak" not in seen:
            raise GradeFailure(f"{what[1]}: the call with block_k={small} failed, so the two cannot be compared")
        if peak - seen["peak"] < column * (large - small) / 4:  # a quarter of the growth of one (..., T, block_k) tile
            raise GradeFailure(f"{what[1]}: peak memory {peak / MIB:.2f} MiB, against {seen['peak'] / MIB:.2f} MiB at "
                               f"block_k={small}: a tile of {large} keys must hold more than one of {small}, "
                               "so block_k is not honoured")  # fmt: skip

    return [Call(FN, (q, k, v, small), parts=((MEMORY, judge_small), (WARN, _warn_judge(what[0]))), probe=True,
                 memory_note=CAP_NOTE, local=rng is None),
            Call(FN, (q, k, v, large), parts=((BLOCK, judge_large), (WARN, _warn_judge(what[1]))), probe=True,
                 memory_note=CAP_NOTE, local=rng is None)]  # fmt: skip


def visible_ex11():
    q = np.array([[[[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]]])  # (1, 1, 3, 2)
    v = np.array([[[[1.0], [2.0], [3.0]]]])  # (1, 1, 3, 1)
    mask = np.array([[False, True, True], [True, True, True], [False, False, False]])  # query 1 sees nothing
    calls = [_call(q, q.copy(), v, b, None, f"q (1, 1, 3, 2), k=q, v (1, 1, 3, 1), block_k={b}", 1e-12) for b in (3, 2, 1)]
    calls.append(_call(q, q.copy(), v, 2, mask, "q, k=q, v as above, block_k=2, mask (3, 3) with row 1 all True", 1e-12))
    return calls + _memory_calls()


# (dtype, tile size, masked): both dtypes see tiles of 1 key, of all S keys and in between, with and without a mask
HIDDEN = ((np.float64, "1", True), (np.float64, "mid", False), (np.float64, "S", True),
          (np.float32, "1", False), (np.float32, "mid", True), (np.float32, "S", True))  # fmt: skip


def hidden_ex11(rng):
    calls = []
    for dtype, tile, masked in HIDDEN:
        B, h, d_k, d_v = (int(n) for n in rng.integers([1, 1, 2, 1], [3, 4, 7, 5]))
        T = int(rng.integers(2, 10))
        S = int(rng.choice([n for n in range(3, 12) if n != T]))  # S >= 3 keys, so a tile size in between exists
        q, k, v = ((rng.standard_normal((B, h, n, d)) * 2).astype(dtype) for n, d in ((T, d_k), (S, d_k), (S, d_v)))
        block_k = {"1": 1, "S": S, "mid": int(rng.integers(2, S))}[tile]
        mask = None
        if masked:
            mask = rng.random((B, 1, T, S)) < 0.4
            mask[0, 0, -1, :] = True  # one query with no allowed key
        what = f"q {q.shape}, k {k.shape}, v {v.shape} {np.dtype(dtype)}, block_k={block_k}, {'mask' if masked else 'no mask'}"
        calls.append(_call(q, k, v, block_k, mask, what, tol_for(dtype)))
    return calls + _memory_calls(rng)
