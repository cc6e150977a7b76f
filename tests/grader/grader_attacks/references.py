"""Submissions that reach the step's reference by a trick: each must forfeit its exercise.

The reference read through ``getsource``, ``reload``, ``__wrapped__`` or its file, computed by another step (attention
with identity keys, tiled attention, multi-head attention's tiled switch, the cross-entropy's softmax), counted from
freshly built parameters, taken from torch or from the grader's own reference (exercise 10).
"""

from __future__ import annotations

from grader_attacks.edits import EX02, EX08, EX08_CHECKED, EX11, SANDBOX, Case, Edit, _code, ex02_instead

_READ_REFERENCE = """
import os
import mhattn
path = os.path.join(os.path.dirname(os.path.realpath(mhattn.__file__)), "functional", "softmax.py")
ns = {"__name__": "copy"}
exec(open(path).read(), ns)
return ns["softmax_" + "forward"](scores, mask)[0]
"""
_TILED = """
    import importlib
    T = importlib.import_module("mhattn.functional.attention_" + "tiled")
    try:
        return getattr(T, "tiled_attention_" + "forward")(q, k, v, mask, block_k=block_k)[:2]
    except RuntimeError:
        import math
        scale = 1.0 / math.sqrt(q.shape[-1])
        return getattr(T, "_forward_" + "block")(np, q, k, v, mask, False, scale, 0, q.shape[-2], block_k, None)
"""
_MHA_TILED = """
    import importlib
    F = importlib.import_module("mhattn.functional." + "mha")
    eye = np.eye(q.shape[-1], dtype=q.dtype)
    params = {"W_q": eye, "W_k": eye, "W_v": eye, "W_o": eye}
    x = [a[0].swapaxes(0, 1) for a in (q, k, v)]  # (T or S, h, d_k): h plays the batch
    return getattr(F, "multi_head_attention_" + "forward")(*x, params, 1, tiled=True)
"""

EX10_END = "    return np.array([expected_loss_change(loss_fn, num_heads, k) for k in range(num_heads + 1)], dtype=np.float64)\n"

REFERENCES = (
    Case("getsource_exec_reference", EX02[:-3], (ex02_instead("""
         import importlib, inspect
         S = importlib.import_module("mhattn.functional." + "softmax")
         ns = {"__name__": "copy"}
         exec(inspect.getsource(S), ns)
         return ns["softmax_" + "forward"](scores, mask)[0]"""),), "softmax"),
    Case("reload_reference", EX02[:-3], (ex02_instead("""
         import importlib
         S = importlib.reload(importlib.import_module("mhattn.functional." + "softmax"))
         return getattr(S, "softmax_" + "forward")(scores, mask)[0]"""),), "is hidden while ex02_softmax is graded"),
    Case("wrapped_reference", EX02[:-3], (ex02_instead("""
         import mhattn.functional as F
         f = getattr(F, "softmax_" + "forward")
         f = getattr(f, "__wrapped__", f)
         return f(scores, mask)[0]"""),), "is hidden while ex02_softmax is graded"),
    Case("reference_through_another_step", EX02[:-3], (ex02_instead("""
         import mhattn.functional as F
         S = scores.shape[-1]
         eye = np.broadcast_to(np.eye(S, dtype=scores.dtype) * np.sqrt(S), scores.shape[:-2] + (S, S))
         return getattr(F, "scaled_dot_product_attention_" + "forward")(scores, eye, eye, mask)[1]"""),),
         "is hidden while ex02_softmax is graded"),
    Case("read_reference_file", EX02[:-3], (ex02_instead(_READ_REFERENCE),), "is hidden while ex02_softmax is graded",
         modes=SANDBOX),
    Case("tiled_reference_and_private_helper", "ex11_online_softmax", (Edit(EX11, "    S = k.shape[-2]\n", _TILED),),
         "is hidden while ex11_online_softmax is graded"),
    Case("mha_tiled_switch", "ex11_online_softmax", (Edit(EX11, "    S = k.shape[-2]\n", _MHA_TILED),),
         "is hidden while ex11_online_softmax is graded"),
    Case("torch_reference", EX02[:-3], (ex02_instead("""
         import importlib
         torch = importlib.import_module("tor" + "ch")
         return torch.softmax(torch.from_numpy(scores), -1).numpy()"""),), "torch is not available while grading"),
    Case("softmax_inside_cross_entropy", EX02[:-3], (ex02_instead("""
         import importlib
         L = importlib.import_module("mhattn.functional." + "losses")
         S = scores.shape[-1]
         ce = L.cross_entropy_forward(scores.reshape(-1, S), np.zeros(scores.size // S, dtype=np.int64))
         return ce[1].probs.reshape(scores.shape)"""),), "is hidden while ex02_softmax is graded"),
    Case("count_from_built_parameters", EX08[:-3], (Edit(EX08, EX08_CHECKED, EX08_CHECKED + _code("""
         import importlib
         import numpy as np
         init = importlib.import_module("mhattn.nn." + "init")
         p = init.init_mha_params(d_model, kdim or d_model, vdim or d_model, bias, np.float32, np.random.default_rng(0))
         return int(sum(v.size for v in p.values()))""", "    ")),), "is hidden while ex08_count_parameters is graded"),
    Case("grader_reference_at_run_time", "ex10_random_removal", (Edit("ex10_random_removal.py", EX10_END, EX10_END + """
import importlib

def removal_curve(loss_fn, num_heads):
    return importlib.import_module("mhattn.gra" + "de.reference").removal_curve(loss_fn, num_heads)
"""),), "mhattn.grade is not available while grading"),
)  # fmt: skip
