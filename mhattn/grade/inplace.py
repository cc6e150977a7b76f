"""The in-place check, in the trusted grader: did a call change the inputs it was given?

The worker (:mod:`mhattn.grade.worker`) sends back, with each call's value, that call's inputs as they
are after the call, and keeps no copy of them as they were sent. The grader compares them here with
the request it wrote, so a submission that patches the worker's process (``numpy.array_equal``, the
worker's own functions) cannot hide a changed input: it could only send back the inputs as sent if it
had kept them unchanged. Arrays are compared bit for bit (dtype, shape, bytes: a NaN or a -0.0 counts).

:func:`settle` turns the worker's reply into the one :mod:`mhattn.grade.verdict` reads: each result
``{"value", "inputs", "names"}`` becomes ``{"value"}``, or ``{"mutated": name}`` for the first changed
input. A result of any other shape is left with a field too many, so the verdict calls the reply malformed.
"""

from __future__ import annotations

import io

from mhattn.grade.worker import read_raw, write_raw

SENT = frozenset({"value", "inputs", "names"})


def settle(request: bytes, reply: bytes) -> bytes:
    """The reply with each call's inputs compared to those in ``request`` (a reply that does not parse is kept)."""
    try:
        sent, sent_arrays = read_raw(request)
        tree, arrays = read_raw(reply)
        calls = [_fields(c)["args"] for c in _fields(sent)["calls"]]
    except Exception:  # noqa: BLE001 - not a frame (the verdict says so); the request is the grader's own
        return reply
    body = _fields(tree)
    if body is None or type(body.get("outcomes")) is not list:
        return reply
    body["outcomes"] = [_one(res, calls[i] if i < len(calls) else None, sent_arrays, arrays)
                        for i, res in enumerate(body["outcomes"])]  # fmt: skip
    buf = io.BytesIO()
    write_raw(buf, tree, arrays)
    return buf.getvalue()


def _fields(node):
    """The items of an encoded dict (``{"$dict": {...}}``), or None."""
    if type(node) is dict and set(node) == {"$dict"} and type(node["$dict"]) is dict:
        return node["$dict"]
    return None


def _one(node, args, sent_arrays, arrays):
    res = _fields(node)
    if res is None or "inputs" not in res and "value" not in res:
        return node  # an exception, or something the verdict will refuse
    if set(res) != SENT or args is None:
        return {"$dict": {**res, "inputs": None}}  # a value without its inputs (a forged reply?): one field too many
    after = res["inputs"]
    if type(after) is not list or len(after) != len(args):
        return {"$dict": {"mutated": "(its inputs, which could not be read back)"}}
    names = res["names"] if type(res["names"]) is list and len(res["names"]) == len(args) else []
    for i, (before, now) in enumerate(zip(args, after, strict=True)):
        if not same(before, sent_arrays, now, arrays):
            name = names[i] if i < len(names) and type(names[i]) is str else f"argument {i}"
            return {"$dict": {"mutated": name[:80]}}
    return {"$dict": {"value": res["value"]}}


def same(before, sent_arrays, now, arrays, depth: int = 0) -> bool:
    """Whether the encoded value ``now`` (arrays named in ``arrays``) is ``before`` (arrays in ``sent_arrays``)."""
    if depth > 40:
        return False
    if type(before) is dict and "$fn" in before:  # a callable argument (exercise 10's loss): the worker made it
        return True
    if type(before) is dict and len(before) == 1:
        key = next(iter(before))
        if key in ("$array", "$scalar"):
            return _same_array(sent_arrays[before[key]], now, arrays, key)
        if type(now) is not dict or set(now) != {key}:
            return False
        return same(before[key], sent_arrays, now[key], arrays, depth + 1)
    if type(before) is list:
        return type(now) is list and len(now) == len(before) and all(
            same(b, sent_arrays, n, arrays, depth + 1) for b, n in zip(before, now, strict=True))  # fmt: skip
    if type(before) is dict:  # the items of a "$dict"
        return type(now) is dict and now.keys() == before.keys() and all(
            same(before[k], sent_arrays, now[k], arrays, depth + 1) for k in before)  # fmt: skip
    return type(now) is type(before) and now == before


def _same_array(sent, now, arrays, key) -> bool:
    if type(now) is not dict or set(now) != {key} or type(now[key]) is not int or not 0 <= now[key] < len(arrays):
        return False
    got = arrays[now[key]]
    return got.dtype == sent.dtype and got.shape == sent.shape and got.tobytes() == sent.tobytes()
