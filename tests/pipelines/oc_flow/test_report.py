"""OC-Flow claims and checks on constructed tables: every verdict, an unmet precondition, failing checks."""

from __future__ import annotations

from typing import Any

import pytest

from pipelines.oc_flow.params import QM9_METHODS, SO3_METHODS, OcFlowParams, euclidean_methods
from pipelines.oc_flow.report import (
    build_report,
    checks,
    gamma_claims,
    qm9_claims,
    reward_claims,
    so3_claim,
)

SEEDS = [0, 1, 2]
PARAMS = OcFlowParams.model_validate({"seeds": SEEDS, "guidance": {"rewards": ["target"], "gammas": [0.0, 0.1, 1.0],
                                                                   "claim_gamma": 0.1, "reward_fraction": 0.8,
                                                                   "update": "alg1", "lr": 0.1}})
UNGUIDED = [-3.0, -3.2, -2.9]
JITTER = [0.01, -0.02, 0.015]


def _shift(base: list[float], by: float, jitter: float = 1.0) -> list[float]:
    return [b + by + jitter * j for b, j in zip(base, JITTER)]


def _good() -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """OC-Flow (gamma 0.1) gains 1.9 where FlowGrad gains 2.0 and D-Flow 1.5, and ends nearest the data;
    larger gamma: less reward, closer to the data."""
    reward = {"unguided": UNGUIDED, "flowgrad": _shift(UNGUIDED, 2.0), "dflow": _shift(UNGUIDED, 1.5),
              "ocflow_g0": _shift(UNGUIDED, 2.0), "ocflow_g0.1": _shift(UNGUIDED, 1.9, -1),
              "ocflow_g1": _shift(UNGUIDED, 0.5)}
    dist = {"unguided": [0.05, 0.06, 0.05], "flowgrad": [0.20, 0.21, 0.19], "dflow": [0.15, 0.16, 0.15],
            "ocflow_g0": [0.20, 0.21, 0.19], "ocflow_g0.1": [0.10, 0.11, 0.10], "ocflow_g1": [0.05, 0.05, 0.06]}
    return reward, dist


def _rows(reward: dict[str, list[float]], dist: dict[str, list[float]], p: OcFlowParams = PARAMS) -> list[dict]:
    return [{"reward_fn": r, "method": label, "gamma": gamma, "seed": seed, "reward": reward[label][i],
             "sw_to_data": dist[label][i], "dist_to_data": 0.05, "off_manifold": 0.1, "control_energy": gamma,
             "x0_shift": 0.0,
             "seconds": 0.1, "nfe": 42, "reward_history": [reward[label][i] - 1, reward[label][i]]}
            for r in p.guidance.rewards for label, _, gamma in euclidean_methods(p.guidance)
            for i, seed in enumerate(p.seeds)]


def _so3_rows(unguided: list[float], ocflow: list[float], orth: float = 1e-15, naive: float = 3.0) -> list[dict]:
    rows = []
    for label, _, dynamics in SO3_METHODS:
        for i, seed in enumerate(SEEDS):
            on_group = dynamics == "so3"
            dist = unguided[i] if label.endswith("unguided") else ocflow[i]
            rows.append({"method": label, "update": "exp map" if on_group else "Euclidean entries", "seed": seed,
                         "dist_to_target_deg": dist, "dist_to_data_deg": 20.0 if on_group else None,
                         "orth_err_max": orth if on_group else naive, "det_err_max": orth if on_group else naive,
                         "control_energy": 1.0, "seconds": 0.1, "nfe": 42, "reward_history": [-1.0, -0.5]})
    return rows


def _qm9_rows(mae: dict[str, list[float]]) -> list[dict]:
    return [{"method": label, "seed": seed, "mae": mae[label][i], "judge_mae": mae[label][i] + 0.5,
             "sw_to_heldout": 0.2, "nn_to_heldout": 0.3, "seconds": 0.1, "nfe": 42, "reward_history": [-1.0]}
            for label, _ in QM9_METHODS for i, seed in enumerate(SEEDS)]


QM9_GOOD = {"unguided": [9.0, 9.5, 8.8], "dflow": [3.0, 3.2, 2.9], "flowgrad": [2.0, 2.3, 2.1],
            "ocflow": [1.5, 1.6, 1.4]}


def _verdicts(claims: list[Any]) -> dict[str, str]:
    return {c.id: c.verdict for c in claims}


