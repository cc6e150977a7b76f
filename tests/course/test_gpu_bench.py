"""The GPU check's host-side logic, runnable without a GPU.

``benchmarks/gpu_check.sh`` must stop loudly where CuPy is missing, and
``benchmarks/gpu_bench.py`` (its timing part) must produce the record notebook 08
reads; here it runs on NumPy and torch's CPU at a tiny shape.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

import mhattn

ROOT = Path(__file__).resolve().parents[2]


def _load_bench():
    spec = importlib.util.spec_from_file_location("gpu_bench", ROOT / "benchmarks" / "gpu_bench.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_gpu_check_stops_loudly_without_cupy():
    if importlib.util.find_spec("cupy") is not None:
        pytest.skip("CuPy is installed here: the script would run for real")
    res = subprocess.run(
        ["bash", str(ROOT / "benchmarks" / "gpu_check.sh")],
        env={"PYTHON": sys.executable, "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 2
    assert "CuPy is not installed" in res.stderr and "nothing was checked" in res.stderr


@pytest.mark.torch
def test_gpu_bench_writes_the_record_on_the_cpu(tmp_path):
    pytest.importorskip("torch")
    out = tmp_path / "gpu_check.json"
    try:
        assert _load_bench().main(["--device", "cpu", "--shapes", "1,16,8,2;2,8,8,4", "--repeats", "1", "--out", str(out)]) == 0
    finally:
        mhattn.set_backend("numpy")
    record = json.loads(out.read_text())
    assert record["backend"] == "numpy" and [r["T"] for r in record["rows"]] == [16, 8]
    for row in record["rows"]:
        for name in ("tiled", "plain", "torch"):
            assert row[f"{name}_s"] > 0
        assert row["tiled_over_torch"] == pytest.approx(row["tiled_s"] / row["torch_s"])
