"""A generated class of hand-ins for ``mhattn gradebook`` (tests/grader/test_classroom.py) and what each must score.

``LOST`` names the checks each known-wrong submission (tests/grader/grader_attacks/cases.py WRONG) breaks: it must
lose exactly their points. ``make_class(folder)`` writes one hand-in per kind (right as a folder, a zip, a
nested zip and with a byte-order mark; empty; untouched stubs; partly right; each known-wrong kind; a crash; a
timeout; a broken zip, a zip escaping its folder, a zip bomb, a link) and returns ``{student: (total, words)}``:
the expected total and, for a hand-in that cannot be graded, words of its reason. ``python tests/grader/classroom_cases.py
DIR [N]`` writes such a class of at least N hand-ins (more right and partly right ones) for a timing run.
"""

from __future__ import annotations

import io
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "tests" / "grader"))

from exercise_files import build  # noqa: E402
from grader_attacks.cases import WRONG  # noqa: E402
from grader_attacks.edits import apply  # noqa: E402

from mhattn.grade import EXERCISES  # noqa: E402
from mhattn.grade import checks_heads as H  # noqa: E402
from mhattn.grade import checks_mha as M  # noqa: E402
from mhattn.grade import checks_steps as S  # noqa: E402
from mhattn.grade import checks_tiled as TL  # noqa: E402

FILES = build(ROOT / "exercises_src")
SOLUTIONS = {n: t for n, t in FILES["solutions"].items() if n.startswith("ex")}
STUBS = {n: t for n, t in FILES["exercises"].items() if n.startswith("ex")}
FULL = {ex.name: ex.points for ex in EXERCISES}
TOTAL = sum(FULL.values())
POINTS = {(ex.name, name): pts for ex in EXERCISES for name, pts in ex.checks}

LOST = {
    "split_no_transpose": (S.F64, S.F32),
    "softmax_query_axis": (S.SM_PLAIN, S.SM_MASK),
    "softmax_backward_diagonal": (S.SM_BACK,),
    "scale_sqrt_d_model": (S.ATT, S.ATT_MASK),  # the visible example has one head: sqrt(h d_k) = sqrt(d_k) there
    "causal_hides_diagonal": (S.CAUSAL, S.ATT_MASK),
    "attention_backward_unscaled": (S.DQ, S.DK),
    "mha_grad_first_example": (M.GRAD_GROUPS[0][0],),
    "concat_wrong_order": (S.F64, S.F32),
    "hardcoded_count": (H.COUNT, H.COUNT_KV),
    # exercise 11's memory, block and warning checks score only beside right values (spec: qualifiers)
    "online_no_rescale": (*TL.VALUES, TL.MEMORY, TL.BLOCK, TL.WARN),
    "online_lse_is_max": (TL.LSE, TL.LSE_MASK, TL.MEMORY, TL.BLOCK, TL.WARN),
    "online_nan_on_masked_row": (TL.OUT_MASK, TL.LSE_MASK, TL.WARN),  # -inf - (-inf) warns before it is NaN
    "online_scale_sqrt_S": (*TL.VALUES, TL.MEMORY, TL.BLOCK, TL.WARN),
}
PARTLY = ("ex01", "ex02", "ex03", "ex04", "ex05")  # written; the others are untouched stubs


def lost_points(case) -> int:
    return sum(POINTS[(case.exercise, check)] for check in LOST[case.name])


def partly(done=PARTLY) -> dict[str, str]:
    return {n: SOLUTIONS[n] if n[:4] in done else STUBS[n] for n in SOLUTIONS}


def write_folder(folder: Path, files: dict[str, str], bom: bool = False) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name).write_bytes((b"\xef\xbb\xbf" if bom else b"") + text.encode("utf-8"))
    return folder


def zip_bytes(files: dict[str, str], prefix: str = "") -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, text in files.items():
            z.writestr(prefix + name, text)
    return buf.getvalue()


def bomb_bytes(size: int = 0xFFFFFFF0) -> bytes:
    """A zip whose one entry says it unpacks to ``size`` bytes (4 GiB): its central directory is forged, as a
    bomb's would be honest about a size that large (writing 4 GiB of zeros takes too long for a test)."""
    data = bytearray(zip_bytes({"data.bin": "\0" * 1024}))
    at = data.index(b"PK\x01\x02") + 24  # the central directory's uncompressed size
    data[at : at + 4] = size.to_bytes(4, "little")
    return bytes(data)


ENDLESS = "def split_heads(x, num_heads):\n    while True:\n        pass\n"
EXITS = "import os\nos._exit(3)\n"


def make_class(folder: Path, n: int = 0) -> dict[str, tuple[int, str | None]]:
    """Write the class into ``folder`` (at least ``n`` hand-ins); return ``{student: (expected total, words)}``."""
    folder.mkdir(parents=True, exist_ok=True)
    want: dict[str, tuple[int, str | None]] = {}
    write_folder(folder / "right_folder", SOLUTIONS)
    (folder / "right_zip.zip").write_bytes(zip_bytes(SOLUTIONS))
    (folder / "right_nested.zip").write_bytes(zip_bytes(SOLUTIONS, "right_nested/course/exercises/"))
    write_folder(folder / "right_bom", SOLUTIONS, bom=True)
    want.update({s: (TOTAL, None) for s in ("right_folder", "right_zip", "right_nested", "right_bom")})
    (folder / "empty").mkdir()
    want["empty"] = (0, "no exercise files")
    write_folder(folder / "stubs", STUBS)
    want["stubs"] = (0, None)
    write_folder(folder / "partly", partly())
    want["partly"] = (sum(FULL[ex.name] for ex in EXERCISES if ex.marker in PARTLY), None)
    for case in WRONG if n else WRONG[::4]:  # the test's class: three kinds (tests/grader/test_grade.py grades them all)
        write_folder(folder / f"wrong_{case.name}", apply(SOLUTIONS, case.edits))
        want[f"wrong_{case.name}"] = (TOTAL - lost_points(case), None)
    write_folder(folder / "timeout", {**SOLUTIONS, "ex01_split_heads.py": ENDLESS})
    want["timeout"] = (TOTAL - FULL["ex01_split_heads"], None)
    write_folder(folder / "crash", {**SOLUTIONS, "ex05_combine_heads.py": EXITS})
    want["crash"] = (TOTAL - FULL["ex05_combine_heads"], None)
    (folder / "broken_zip.zip").write_bytes(b"PK\x03\x04 this is not a zip file")
    want["broken_zip"] = (0, "not a readable zip")
    (folder / "zip_slip.zip").write_bytes(zip_bytes({**SOLUTIONS, "../../escaped.py": "x = 1\n"}))
    want["zip_slip"] = (0, "outside its folder")
    (folder / "zip_bomb.zip").write_bytes(bomb_bytes())
    want["zip_bomb"] = (0, "zip bomb")
    (folder / "link").symlink_to(folder / "right_folder", target_is_directory=True)
    want["link"] = (0, "is a link")
    for i in range(max(0, n - len(want))):  # a larger class: more right and partly right hand-ins
        done = PARTLY if i % 2 else tuple(ex.marker for ex in EXERCISES)
        write_folder(folder / f"student{i:03d}", partly(done))
        want[f"student{i:03d}"] = (sum(FULL[ex.name] for ex in EXERCISES if ex.marker in done), None)
    return want


if __name__ == "__main__":
    expected = make_class(Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 0)
    print("\n".join(f"{sid},{total}" for sid, (total, _) in sorted(expected.items())))
