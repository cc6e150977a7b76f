"""Regenerate tests/data/torch_refs.npz: inputs, weights and torch's outputs for every case.

    pip install torch==2.13.0 && python tests/lib/make_torch_refs.py

The stored file lets test_torch_crosscheck.py compare against torch where torch is absent.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch_cases import CASES, build_case, run_torch

OUT = Path(__file__).resolve().parents[1] / "data" / "torch_refs.npz"


def main():
    arrays = {"meta/torch_version": np.array(torch.__version__)}
    for name in CASES:
        case = build_case(name)
        arrays.update({f"{name}/in/{k}": v for k, v in case.items()})
        arrays.update({f"{name}/ref/{k}": v for k, v in run_torch(name, case).items()})
    np.savez_compressed(OUT, **arrays)
    print(f"wrote {len(CASES)} cases, {len(arrays)} arrays, {OUT.stat().st_size} bytes to {OUT}")


if __name__ == "__main__":
    main()