def test_reward_and_closeness_claims_hold_when_ocflow_reaches_the_reward_nearer_the_data() -> None:
    reward, dist = _good()
    assert _verdicts(reward_claims(_rows(reward, dist), PARAMS)) == {
        "target_reward_reaches_flowgrad": "holds", "target_closer_than_flowgrad": "holds",
        "target_reward_reaches_dflow": "holds", "target_closer_than_dflow": "holds"}


def test_reward_and_closeness_claims_fail_when_ocflow_gains_little_and_strays_from_the_data() -> None:
    reward, dist = _good()
    reward["ocflow_g0.1"] = _shift(UNGUIDED, 0.5)   # 0.5 < 0.8 x 2.0 and < 0.8 x 1.5 on every seed
    dist["ocflow_g0.1"] = [0.30, 0.31, 0.30]        # farther than both baselines
    assert set(_verdicts(reward_claims(_rows(reward, dist), PARAMS)).values()) == {"does not hold"}


def test_a_difference_within_seed_noise_is_not_resolved() -> None:
    reward, dist = _good()
    dist["ocflow_g0.1"] = [0.25, 0.16, 0.20]  # FlowGrad - OC-Flow: -0.05, +0.05, -0.01
    verdicts = _verdicts(reward_claims(_rows(reward, dist), PARAMS))
    assert verdicts["target_closer_than_flowgrad"] == "not resolved"
    assert verdicts["target_reward_reaches_flowgrad"] == "holds"


def test_a_baseline_that_gains_nothing_leaves_its_claims_unresolved() -> None:
    reward, dist = _good()
    reward["flowgrad"] = [u + d for u, d in zip(UNGUIDED, [0.1, -0.1, 0.05])]  # gain interval contains 0
    claims = {c.id: c for c in reward_claims(_rows(reward, dist), PARAMS)}
    for cid in ("target_reward_reaches_flowgrad", "target_closer_than_flowgrad"):
        assert claims[cid].verdict == "not resolved"
        assert claims[cid].precondition is not None and not claims[cid].precondition.met
    assert claims["target_closer_than_flowgrad"].ci[0] > 0  # OC-Flow is nearer, yet the claim is undecided
    assert claims["target_reward_reaches_dflow"].verdict == "holds"


def test_gamma_claims_follow_the_rank_trend() -> None:
    reward, dist = _good()
    assert _verdicts(gamma_claims(_rows(reward, dist), PARAMS)) == {
        "target_gamma_lowers_reward": "holds", "target_gamma_brings_closer": "holds"}
    reward = {**reward, "ocflow_g0": _shift(UNGUIDED, 0.5), "ocflow_g0.1": _shift(UNGUIDED, 1.5),
              "ocflow_g1": _shift(UNGUIDED, 3.0)}                # more gamma, more reward
    dist = {**dist, "ocflow_g0": [0.01, 0.02, 0.01], "ocflow_g0.1": [0.10, 0.11, 0.10],
            "ocflow_g1": [0.30, 0.31, 0.32]}                    # and farther from the data
    assert set(_verdicts(gamma_claims(_rows(reward, dist), PARAMS)).values()) == {"does not hold"}
    dist = {**dist, "ocflow_g0": [0.1, 0.3, 0.2], "ocflow_g0.1": [0.3, 0.1, 0.2], "ocflow_g1": [0.2, 0.2, 0.15]}
    assert _verdicts(gamma_claims(_rows(reward, dist), PARAMS))["target_gamma_brings_closer"] == "not resolved"


def test_qm9_claims_compare_the_property_mae_paired_over_seeds() -> None:
    assert _verdicts(qm9_claims(_qm9_rows(QM9_GOOD), PARAMS)) == {"qm9_mae_below_dflow": "holds",
                                                                  "qm9_mae_below_flowgrad": "holds"}
    worse = {**QM9_GOOD, "ocflow": [4.0, 4.1, 3.9]}
    assert set(_verdicts(qm9_claims(_qm9_rows(worse), PARAMS)).values()) == {"does not hold"}
    tied = {**QM9_GOOD, "ocflow": [1.8, 2.6, 2.0]}   # FlowGrad - OC-Flow: +0.2, -0.3, +0.1
    assert _verdicts(qm9_claims(_qm9_rows(tied), PARAMS))["qm9_mae_below_flowgrad"] == "not resolved"


