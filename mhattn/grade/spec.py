"""The graded exercises: file, functions, points, checks, and the references each may not use.

A submission may use mhattn's reference for *other* steps (e.g. exercise 6 may call
mhattn's split heads), but not the one it is asked to write; ``banned`` lists those as
``"module:attribute"``: every mhattn function that computes the step, also where it is a side
result (the softmax inside the cross-entropy, a parameter count from freshly built parameters).
While an exercise is graded, every module named there is replaced by a stand-in that raises
(see :mod:`mhattn.grade.stubs`); ``solutions/`` and ``mhattn.grade`` are out of the worker's sight.

Adding an exercise ``exNN_<topic>`` (the docs spell out no count of exercises, so none goes stale):

1. write ``exercises_src/exNN_<topic>.py`` with ``### BEGIN/END SOLUTION`` regions and run
   ``python scripts/make_exercises.py``;
2. write ``visible_exNN()`` and ``hidden_exNN(rng)`` in a checks module (``checks_steps.py`` or a new
   ``checks_<topic>.py``): each returns a list of :class:`~mhattn.grade.harness.Call`, i.e. the
   learner's function name, plain-data arguments (arrays, numbers, lists, dicts) and a judge built with
   :func:`~mhattn.grade.harness.array` / :func:`~mhattn.grade.harness.number` from mhattn's own result;
3. add one ``Exercise(...)`` line to :data:`EXERCISES` below: its named checks with their points (each
   call of step 2 says, by ``check=`` or ``parts=``, which check it counts for; a check scores its points
   when every call of it passes), and ``banned`` naming the mhattn functions that compute this step
   (their modules are hidden while it is graded); a check that qualifies a result (no warning, memory)
   goes in ``qualifiers`` with the value checks it needs, so it never scores without right values;
4. add the ``exNN`` pytest marker in ``pyproject.toml`` and a row to README.md's exercise table;
   ``tests/test_grade.py`` then checks the table against this list, and that
   ``solutions/`` scores full marks and the stub 0.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from mhattn.grade import checks_heads as H
from mhattn.grade import checks_mha as M
from mhattn.grade import checks_steps as S
from mhattn.grade import checks_tiled as TL
from mhattn.grade.scan import silencing

F = "mhattn.functional."
MHA_CLASS = "mhattn.nn.attention:MultiHeadAttention"


@dataclass(frozen=True)
class Exercise:
    name: str  # also the file stem: exercises/<name>.py
    title: str
    checks: tuple[tuple[str, int], ...]  # (check name, points): each call of visible/hidden counts for one
    functions: tuple[str, ...]  # what the learner's module must define
    banned: tuple[str, ...]  # mhattn references for this very step
    visible: Callable  # () -> list[Call], fixed small inputs
    hidden: Callable  # (numpy Generator) -> list[Call], fresh random inputs
    qualifiers: tuple = ()  # ((check, (value checks it qualifies, ...)), ...): it scores only beside them
    source_rules: tuple = ()  # ((check, scan), ...): scan(source) -> reason the check fails, or None
    memory_cap: int = 0  # bytes: the worker's address space after loading the file, beyond what it held before

    @property
    def points(self) -> int:
        return sum(p for _, p in self.checks)

    @property
    def filename(self) -> str:
        return f"{self.name}.py"

    @property
    def marker(self) -> str:
        return self.name[:4]  # ex01, ex02, ...: the pytest marker

    @property
    def hidden_modules(self) -> tuple[str, ...]:
        """The mhattn modules replaced by stand-ins while this exercise is graded."""
        return tuple(sorted({p.split(":")[0] for p in self.banned}))


EXERCISES = (
    Exercise("ex01_split_heads", "split heads", ((S.F64, 3), (S.F32, 2)), ("split_heads",),
             (F + "split_heads:split_heads_forward", F + "split_heads:combine_heads_backward"), S.visible_ex01, S.hidden_ex01),
    Exercise("ex02_softmax", "softmax forward and backward", ((S.SM_PLAIN, 3), (S.SM_MASK, 3), (S.SM_BACK, 4)),
             ("softmax_forward", "softmax_backward"),
             (F + "softmax:softmax_forward", F + "softmax:softmax_backward", F + "losses:cross_entropy_forward",
              "mhattn.course.sweep:cross_entropy", "mhattn.course.lessons:naive_softmax"), S.visible_ex02, S.hidden_ex02),
    Exercise("ex03_attention_forward", "scaled dot-product attention forward", ((S.CAUSAL, 3), (S.ATT, 4), (S.ATT_MASK, 3)),
             ("make_causal_mask", "attention_forward"),
             (F + "attention:scaled_dot_product_attention_forward", F + "mha:multi_head_attention_forward",
              F + "masks:causal_mask"), S.visible_ex03, S.hidden_ex03),
    Exercise("ex04_attention_backward", "scaled dot-product attention backward", ((S.DV, 2), (S.DQ, 4), (S.DK, 4)),
             ("attention_backward",),
             (F + "attention:scaled_dot_product_attention_backward", F + "mha:multi_head_attention_backward"),
             S.visible_ex04, S.hidden_ex04),
    Exercise("ex05_combine_heads", "combine heads", ((S.F64, 3), (S.F32, 2)), ("combine_heads",),
             (F + "split_heads:combine_heads_forward", F + "split_heads:split_heads_backward"), S.visible_ex05, S.hidden_ex05),
    Exercise("ex06_mha_forward", "output projection and multi-head forward", ((M.PROJ, 3), (M.WEIGHTS, 3), (M.OUT, 4)),
             ("output_projection", "mha_forward"),
             (F + "mha:multi_head_attention_forward", F + "linear:linear_forward", MHA_CLASS), M.visible_ex06, M.hidden_ex06),
    Exercise("ex07_mha_backward", "multi-head backward", (*((c, 3) for c, _ in M.GRAD_GROUPS), (M.INPUT_GRADS, 3)),
             ("mha_backward",), (F + "mha:multi_head_attention_backward", MHA_CLASS), M.visible_ex07, M.hidden_ex07),
    Exercise("ex08_count_parameters", "counting parameters", ((H.COUNT, 2), (H.COUNT_KV, 1), (H.BLOCK, 2)),
             ("count_parameters", "count_block_diagonal"),
             ("mhattn.course.counting:standard_count", "mhattn.course.counting:count_block_diagonal",
              "mhattn.course.counting:free_parameters", "mhattn.nn.init:init_mha_params", MHA_CLASS),
             H.visible_ex08, H.hidden_ex08),
    Exercise("ex09_head_importance", "head importance from head-mask gradients", ((H.GRAD, 5), (H.IMPORTANCE, 5)),
             ("head_mask_gradient", "head_importance"),
             (F + "mha:multi_head_attention_backward", MHA_CLASS), H.visible_ex09, H.hidden_ex09),
    Exercise("ex10_random_removal", "random-removal experiment", ((H.MASK, 2), (H.EXPECTED, 4), (H.CURVE, 4)),
             ("removal_mask", "expected_loss_change", "removal_curve"), (), H.visible_ex10, H.hidden_ex10),
    Exercise("ex11_online_softmax", "online softmax over key tiles",
             ((TL.OUT, 2), (TL.LSE, 1), (TL.OUT_MASK, 2), (TL.LSE_MASK, 1), (TL.MEMORY, 2), (TL.BLOCK, 1),
              (TL.WARN, 1)), ("online_attention_forward",),
             (F + "attention_tiled:tiled_attention_forward", F + "attention_tiled:tiled_attention_backward",
              F + "attention:scaled_dot_product_attention_forward", F + "mha:multi_head_attention_forward", MHA_CLASS,
              F + "softmax:softmax_forward", F + "losses:cross_entropy_forward", "mhattn.course.sweep:cross_entropy",
              "mhattn.course.lessons:naive_softmax"), TL.visible_ex11, TL.hidden_ex11, TL.QUALIFIERS,
             ((TL.WARN, silencing),), TL.MEMORY_CAP),
)  # fmt: skip

BY_NAME = {ex.name: ex for ex in EXERCISES}


def find(name: str) -> Exercise:
    """An exercise by full name (``ex03_attention_forward``) or short name (``ex03``, ``3``).

    Raises:
        KeyError: no such exercise (the message lists them).
    """
    for ex in EXERCISES:
        if name in (ex.name, ex.marker) or (name.isdigit() and int(name) == int(ex.marker[2:])):
            return ex
    raise KeyError(f"no exercise {name!r}; choose from {', '.join(e.name for e in EXERCISES)}")
