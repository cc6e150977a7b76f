"""mhattn against torch.nn.MultiheadAttention: outputs, weights and every gradient.

Live where torch is installed (``pip install torch==2.13.0``); against the stored
outputs in data/torch_refs.npz everywhere. float64 must agree to 1e-9.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from torch_cases import CASES, build_case, run_mhattn, run_torch
from xp_testing import xp_assert_close, xp_assert_equal

REFS = Path(__file__).resolve().parents[1] / "data" / "torch_refs.npz"


def tolerance(name):
    return dict(rtol=1e-9, atol=1e-9) if name.endswith("f64") else dict(rtol=1e-4, atol=2e-5)


def assert_same(ours, theirs, name):
    assert sorted(ours) == sorted(theirs), f"{name}: different outputs {sorted(ours)} vs {sorted(theirs)}"
    for key in theirs:
        xp_assert_close(ours[key], theirs[key], err_msg=f"{name}/{key}", **tolerance(name))


@pytest.mark.usefixtures("backend")
@pytest.mark.torch
@pytest.mark.parametrize("name", list(CASES))
def test_against_live_torch(name):
    pytest.importorskip("torch")
    case = build_case(name, seed=7)
    assert_same(run_mhattn(name, case), run_torch(name, case), name)


@pytest.mark.usefixtures("backend")
@pytest.mark.parametrize("name", list(CASES))
def test_against_stored_torch_outputs(name):
    with np.load(REFS, allow_pickle=False) as z:
        case = {k[len(name) + 4 :]: z[k] for k in z.files if k.startswith(f"{name}/in/")}
        ref = {k[len(name) + 5 :]: z[k] for k in z.files if k.startswith(f"{name}/ref/")}
    assert case and ref, f"no stored reference for {name}: run tests/lib/make_torch_refs.py"
    assert_same(run_mhattn(name, case), ref, name)


def test_stored_cases_match_the_case_list():
    with np.load(REFS, allow_pickle=False) as z:
        stored = {k.split("/")[0] for k in z.files if not k.startswith("meta/")}
    assert stored == set(CASES)


def test_fully_masked_query_is_zero_where_torch_gives_nan():
    """The documented difference (pytorch/pytorch#41508): torch's eager path gives NaN."""
    torch = pytest.importorskip("torch")
    import mhattn

    mod = mhattn.MultiHeadAttention(8, 2, dtype="float64", seed=0)
    mod.params["b_o"] = np.arange(8.0)
    x = np.random.default_rng(0).standard_normal((1, 3, 8))
    mask = np.zeros((3, 3), dtype=bool)
    mask[1] = True  # query 1 may see nothing
    out, w = mod.forward(x, attn_mask=mask)
    ref = torch.nn.MultiheadAttention(8, 2, batch_first=True, dtype=torch.float64)
    ref.load_state_dict({k: torch.from_numpy(v) for k, v in mod.to_torch_state_dict().items()})
    xt = torch.from_numpy(x)
    tout, _ = ref(xt, xt, xt, attn_mask=torch.from_numpy(mask))
    assert torch.isnan(tout[0, 1]).all()
    xp_assert_equal(out[0, 1], mod.params["b_o"])
    xp_assert_equal(w[0, 1], 0.0, check_shape=False)
    xp_assert_close(out[0, [0, 2]], tout[0, [0, 2]].detach().numpy(), rtol=1e-9, atol=1e-9)
