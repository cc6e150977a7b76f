"""Submissions that reach the step's reference by another route (mhattn.grade.routes): each forfeits its exercise.

Each of these scores full marks when no module is hidden (tests/grader/test_grade_routes.py checks that it is a route).
"""

from __future__ import annotations

from grader_attacks.edits import EX02, Case, Edit, ex02_instead

_TILED_EX04 = """    import importlib
    T = importlib.import_module("mhattn.functional.attention_" + "tiled")
    _, _, cache = T.tiled_attention_forward(q, k, v, weights == 0)
    return T.tiled_attention_backward(dout, cache)
"""
_TILED_EX03 = """    import importlib
    T = importlib.import_module("mhattn.functional.attention_" + "tiled")
    eye = np.eye(k.shape[-2], dtype=q.dtype)
    eye = np.broadcast_to(eye, k.shape[:-2] + eye.shape)  # values = identity: the output is the weights
    out = T.tiled_attention_forward(q, k, v, mask, causal=causal)[0]
    return out, T.tiled_attention_forward(q, k, eye, mask, causal=causal)[0]
"""
_TILED_EX02 = """
import importlib
T = importlib.import_module("mhattn.functional.attention_" + "tiled")
S = scores.shape[-1]
q = scores.reshape((-1, 1) + scores.shape[-2:]) * np.sqrt(S)  # keys and values the identity: q k^T / sqrt(S) = scores
eye = np.broadcast_to(np.eye(S, dtype=scores.dtype), q.shape[:2] + (S, S))
m = None if mask is None else np.broadcast_to(mask, scores.shape).reshape(q.shape)
return T.tiled_attention_forward(q.astype(scores.dtype), eye, eye, m)[0].reshape(scores.shape)
"""
ROUTES = (
    Case("tiled_backward_for_ex04", "ex04_attention_backward", (Edit("ex04_attention_backward.py",
         "    # step 4 was: out = weights @ v\n", _TILED_EX04),), "is hidden while ex04_attention_backward is graded"),
    Case("tiled_identity_softmax_for_ex02", EX02[:-3], (ex02_instead(_TILED_EX02),),
         "is hidden while ex02_softmax is graded"),
    Case("tiled_forward_and_weights_for_ex03", "ex03_attention_forward", (Edit("ex03_attention_forward.py",
         "    T, S = q.shape[-2], k.shape[-2]\n", _TILED_EX03),), "is hidden while ex03_attention_forward is graded"),
)  # fmt: skip
