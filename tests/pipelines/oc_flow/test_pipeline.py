"""OC-Flow: one tiny Prefect run end to end, and the parameter rules."""

from __future__ import annotations

from pathlib import Path

import pytest

from paperflows.params import ParamsError, validate
from pipelines.oc_flow.params import QM9_METHODS, SO3_METHODS, OcFlowParams, euclidean_methods
from pipelines.oc_flow.pipeline import PIPELINE

TINY = {
    "seeds": [0],
    "data": {"n_train": 200, "so3_n_train": 60},
    "model": {"hidden": 16, "depth": 2, "time_dim": 8},
    "train": {"steps": 20, "so3_steps": 20, "batch_size": 32},
    "guidance": {"n_samples": 16, "n_steps": 4, "iterations": 2, "gammas": [0.0, 0.01]},
    "so3": {"n_samples": 8, "n_steps": 4, "iterations": 2},
    "qm9": {"n_molecules": 100, "flow_steps": 20, "regressor_steps": 20, "n_samples": 8, "iterations": 2},
}


def test_flow_smoke(prefect_harness: None, project: Path, run_flow_and_check) -> None:
    params = OcFlowParams.model_validate(TINY)
    report = run_flow_and_check(PIPELINE, params, project)
    per_reward = len(euclidean_methods(params.guidance))
    assert [r["reward fn"] for r in report["rows"]] == [r for r in params.guidance.rewards for _ in range(per_reward)]
    assert len(report["extra_tables"]["SO(3): rotation flow guided toward R*"]) == len(SO3_METHODS)
    assert len(report["extra_tables"]["QM9: descriptor flow guided toward a target alpha"]) == len(QM9_METHODS)
    claims = {c["id"]: c for c in report["claims"]}
    assert "target_closer_than_dflow_at_matched_reward" in claims and "classifier_gamma_brings_closer" in claims
    assert "qm9_mae_below_dflow" in claims and "qm9_mae_below_flowgrad" in claims
    assert [c["id"] for c in report["claims"] if c["headline"]] == ["target_closer_than_flowgrad_at_matched_reward"]
    # one seed: no interval over seeds, so no paired claim can be decided
    assert claims["target_closer_than_flowgrad_at_matched_reward"]["verdict"] == "not resolved"
    checks = {c["id"]: c for c in report["checks"]}
    # the official update (the default) is not FlowGrad at gamma = 0; reaching D-Flow's reward is built in
    assert set(checks) == {
        "target_reward_reaches_dflow",
        "classifier_reward_reaches_dflow",
        "so3_states_on_manifold",
        "naive_update_leaves_manifold",
        "so3_ocflow_approaches_target",
    }
    assert checks["so3_states_on_manifold"]["passed"]


@pytest.mark.parametrize(
    "data, key",
    [
        ({"guidance": {"gammas": [0.0, 0.5], "claim_gamma": 0.1}}, "oc_flow.guidance"),
        ({"guidance": {"gammas": [0.0, 0.0]}}, "oc_flow.guidance.gammas"),
        ({"guidance": {"gammas": [0.0, 2000.0]}}, "oc_flow.guidance.gammas"),
        ({"guidance": {"rewards": ["density"]}}, "oc_flow.guidance.rewards"),
        ({"data": {"target": [0.0, float("nan")]}}, "oc_flow.data.target"),
        ({"model": {"time_dim": 7}}, "oc_flow.model.time_dim"),
        ({"so3": {"manifold_tol": 0.5}}, "oc_flow.so3.manifold_tol"),
        ({"guidance": {"update": "adjoint"}}, "oc_flow.guidance.update"),
        ({"guidance": {"update": "alg1", "lr": 0.1}}, "oc_flow.guidance"),  # gamma 10 > 1: beta < 0
        ({"guidance": {"lr": 3.0}}, "oc_flow.guidance"),  # lr x gamma 30 > n_steps 20
        ({"guidance": {"clip": -1.0}}, "oc_flow.guidance.clip"),
        ({"qm9": {"property": "homo"}}, "oc_flow.qm9.property"),
        ({"qm9": {"n_molecules": 10}}, "oc_flow.qm9.n_molecules"),
    ],
)
def test_bad_params_are_refused_with_the_key(data: dict, key: str) -> None:
    with pytest.raises(ParamsError, match=key.replace(".", r"\.")):
        validate(OcFlowParams, data, "oc_flow")


def test_gammas_are_sorted_and_the_paper_scale_applies() -> None:
    sweep = {"gammas": [1.0, 0.0, 0.1], "claim_gamma": 0.1}
    assert OcFlowParams.model_validate({"guidance": sweep}).guidance.gammas == [0.0, 0.1, 1.0]
    paper = OcFlowParams.model_validate({"scale": "paper"})
    assert paper.guidance.n_steps == 50 and paper.guidance.claim_gamma == 0.01 and paper.so3.lr == 1.5


def test_the_official_update_is_the_default_and_alg1_an_option() -> None:
    p = OcFlowParams()
    assert (p.guidance.update, p.guidance.lr, p.guidance.clip, p.guidance.claim_gamma) == ("official", 1.0, 10.0, 0.01)
    alg1 = OcFlowParams.model_validate({"guidance": {"update": "alg1", "lr": 0.1, "gammas": [0.0, 0.01, 0.1, 1.0]}})
    assert alg1.guidance.update == "alg1"
