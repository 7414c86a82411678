"""HRF: a Prefect smoke run at tiny size, and the claim test on a reduced experiment."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from components.io import load_json, load_table
from pipelines.hrf.pipeline import PIPELINE, HrfParams
from paperflows.params import ParamsError, validate
from paperflows.report import mean_std
from paperflows.runtime import execute
from paperflows.settings import load_settings

TINY = {"seeds": [0],
        "data": {"n_train": 256, "n_eval": 64, "mnist_train": 100, "mnist_eval": 50},
        "model": {"hidden": 16, "image_hidden": 16, "time_dim": 8, "depths": [1, 2, 3]},
        "train": {"steps": 5, "batch_size": 16, "image_steps": 3, "image_batch_size": 8},
        "classifier": {"steps": 3, "batch_size": 16, "d_model": 8, "n_layers": 1},
        "eval": {"schedules": [[2], [10], [1, 2], [5, 2], [1, 1, 2]], "image_schedules": [[2], [1, 2]],
                 "n_samples": 32, "image_samples": 16, "n_crossing": 16, "n_projections": 8,
                 "velocity_samples": 16, "velocity_inner_steps": 2, "n_plot": 8}}

REDUCED = {"model": {"depths": [1, 2], "image_hidden": 64},
           "data": {"mnist_train": 1000, "mnist_eval": 500},
           "train": {"image_steps": 100},
           "eval": {"schedules": [[2], [5], [10], [1, 5], [2, 5], [5, 2]], "image_schedules": [[5], [10], [5, 2]],
                    "n_samples": 1000, "image_samples": 200}}


def test_flow_smoke(prefect_harness: None, project: Path, run_flow_and_check) -> None:
    report = run_flow_and_check(PIPELINE, HrfParams.model_validate(TINY), project)
    methods = {(r["dataset"], r["method"]) for r in report["rows"]}
    assert methods == {("1-D mixture", "RF"), ("1-D mixture", "HRF2"), ("1-D mixture", "HRF3"),
                       ("2-D moons", "RF"), ("2-D moons", "HRF2"), ("MNIST", "RF"), ("MNIST", "HRF2")}
    assert {r["NFE"] for r in report["rows"] if r["method"] == "HRF3"} == {2}


def test_params_reject_a_depth_without_schedule() -> None:
    with pytest.raises(ParamsError, match="model.depths"):
        validate(HrfParams, {"model": {"depths": [1, 2, 4]}}, "hrf")
    with pytest.raises(ParamsError, match="depths"):
        validate(HrfParams, {"model": {"depths_2d": [2]}}, "hrf")
    paper = HrfParams(scale="paper")
    assert paper.train.steps == 50_000 and paper.eval.schedules[-1] == [2, 5, 10]


@pytest.mark.claim
def test_claims_on_the_reduced_experiment(project: Path) -> None:
    """Reduced experiment (3 seeds, no HRF3, a small MNIST run): the velocity-law, crossing and NFE-10
    claims must hold; the quality-vs-NFE verdicts must match the raw tables, whichever way they go."""
    params = validate(HrfParams, REDUCED, "hrf")
    assert len(params.seeds) >= 3
    summary = execute(PIPELINE, params, load_settings(), project / "claim", entry="test", progress=False)
    out = project / "claim"
    claims = {c["claim"]: c for c in summary.report["claims"]}
    quality = load_table(out / "tables" / "lowdim_quality.parquet")
    velocity = load_table(out / "tables" / "velocity.parquet")
    mnist = load_table(out / "tables" / "mnist_quality.parquet")

    # hard invariants: NFE is the product of the step counts; one row per seed and schedule
    for r in quality + mnist:
        assert r["nfe"] == math.prod(int(n) for n in r["steps"].split("x"))
    assert len(quality) == len(params.seeds) * (2 * len(params.eval.schedules))
    assert len(mnist) == len(params.seeds) * len(params.eval.image_schedules)
    # matched parameter counts (within 1% of the HRF2 network)
    sizes = {**load_json(out / "metrics" / "train_lowdim.json")["parameters"],
             **load_json(out / "metrics" / "train_mnist.json")["parameters"]}
    for key, n in sizes.items():
        assert abs(n / sizes[key.split("/")[0] + "/HRF2"] - 1) < 0.01, key
    # the FID judge works and real images score far better than generated ones
    assert load_json(out / "metrics" / "classifier.json")["test_accuracy"] > 0.8
    real_fid = load_json(out / "metrics" / "mnist.json")["real/fid"]
    assert real_fid < min(r["fid"] for r in mnist)

    # claim 1 recomputed: HRF2's velocity at the origin is bimodal, RF's is one value
    def vel(dataset: str, method: str, key: str) -> list[float]:
        return [r[key] for r in velocity if r["dataset"] == dataset and r["method"] == method and r["t"] == 0.0]

    assert min(vel("mixture", "HRF2", "min_mode_fraction")) >= 0.25
    assert max(vel("mixture", "RF", "spread")) < 1e-5
    assert mean_std(vel("mixture", "HRF2", "distance_to_true"))[0] < mean_std(vel("mixture", "RF", "distance_to_true"))[0]
    assert all(h < r for h, r in zip(vel("moons", "HRF2", "distance_to_true"), vel("moons", "RF", "distance_to_true")))
    assert claims["HRF's velocity at a point is multi-modal (it samples the velocity law) while RF's is a single value"]["holds"]

    # claim 2 recomputed: order flips (1-D) for every HRF2 schedule, none for RF at NFE >= 2
    flips = {(r["method"], r["steps"]): mean_std([q["order_flips"] for q in quality if q["dataset"] == "mixture"
                                                  and q["method"] == r["method"] and q["steps"] == r["steps"]])[0]
             for r in quality if r["dataset"] == "mixture"}
    assert min(v for (m, _), v in flips.items() if m == "HRF2") > params.eval.crossing_threshold
    assert max(v for (m, s), v in flips.items() if m == "RF" and int(s) >= 2) < 0.01
    assert claims["HRF paths cross (sample order flips between x0 and x1) where RF's cannot"]["holds"]

    # claim 3: the brief's CI check (HRF2 W1 at NFE 10 <= 0.1, best split)
    nfe10 = min(mean_std([r["distance"] for r in quality if r["dataset"] == "mixture" and r["method"] == "HRF2"
                          and r["steps"] == s])[0] for s in ("2x5", "5x2"))
    assert nfe10 <= 0.1
    assert claims["HRF2 1-D W1 at NFE 10 is <= 0.1"]["holds"]

    # claims 4: quality vs NFE against RF, re-derived from the per-seed tables
    def best(rows: list[dict], dataset: str, method: str, key: str) -> dict[int, float]:
        """Lowest mean (over seeds) of ``key`` per NFE over the schedules of ``method``."""
        out: dict[int, float] = {}
        for r in rows:
            if r["dataset"] == dataset and r["method"] == method:
                mean = mean_std([q[key] for q in rows if q["dataset"] == dataset and q["method"] == method
                                 and q["steps"] == r["steps"]])[0]
                out[r["nfe"]] = min(out.get(r["nfe"], math.inf), mean)
        return out

    for dataset, rows, key, label in [("mixture", quality, "distance", "1-D mixture"),
                                      ("moons", quality, "distance", "2-D moons"), ("mnist", mnist, "fid", "MNIST")]:
        rf, hrf = best(rows, dataset, "RF", key), best(rows, dataset, "HRF2", key)
        matched = sorted(set(rf) & set(hrf))
        wins = sum(hrf[n] < rf[n] for n in matched)
        claim = next(c for name, c in claims.items() if name.startswith(f"{label}: HRF2"))
        assert claim["holds"] == (wins > len(matched) / 2)
        assert claim["numbers"]["wins"] == wins and claim["numbers"]["matched"] == len(matched)
