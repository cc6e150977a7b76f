"""The untrusted half of ``mhattn grade``: import one learner file, call its functions, send back plain data.

The grader (:mod:`mhattn.grade.launch`) runs ``python -I -S worker.py REQUEST_FD REPLY_FD DONE_FD MEMORY CPU
FILE_SIZE PATH``: isolated (no ``PYTHON*`` variables, no user site) and without ``site`` (no ``.pth`` file, no
``sitecustomize``: nothing a start-up file names runs here), ``PATH`` a JSON list of the folders that hold mhattn
and numpy. It reads the request (which functions to call with which inputs, and the texts of
:mod:`mhattn.grade.guard` and :mod:`mhattn.grade.probe`), sets its own limits and import hook (stand-ins for the
mhattn modules the exercise may not run: :mod:`mhattn.grade.routes`), imports the learner's file, makes each call,
writes the results to ``REPLY_FD`` and one byte to ``DONE_FD``, then waits to be killed with everything it started.
The reply holds return values, and each call's inputs as they were after the call (the grader compares them
with what it sent: :mod:`mhattn.grade.inplace`): arrays as ``.npy`` (read back with ``allow_pickle=False``),
numbers, strings and lists as JSON. Scores, expected values and seeds never reach this process, nor a copy of
the inputs as sent. This file imports nothing from ``mhattn.grade`` (in the sandbox the grader's own files are
out of sight); the grader imports it for the wire format and exercise 10's loss functions.
"""

from __future__ import annotations

import errno
import io
import json
import os
import sys
import time
import types

MAGIC = b"MHATTN-GRADE-1\n"
MAX_DEPTH = 16
EXIT_TOO_LARGE = 86  # the worker's exit code when its results do not fit under the size limit (not a usual one)
RULES = None  # the grader's mhattn.grade.guard, run from the request's text (main); None when run in-process
PROBE = None  # the grader's mhattn.grade.probe, likewise
PRISTINE = None  # the probe's Pristine: taken before the learner's file is loaded (main), for a probed call's watch


class Opaque:
    """A returned value that is not plain data, known by its type's name only."""

    def __init__(self, name: str):
        self.name = str(name)[:80]


class Fn:
    """A callable argument, sent as data: ``kind`` names one of :data:`CALLABLES`, ``data`` its inputs."""

    def __init__(self, kind: str, data: dict):
        self.kind, self.data = kind, data


# ---- the wire format: JSON for structure, .npy for arrays ---------------------------------
def encode(value, blobs: list, depth: int = 0):
    """A JSON-able tree for ``value``; arrays are appended to ``blobs`` and named by index."""
    import numpy as np

    t = type(value)
    if value is None or t in (bool, str, int, float):
        return value
    if issubclass(t, (np.ndarray, np.generic)):
        arr = np.asarray(value)  # a subclass travels as a plain ndarray
        if arr.dtype.hasobject or arr.dtype.fields is not None:
            return {"$other": f"array of dtype {arr.dtype}"}
        blobs.append(arr)
        return {"$array" if issubclass(t, np.ndarray) else "$scalar": len(blobs) - 1}
    if depth < MAX_DEPTH and t in (tuple, list):
        items = [encode(v, blobs, depth + 1) for v in value]
        return {"$tuple": items} if t is tuple else items
    if depth < MAX_DEPTH and t is dict and all(type(k) is str for k in value):
        return {"$dict": {k: encode(v, blobs, depth + 1) for k, v in value.items()}}
    if t is Opaque:
        return {"$other": value.name}
    if t is Fn:
        return {"$fn": value.kind, "data": encode(value.data, blobs, depth + 1)}
    for base in (int, float, str):  # a subclass: only its plain value travels
        if issubclass(t, base):
            return encode(base.__new__(base, value) if base is not int else int.__index__(value), blobs, depth)
    return {"$other": t.__name__}


def decode(node, arrays: list, allow_fn: bool, depth: int = 0):
    """The value that :func:`encode` wrote. Raises ValueError on anything it would not write."""
    if depth > MAX_DEPTH + 1:
        raise ValueError("nested too deeply")
    if node is None or type(node) in (bool, int, float, str):
        return node
    if type(node) is list:
        return [decode(v, arrays, allow_fn, depth + 1) for v in node]
    if type(node) is not dict or not node:
        raise ValueError(f"unexpected {type(node).__name__}")
    key = next(iter(node))
    if key in ("$array", "$scalar") and len(node) == 1:
        if type(node[key]) is not int or not 0 <= node[key] < len(arrays):
            raise ValueError("an array index out of range")
        arr = arrays[node[key]]
        if key == "$scalar" and arr.ndim != 0:
            raise ValueError("a scalar that is not 0-d")
        return arr if key == "$array" else arr[()]
    if key == "$tuple" and len(node) == 1 and type(node[key]) is list:
        return tuple(decode(v, arrays, allow_fn, depth + 1) for v in node[key])
    if key == "$dict" and len(node) == 1 and type(node[key]) is dict:
        return {str(k): decode(v, arrays, allow_fn, depth + 1) for k, v in node[key].items()}
    if key == "$other" and len(node) == 1:
        return Opaque(node[key])
    if key == "$fn" and allow_fn and set(node) == {"$fn", "data"}:
        return make_callable(node["$fn"], decode(node["data"], arrays, allow_fn, depth + 1))
    raise ValueError(f"unexpected key {str(key)[:20]!r}")


