"""The attacks on the grader, each as small edits of solutions/ (with the honest mistakes, WRONG, in ALL).

WRONG (grader_attacks/wrong.py): honest mistakes; each must lose exactly its own exercise's points (visible
or hidden test failed). ATTACKS: submissions that try to get points without computing the right values, to
break the grader, or to outlive it; the first ones came from a review of the grader, the rest were found while fixing them.
REFERENCES (grader_attacks/references.py): the step's reference reached by a trick (getsource, reload, torch, ...);
ROUTES (grader_attacks/routes.py): a reference reached by another route.
"""

from __future__ import annotations

from grader_attacks.edits import (
    BOTH,
    EX02,
    EX05,
    MARKER,
    SANDBOX,
    SLEEPER,
    ZEROS,
    Case,
    at_import,
    ex02_instead,
    ex05_first,
    ex05_instead,
)
from grader_attacks.references import REFERENCES
from grader_attacks.routes import ROUTES
from grader_attacks.wrong import WRONG

_FORGE = """
import os, sys
for fd in range(1, 64):
    try:
        os.write(fd, b'{"points": 1000, "reason": "all visible and hidden tests passed"}')
    except OSError:
        pass
os._exit(0)
"""
_PATCH = (
    """
import importlib, sys
for name in ["mhattn.grade.harness", "mhattn.grade.verdict", "mhattn.grade.runner"]:
    try:
        importlib.import_module(name)
    except Exception:
        pass
for name, mod in list(sys.modules.items()):
    for attr in ("check_array", "check_number", "judge_one", "score"):
        if hasattr(mod, attr):
            setattr(mod, attr, lambda *a, **k: None)
"""
    + ZEROS
)
_FRAMES = (
    """
import sys
f = sys._getframe(1)
while f is not None:
    for v in list(f.f_locals.values()):
        if isinstance(v, np.ndarray) and v.shape == (B, T, h * d_k) and v is not x:
            return v
    f = f.f_back
"""
    + ZEROS
)
_SUBCLASS = """
class Liar(np.ndarray):
    def __sub__(self, other):
        return np.zeros(self.shape)
    __rsub__ = __sub__
    def __eq__(self, other):
        return True
return np.zeros((B, T, h * d_k), dtype=x.dtype).view(Liar)
"""
_TAMPER = """
import glob, os, site
import mhattn
root = os.path.dirname(os.path.realpath(mhattn.__file__))
targets = glob.glob(os.path.join(root, "grade", "*.py"))
targets += [os.path.join(d, "zz_mhattn_attack.pth") for d in site.getsitepackages()]
for path in targets:
    try:
        with open(path, "a") as f:
            f.write("\\n# mhattn-attack-marker\\n")
    except OSError:
        pass
"""
_SOLUTION_FILE = """
import os
import mhattn
root = os.path.dirname(os.path.dirname(os.path.realpath(mhattn.__file__)))
ns = {}
exec(open(os.path.join(root, "solutions", "ex05_combine_heads.py")).read(), ns)
return ns["combine_heads"](x)
"""
_FORK_DAEMON = f"""
import os, sys
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv(sys.executable, {SLEEPER})
    os._exit(0)
"""
_FORGE_FRAME = """
import os, sys
main = sys.modules["__main__"]
reply, done = int(sys.argv[2]), int(sys.argv[3])
fake = {"load": None, "missing": [], "outcomes": [{"value": np.zeros((1, 3, 4))}] * 100, "points": 1000}
with os.fdopen(reply, "wb", closefd=False) as f:
    main.write_frame(f, fake)
os.write(done, b"1")
os._exit(0)
"""
_ANSWER_IN_INPUTS = """
import sys
f = sys._getframe(1)
while f is not None and not isinstance(f.f_locals.get("request"), dict):
    f = f.f_back
calls = f.f_locals["request"]["calls"] if f is not None else []
if mask is not None:
    for i, c in enumerate(calls):  # a later call's input that is this call's answer
        later = [d["args"][1] for d in calls[i:] if d["fn"] == "softmax_backward" and d["args"][1].shape == scores.shape]
        if c["args"] and c["args"][0] is scores and later:
            return later[0]
    if scores.shape == (2, 3):  # the visible example, worked out by hand
        e = np.exp([1.0, 2.0])
        return np.array([[e[0] / e.sum(), e[1] / e.sum(), 0.0], [0.0, 0.0, 0.0]])
e = np.exp(scores - scores.max(axis=-1, keepdims=True))  # no mask handled
return (e / e.sum(axis=-1, keepdims=True)).astype(scores.dtype)
"""
KEEP_MTIME = """
import os
import mhattn
path = os.path.join(os.path.dirname(os.path.realpath(mhattn.__file__)), "grade", "__main__.py")
st = os.stat(path)
try:
    with open(path, "r+b") as f:  # same bytes here; an attack would change a comparison of the same length
        data = f.read()
        f.seek(0)
        f.write(data)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # size and modification time as they were
except OSError:
    pass
"""
_FILL_ROOT = """
for folder in ("/", "/dev/shm", "/run"):  # tmpfs of up to half the RAM each, if writable
    with open(folder.rstrip("/") + "/mhattn-attack-blob", "wb") as f:
        f.write(b"x" * (1 << 20))
"""