def test_the_official_update_has_no_flowgrad_identity_check() -> None:
    p = OcFlowParams.model_validate({"seeds": SEEDS, "guidance": {"rewards": ["target"], "gammas": [0.0, 0.1, 1.0],
                                                                  "claim_gamma": 0.1}})
    reward, dist = _good()
    ids = [c.id for c in checks(_rows(reward, dist, p), _so3_rows([90.0] * 3, [40.0] * 3), p)]
    assert ids == ["so3_states_on_manifold", "naive_update_leaves_manifold"]


def test_so3_claim_is_paired_over_seeds() -> None:
    assert so3_claim(_so3_rows([100.0, 95.0, 105.0], [40.0, 38.0, 45.0])).verdict == "holds"
    assert so3_claim(_so3_rows([40.0, 38.0, 45.0], [100.0, 95.0, 105.0])).verdict == "does not hold"
    assert so3_claim(_so3_rows([40.0, 50.0, 45.0], [50.0, 40.0, 45.0])).verdict == "not resolved"


def test_checks_pass_on_a_faithful_run_and_fail_when_the_construction_breaks() -> None:
    reward, dist = _good()
    passed = {c.id: c.passed for c in checks(_rows(reward, dist), _so3_rows([90.0] * 3, [40.0] * 3), PARAMS)}
    assert passed == {"ocflow_gamma0_is_flowgrad": True, "so3_states_on_manifold": True,
                      "naive_update_leaves_manifold": True}
    reward["ocflow_g0"] = _shift(UNGUIDED, 2.001)  # gamma = 0 drifts from FlowGrad by 1e-3
    broken = checks(_rows(reward, dist), _so3_rows([90.0] * 3, [40.0] * 3, orth=1e-3, naive=1e-4), PARAMS)
    assert not any(c.passed for c in broken)


def test_build_report_has_the_tables_claims_and_checks() -> None:
    reward, dist = _good()
    report = build_report(_rows(reward, dist), _so3_rows([90.0] * 3, [40.0, 41.0, 39.0]), _qm9_rows(QM9_GOOD),
                          {"classifier_accuracy": 0.9, "so3_target_to_nearest_centre_deg": 30.0, "molecules": 4000,
                           "alpha_mad": 6.3, "gap_mad": 0.04}, PARAMS)
    assert [r["method"] for r in report.rows][:3] == ["unguided", "D-Flow (x0 only)", "FlowGrad (controls, no decay)"]
    assert len(report.rows) == len(euclidean_methods(PARAMS.guidance))
    assert len(report.extra_tables["SO(3): rotation flow guided toward R*"]) == len(SO3_METHODS)
    assert len(report.extra_tables["QM9: descriptor flow guided toward a target alpha"]) == len(QM9_METHODS)
    assert len(report.claims) == 4 + 2 + 2 + 1 and len(report.checks) == 3
    assert "## Checks" in report.to_markdown()


def test_without_gamma_zero_there_is_no_flowgrad_check() -> None:
    p = OcFlowParams.model_validate({"seeds": SEEDS, "guidance": {"rewards": ["target"], "gammas": [0.1, 1.0],
                                                                  "claim_gamma": 0.1, "update": "alg1"}})
    reward, dist = _good()
    ids = [c.id for c in checks(_rows(reward, dist, p), _so3_rows([90.0] * 3, [40.0] * 3), p)]
    assert ids == ["so3_states_on_manifold", "naive_update_leaves_manifold"]


@pytest.mark.parametrize("seeds", [[0]])
def test_one_seed_decides_nothing(seeds: list[int]) -> None:
    p = OcFlowParams.model_validate({"seeds": seeds, "guidance": {"rewards": ["target"], "gammas": [0.0, 0.1, 1.0],
                                                                  "claim_gamma": 0.1}})
    reward, dist = _good()
    assert set(_verdicts(reward_claims(_rows(reward, dist, p), p)).values()) == {"not resolved"}


def test_wall_times_are_joined_back_by_run() -> None:
    from pipelines.oc_flow.report import with_seconds

    rows = [{"reward_fn": "target", "method": "OC-Flow", "seed": 0, "reward": 1.0},
            {"reward_fn": "target", "method": "OC-Flow", "seed": 1, "reward": 2.0}]
    joined = with_seconds(rows, [{"reward_fn": "target", "method": "OC-Flow", "seed": 1, "seconds": 2.5}])
    assert joined[1]["seconds"] == 2.5 and joined[0]["seconds"] != joined[0]["seconds"]  # NaN: no time recorded
