"""NSOT: one tiny Prefect run end to end, the parameter rules, and the PC15k reader (a malformed folder refused
before work: a row of tests/reliability/test_bad_inputs.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from components.io import load_json, load_tensors
from paperflows.contract import StageContext
from paperflows.engine import run_stage
from paperflows.params import ParamsError, validate
from pipelines.nsot.params import NsotParams
from pipelines.nsot.pipeline import PIPELINE, SHAPES, STEP_TIMINGS

TINY = {
    "seeds": [0],
    "data": {"categories": ["chair"], "n_train": 8, "n_test": 8, "n_points": 16, "superset_points": 32},
    "train": {"steps": 5, "batch_size": 8, "betas": [0.2]},
    "eval": {
        "n_generated": 8,
        "euler_steps": [1, 2],
        "metric_steps": 1,
        "timing_points": [16, 32],
        "timing_batch": 2,
        "timing_steps": 1,
        "pair_batches": 2,
    },
}
CLAIMS = [
    "nsot_beats_independent_few_steps",
    "online_ot_beats_independent_few_steps",
    "nsot_beats_independent_1nna_emd",
    "small_beta_beats_beta0",
    "large_beta_drifts_back",
    "nsot_cost_near_exact_ot",
    "nsot_coupling_time_matches_independent",
    "online_ot_step_slower",
    "online_ot_solve_grows_cubically",
]
METHODS = ["independent", "online_ot", "nsot", "nsot_b0.2"]


def _keys(tree: object) -> list[str]:
    return [k2 for k, v in tree.items() for k2 in [k, *_keys(v)]] if isinstance(tree, dict) else []


def test_flow_smoke(prefect_harness: None, project: Path, run_flow_and_check) -> None:
    report = run_flow_and_check(PIPELINE, NsotParams.model_validate(TINY), project)
    # one row per method in the category and in the mean over categories
    assert [(r["category"], r["method"]) for r in report["rows"]] == [
        (c, m) for c in ("chair", "mean") for m in METHODS
    ]
    assert all(r["1-NNA-EMD @1"] is not None and r["MMD-CD @1"] is not None for r in report["rows"])
    claims = {c["id"]: c for c in report["claims"]}
    assert list(claims) == CLAIMS
    # one (category, seed) unit and one timing round: no interval, so nothing is decided
    assert {c["verdict"] for c in claims.values()} == {"not resolved"}
    assert claims["nsot_beats_independent_few_steps"]["headline"]
    assert claims["large_beta_drifts_back"]["reason"].startswith("not measured")  # no beta > 0.2 trained
    assert [c["id"] for c in report["checks"]] == ["superset_ot_not_above_unpaired", "nsot_cost_below_independent"]
    assert report["checks"][0]["passed"]
    # seconds live under timings/, never in a metrics file DVC hashes as a result
    root = next((project / "runs" / "nsot").iterdir())
    assert sorted(p.name for p in (root / "models" / "chair").iterdir()) == sorted(
        f"{m}_seed0.safetensors" for m in METHODS
    )
    for metrics in (root / "metrics").glob("*.json"):
        assert not [k for k in _keys(load_json(metrics)) if "seconds" in k or "_ms" in k], metrics
    assert {r["method"] for r in load_json(root / STEP_TIMINGS)["steps"]} == {"independent", "online_ot", "nsot"}


@pytest.mark.parametrize(
    "data, key",
    [
        ({"model": {"d_model": 30, "n_heads": 4}}, "nsot.model"),
        ({"data": {"n_points": 64, "superset_points": 32}}, "nsot.data"),
        ({"train": {"batch_size": 64}, "data": {"n_train": 32}}, "batch_size"),
        ({"train": {"betas": [0.1, 0.1]}}, "nsot.train.betas"),
        ({"train": {"betas": [1.0]}}, "nsot.train.betas"),
        ({"eval": {"euler_steps": [5, 1]}}, "nsot.eval.euler_steps"),
        ({"eval": {"timing_points": [64, 64]}}, "nsot.eval.timing_points"),
        ({"data": {"categories": ["teapot"]}}, "nsot.data.categories"),
        ({"data": {"categories": ["chair", "chair"]}}, "nsot.data.categories"),
        ({"data": {"pc15k_categories": ["lamp"]}}, "nsot.data.pc15k_categories"),
        ({"eval": {"euler_steps": [1, 2], "metric_steps": 5}}, "nsot.eval"),
        ({"eval": {"n_generated": 64}, "data": {"n_test": 32}}, "n_generated"),
    ],
)
def test_inconsistent_params_are_refused_with_the_key(data: dict, key: str) -> None:
    with pytest.raises(ParamsError, match=key.replace(".", r"\.")):
        validate(NsotParams, data, "nsot")


def test_pc15k_folder_gives_one_category_per_synset(tmp_path: Path) -> None:
    """With ``data.pc15k_root`` the prepare stage reads the PC15k categories (not the procedural ones),
    each subsampled to the superset size and normalised per shape."""
    data, rng = tmp_path / "pc15k", np.random.default_rng(1)
    for synset in ("02691156", "02958343"):  # airplane, car
        for split, n in (("train", 3), ("test", 2)):
            (data / synset / split).mkdir(parents=True)
            for k in range(n):
                np.save(data / synset / split / f"{k:04d}.npy", rng.normal(size=(50, 3)).astype(np.float32))
    params = NsotParams.model_validate(
        {**TINY, "data": {**TINY["data"], "pc15k_root": str(data), "pc15k_categories": ["airplane", "car"]}}
    )
    stage = next(s for s in PIPELINE.stages if s.name == "prepare")
    run_stage(
        StageContext(
            pipeline=PIPELINE,
            stage=stage,
            params=params,
            root=tmp_path / "run",
            progress=False,
            threads=1,
            project=tmp_path,
        )
    )
    shapes = load_tensors(tmp_path / "run" / SHAPES)
    assert sorted(shapes) == ["airplane/test", "airplane/train_superset", "car/test", "car/train_superset"]
    assert tuple(shapes["car/train_superset"].shape) == (3, 32, 3)
    assert tuple(shapes["airplane/test"].shape) == (2, 16, 3)
    assert float(shapes["car/train_superset"].mean(dim=1).abs().max()) < 1e-5