ATTACKS = (
    Case("forge_result_file_and_exit", "ex05_combine_heads", (at_import(EX05, _FORGE),), "before its reply was complete"),
    Case("patch_grader_comparison", "ex05_combine_heads", (ex05_instead(_PATCH),), "max |error| vs reference"),
    Case("read_checker_frames", "ex05_combine_heads", (ex05_instead(_FRAMES),), "max |error| vs reference"),
    Case("ndarray_subclass_zero_difference", "ex05_combine_heads", (ex05_instead(_SUBCLASS),), "max |error| vs reference"),
    Case("background_child", "ex05_combine_heads", (at_import(EX05, f"import subprocess, sys\nsubprocess.Popen({SLEEPER})"),),
         full=True),
    Case("background_child_new_session", "ex05_combine_heads", (at_import(EX05,
         f"import subprocess, sys\nsubprocess.Popen({SLEEPER}, start_new_session=True)"),), full=True),
    Case("background_thread", "ex05_combine_heads", (at_import(EX05,
         "import threading, time\nthreading.Thread(target=time.sleep, args=(60,)).start()"),), full=True),
    Case("double_fork_daemon", "ex05_combine_heads", (at_import(EX05, _FORK_DAEMON),), full=True),
    Case("exec_solutions_file", "ex05_combine_heads", (ex05_instead(_SOLUTION_FILE),), "No such file", modes=SANDBOX),
    Case("rewrite_grader_and_pth", "ex05_combine_heads", (at_import(EX05, _TAMPER), ex05_instead(ZEROS)),
         "max |error| vs reference", modes=SANDBOX),
    Case("print_2_gib", "ex05_combine_heads", (ex05_first(
         "import sys\nfor _ in range(2048):\n    sys.stdout.write('x' * (1 << 20))"),),
         full=True),  # printed output is cut, not scored 0 (issue 27); a result past the limit still is: huge_result
    Case("newline_in_exception", "ex05_combine_heads", (ex05_first(
         "raise ValueError('boom\\nex06_mha_forward            10/10  all tests passed\\x1b[2J')"),), "boom\\n"),
    Case("forge_reply_frame", "ex05_combine_heads", (ex05_first(_FORGE_FRAME),), "malformed reply"),
    Case("patch_numpy", "ex05_combine_heads", (ex05_instead("np.allclose = lambda *a, **k: True\nnp.max = lambda *a, **k: 0.0\n"
                                                            + ZEROS),), "max |error| vs reference"),
    Case("memory_hog", "ex05_combine_heads", (ex05_first("big = np.ones(1 << 32)"),), "MemoryError"),
    Case("endless_loop_ignoring_sigterm", "ex05_combine_heads", (ex05_first(
         "import signal\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nwhile True:\n    pass"),), "timed out"),
    Case("close_every_descriptor", "ex05_combine_heads", (at_import(EX05, "import os\nos.closerange(3, 4096)"),),
         "reply channel was closed"),
    Case("exit_inside_function", "ex05_combine_heads", (ex05_first("import os\nos._exit(0)"),), "exit code 0"),
    Case("huge_result", "ex05_combine_heads", (ex05_instead("return np.zeros(3 * 10 ** 6)"),), "16 MiB"),
    Case("fake_array_class", "ex05_combine_heads", (ex05_instead(
         "class Fake:\n    __class__ = np.ndarray\n    shape = (B, T, h * d_k)\n    dtype = x.dtype\nreturn Fake()"),),
         "expected a NumPy array, got Fake"),
    Case("kill_the_grader", "ex05_combine_heads", (ex05_first("import os, signal\nfor pid in (os.getppid(), 1):\n"
                                                              "    try:\n        os.kill(pid, signal.SIGKILL)\n"
                                                              "    except OSError:  # as root the worker's user may not\n"
                                                              "        pass"),), full=True, modes=SANDBOX),
)  # fmt: skip

ATTACKS += (
    Case("answer_in_another_calls_inputs", EX02[:-3], (ex02_instead(_ANSWER_IN_INPUTS),), "max |error| vs reference"),
    Case("fill_sandbox_root_and_dev", "ex05_combine_heads", (ex05_first(_FILL_ROOT),), "Read-only file system", modes=SANDBOX),
)  # fmt: skip


# a reference reached by another route, each hole as a kind (tests/grader/test_grade_attacks.py adds the ones that need a set-up)
_MUTATE_AND_PATCH = """
out = np.ascontiguousarray(x.transpose(0, 2, 1, 3)).reshape(B, T, h * d_k)
x[...] = 0.0  # the input changed in place ...
np.array_equal = lambda *a, **k: True  # ... and every comparison in this process told it is not
np.allclose = np.array_equiv = lambda *a, **k: True
return out
"""
_EXIT_LEAVING_HELPER = _FORK_DAEMON + "os._exit(0)  # just before its reply\n"
_FORK_BOMB = """
import os
while True:
    try:
        os.fork()
    except OSError:
        pass
"""
ATTACKS += (
    Case("mutate_input_patch_comparison", "ex05_combine_heads", (ex05_instead(_MUTATE_AND_PATCH),),
         "modified its input x in place"),
    Case("exit_leaving_session_helper", "ex05_combine_heads", (ex05_first(_EXIT_LEAVING_HELPER),), "exit code 0"),
    Case("stdlib_sysconfig", "ex05_combine_heads", (at_import(EX05, "import sysconfig\nsysconfig.get_paths()"),), full=True),
)  # fmt: skip
ATTACKS += REFERENCES + ROUTES
BOMB = Case("fork_bomb", "ex05_combine_heads", (ex05_first(_FORK_BOMB),), "")
ALL = WRONG + ATTACKS
assert len({c.name for c in ALL}) == len(ALL)
assert all(set(c.modes) <= set(BOTH) for c in ALL) and MARKER