def write_frame(f, tree) -> None:
    """Write ``tree`` (plain values and arrays) as one frame: magic, JSON length, JSON, .npy blobs."""
    blobs: list = []
    write_raw(f, encode(tree, blobs), blobs)


def write_raw(f, body, blobs) -> None:
    """Write an encoded ``body`` and its arrays ``blobs`` as one frame."""
    import numpy as np

    data = json.dumps({"arrays": len(blobs), "tree": body}).encode("utf-8")
    f.write(MAGIC + len(data).to_bytes(8, "little") + data)
    for arr in blobs:
        np.lib.format.write_array(f, arr, allow_pickle=False)


def read_raw(data: bytes) -> tuple:
    """``(tree, arrays)`` of one frame, the arrays still named by index. Raises ValueError (or OSError) if malformed."""
    import numpy as np

    if not data.startswith(MAGIC) or len(data) < len(MAGIC) + 8:
        raise ValueError("no reply header")
    f = io.BytesIO(data)
    f.seek(len(MAGIC))
    n = int.from_bytes(f.read(8), "little")
    if n > len(data):
        raise ValueError("a truncated reply")
    head = json.loads(f.read(n).decode("utf-8"))
    if type(head) is not dict or set(head) != {"arrays", "tree"} or type(head["arrays"]) is not int:
        raise ValueError("no reply header")
    return head["tree"], [np.lib.format.read_array(f, allow_pickle=False) for _ in range(min(head["arrays"], 100_000))]


def read_frame(data: bytes, allow_fn: bool = False):
    """The tree of one frame. Raises ValueError (or OSError) if it is malformed in any way."""
    tree, arrays = read_raw(data)
    return decode(tree, arrays, allow_fn)


# ---- callable arguments (exercise 10's loss functions) -----------------------------------
def additive_loss(data):
    """``loss(ξ) = cost · (1 - ξ)``: removing head i costs ``cost[i]``."""
    cost = data["cost"]
    return lambda xi: float(cost @ (1.0 - xi))


def mha_loss(data):
    """``loss(ξ)`` = mean squared distance of multi-head attention (head mask ξ) to a target."""
    import numpy as np

    x, target, params, h = data["x"], data["target"], data["params"], data["num_heads"]

    def loss(xi):  # mhattn imported at the first call: after the worker's import hook, as the exercise may
        from mhattn.functional import multi_head_attention_forward

        if not isinstance(xi, np.ndarray) or xi.shape != (h,):
            raise ValueError(f"loss_fn was given a head mask of shape {getattr(xi, 'shape', type(xi))}, expected ({h},)")
        out = multi_head_attention_forward(x, x, x, params, h, head_mask=xi.astype(np.float64))[0]
        return float(((out - target) ** 2).mean())

    return loss


CALLABLES = {"additive_loss": additive_loss, "mha_loss": mha_loss}


def make_callable(kind, data):
    if kind not in CALLABLES:
        raise ValueError(f"unknown callable {str(kind)[:20]!r}")
    return CALLABLES[kind](data)


# ---- running the learner's code -----------------------------------------------------------
def load(path: str, source: str) -> types.ModuleType:
    """Execute the learner's source as a new module named after the file (not put in sys.modules)."""
    module = types.ModuleType(f"submission_{os.path.basename(path)[:-3]}")
    module.__file__ = path
    exec(compile(source, path, "exec"), module.__dict__)
    return module


def describe(err: BaseException, path: str) -> dict:
    """What the grader shows of an exception: its type, message, and the line of the learner's file."""
    import traceback

    tb = traceback.extract_tb(err.__traceback__)
    lines = [f.lineno for f in tb if f.filename == path]
    try:
        msg = str(err)[:300]
    except BaseException:  # noqa: BLE001 - a learner's __str__ may fail too
        msg = "(its message could not be printed)"
    return {"type": type(err).__name__, "mro": [c.__name__ for c in type(err).__mro__], "message": msg,
            "function": tb[-1].name if tb else "", "line": lines[-1] if lines else None}  # fmt: skip


def call_one(module, call: dict, path: str) -> dict:
    """Call ``module.<fn>(*args)``: its value (or exception), and its inputs as they are after the call.

    No copy of the inputs as sent is kept here: the grader compares (a submission that patches this
    process can only send back the inputs it has, changed or not).
    """
    import inspect

    fn, args = getattr(module, call["fn"]), call["args"]
    try:
        names = [str(n) for n in inspect.signature(fn).bind(*args).arguments]
    except Exception:  # noqa: BLE001 - no signature, or one that does not take these arguments
        names = [f"argument {i}" for i in range(len(args))]
    try:
        value, probe = _probed(fn, args, path) if call.get("probe") else (fn(*args), None)
    except BaseException as err:  # noqa: BLE001 - the learner's exception is part of the reply
        return {"raised": describe(err, path)}
    value = _plain(value) if probe is None else (_plain(value), probe)
    return {"value": value, "inputs": _plain(list(args)), "names": names}


def _probed(fn, args, path: str) -> tuple:
    """``(fn(*args), {"peak": bytes, "warning": text})`` for a call the request marks ``probe`` (exercise 11):
    :func:`mhattn.grade.probe.probed`, watched by :class:`~mhattn.grade.probe.QuietWatch`."""
    import importlib

    probe = PROBE or importlib.import_module("mhattn.grade.probe")
    return probe.probed(fn, args, path, probe.QuietWatch(PRISTINE))  # silencing the warning is a fault too


def _plain(value):
    """``value``, or :class:`Opaque` where it cannot travel (known by its type's name only)."""
    try:
        encode(value, [])
    except BaseException:  # noqa: BLE001 - e.g. a learner's int subclass whose __index__ raises
        return Opaque(type(value).__name__)
    return value


def run(request: dict) -> dict:
    """Import the learner's file and make every call of the request."""
    path, source = request["file"], request["source"]  # the text the grader checked, not a second read of the file
    try:
        module = load(path, source)
    except BaseException as err:  # noqa: BLE001
        return {"load": describe(err, path), "missing": [], "outcomes": []}
    missing = [name for name in request["functions"] if not callable(getattr(module, name, None))]
    if missing:
        return {"load": None, "missing": missing, "outcomes": []}
    return {"load": None, "missing": [], "outcomes": [call_one(module, c, path) for c in request["calls"]]}


def from_text(source: str, name: str) -> types.ModuleType:
    """The grader's module ``mhattn.grade.<name>`` (:mod:`~mhattn.grade.guard`: limits and imports;
    :mod:`~mhattn.grade.probe`: what a probed call measures), run from the text the request carries."""
    module = types.ModuleType(f"mhattn_grade_{name}")  # not in sys.modules
    exec(compile(source, f"<mhattn.grade.{name}>", "exec"), module.__dict__)
    return module


def main(argv: list) -> None:
    req_fd, reply_fd, done_fd, memory, cpu, file_size = (int(a) for a in argv[:6])
    stdlib = list(sys.path)  # run with -I -S: the interpreter's own folders only
    sys.path += json.loads(argv[6])
    with os.fdopen(req_fd, "rb") as f:  # the grader's request: trusted, read before any limit
        request = read_frame(f.read(), allow_fn=True)
    global RULES, PROBE
    RULES = rules = from_text(request["guard"], "guard")
    PROBE = from_text(request["probe"], "probe")
    rules.limit(memory, cpu, file_size)
    rules.cap_output()
    for fd in (reply_fd, done_fd):
        os.set_inheritable(fd, False)
    import numpy as np

    np.seterr(all="ignore")  # a learner's overflow shows up as a NaN in the comparison instead (a probed call: a warning)
    rules.install_finder(request["stubs"], request["allowed"], stdlib)
    if request.get("cap") and not (rules.cap_memory(request["cap"]) and rules.no_children()):
        sys.exit("the memory cap this exercise needs cannot be set here (no /proc?)")
    global PRISTINE
    if any(call.get("probe") for call in request["calls"]):  # before the learner's file: what silencing would change
        PRISTINE = PROBE.Pristine()
    result = run(request)
    try:
        with os.fdopen(reply_fd, "wb", closefd=False) as f:
            write_frame(f, result)
    except OSError as err:  # larger than RLIMIT_FSIZE allows (EFBIG): say so by the exit code
        if err.errno == errno.EBADF:
            sys.exit("OSError: the reply channel was closed (by the submission?)")
        os._exit(EXIT_TOO_LARGE)
    os.write(done_fd, b"1")
    while True:  # the grader kills this process and everything it started
        time.sleep(60)


if __name__ == "__main__":
    main(sys.argv[1:])
