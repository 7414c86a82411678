"""OC-Flow claims and checks on constructed tables: every verdict, failed gates, failing checks."""

from __future__ import annotations

from typing import Any

import pytest

from pipelines.oc_flow.params import QM9_METHODS, SO3_METHODS, OcFlowParams, euclidean_methods
from pipelines.oc_flow.report import (
    HEADLINE,
    TARGET_PARETO_FLOWGRAD,
    build_report,
    checks,
    gamma_claims,
    interpolate,
    qm9_claims,
    reward_claims,
    so3_check,
    time_table,
)

SEEDS = [0, 1, 2]
GUIDANCE = {
    "rewards": ["target"],
    "gammas": [0.0, 0.1, 1.0],
    "claim_gamma": 0.1,
    "pareto_updates": ["official", "alg1"],
}
PARAMS = OcFlowParams.model_validate({"seeds": SEEDS, "guidance": GUIDANCE})  # the official update
ALG1 = OcFlowParams.model_validate({"seeds": SEEDS, "guidance": {**GUIDANCE, "update": "alg1", "lr": 0.1}})
UNGUIDED = [-3.0, -3.2, -2.9]
JITTER = [0.01, -0.02, 0.015]


def _shift(base: list[float], by: float, jitter: float = 1.0) -> list[float]:
    return [b + by + jitter * j for b, j in zip(base, JITTER)]


def _good() -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """OC-Flow (gamma 0.1) gains 2.2 where FlowGrad gains 2.0 and D-Flow 1.5, and ends nearest the data;
    larger gamma: less reward, closer to the data."""
    reward = {
        "unguided": UNGUIDED,
        "flowgrad": _shift(UNGUIDED, 2.0),
        "dflow": _shift(UNGUIDED, 1.5),
        "ocflow_g0": _shift(UNGUIDED, 2.5),
        "ocflow_g0.1": _shift(UNGUIDED, 2.2, -1),
        "ocflow_g1": _shift(UNGUIDED, 0.5),
    }
    dist = {
        "unguided": [0.05, 0.06, 0.05],
        "flowgrad": [0.20, 0.21, 0.19],
        "dflow": [0.15, 0.16, 0.15],
        "ocflow_g0": [0.20, 0.21, 0.19],
        "ocflow_g0.1": [0.10, 0.11, 0.10],
        "ocflow_g1": [0.05, 0.05, 0.06],
    }
    return reward, dist


def _rows(reward: dict[str, list[float]], dist: dict[str, list[float]], p: OcFlowParams = PARAMS) -> list[dict]:
    return [
        {
            "reward_fn": r,
            "method": label,
            "gamma": gamma,
            "seed": seed,
            "reward": reward[label][i],
            "sw_to_data": dist[label][i],
            "dist_to_data": 0.05,
            "off_manifold": 0.1,
            "control_energy": gamma,
            "x0_shift": 0.0,
            "seconds": 0.1,
            "nfe": 42,
            "reward_history": [reward[label][i] - 1, reward[label][i]],
        }
        for r in p.guidance.rewards
        for label, _, gamma in euclidean_methods(p.guidance)
        for i, seed in enumerate(p.seeds)
    ]


def _so3_rows(unguided: list[float], ocflow: list[float], orth: float = 1e-15, naive: float = 3.0) -> list[dict]:
    rows = []
    for label, _, dynamics in SO3_METHODS:
        for i, seed in enumerate(SEEDS):
            on_group = dynamics == "so3"
            dist = unguided[i] if label.endswith("unguided") else ocflow[i]
            rows.append(
                {
                    "method": label,
                    "update": "exp map" if on_group else "Euclidean entries",
                    "seed": seed,
                    "dist_to_target_deg": dist,
                    "dist_to_data_deg": 20.0 if on_group else None,
                    "orth_err_max": orth if on_group else naive,
                    "det_err_max": orth if on_group else naive,
                    "control_energy": 1.0,
                    "seconds": 0.1,
                    "nfe": 42,
                    "reward_history": [-1.0, -0.5],
                }
            )
    return rows


def _qm9_rows(mae: dict[str, list[float]]) -> list[dict]:
    return [
        {
            "method": label,
            "seed": seed,
            "mae": mae[label][i],
            "judge_mae": mae[label][i] + 0.5,
            "sw_to_heldout": 0.2,
            "nn_to_heldout": 0.3,
            "seconds": 0.1,
            "nfe": 42,
            "reward_history": [-1.0],
        }
        for label, _ in QM9_METHODS
        for i, seed in enumerate(SEEDS)
    ]


QM9_GOOD = {
    "unguided": [9.0, 9.5, 8.8],
    "dflow": [3.0, 3.2, 2.9],
    "flowgrad": [2.0, 2.3, 2.1],
    "ocflow": [1.5, 1.6, 1.4],
}


def _claims(claims: list[Any]) -> dict[str, Any]:
    return {c.id: c for c in claims}


def _verdicts(claims: list[Any]) -> dict[str, str]:
    return {c.id: c.verdict for c in claims}


STEPS = PARAMS.guidance.step_sizes  # three step sizes
#: FlowGrad's and D-Flow's (reward gain over unguided, SW2) curves over the step sizes; OC-Flow's, nearer the data
CURVES = {
    "flowgrad": ([1.0, 2.0, 3.0], [0.10, 0.20, 0.40]),
    "dflow": ([0.8, 1.8, 2.6], [0.10, 0.20, 0.30]),
    "ocflow_official": ([1.2, 2.2, 2.8], [0.06, 0.12, 0.20]),
    "ocflow_alg1": ([1.1, 2.0, 2.9], [0.07, 0.13, 0.21]),
}


def _pareto(curves: dict[str, tuple[list[float], list[float]]] = CURVES, scale: list[float] = (1.0, 1.05, 0.95)):
    """Sweep rows: each seed's curve, the fidelity of OC-Flow scaled per seed (seed noise)."""
    return [
        {
            "reward_fn": "target",
            "method": label,
            "seed": seed,
            "lr": lr,
            "reward": UNGUIDED[i] + gain,
            "sw_to_data": sw * (scale[i] if label.startswith("ocflow") else 1.0),
        }
        for label, (gains, sws) in curves.items()
        for i, seed in enumerate(SEEDS)
        for lr, gain, sw in zip(STEPS, gains, sws)
    ]


def test_the_headline_is_fidelity_against_flowgrad_at_matched_reward() -> None:
    assert HEADLINE == (TARGET_PARETO_FLOWGRAD,) and TARGET_PARETO_FLOWGRAD.headline
    assert TARGET_PARETO_FLOWGRAD.id == "target_closer_than_flowgrad_at_matched_reward"


def test_interpolation_along_a_curve_and_outside_it() -> None:
    curve = [(2.0, 0.2), (1.0, 0.1), (3.0, 0.4)]
    assert interpolate(curve, 1.5) == pytest.approx(0.15) and interpolate(curve, 2.5) == pytest.approx(0.3)
    assert interpolate(curve, 3.0) == pytest.approx(0.4) and interpolate(curve, 0.5) is None
    assert interpolate([], 1.0) is None


# ---- reward and fidelity together (matched reward) -----------------------------------------------
def test_matched_reward_claims_hold_when_ocflow_is_nearer_the_data_at_equal_reward() -> None:
    reward, dist = _good()
    claims = _claims(reward_claims(_rows(reward, dist), _pareto(), PARAMS))
    assert {k: c.verdict for k, c in claims.items()} == {
        "target_closer_than_dflow_at_matched_reward": "holds",
        "target_closer_than_flowgrad_at_matched_reward": "holds",
        "target_closer_than_dflow_at_matched_reward_alg1": "holds",
        "target_closer_than_flowgrad_at_matched_reward_alg1": "holds",
    }
    headline = claims["target_closer_than_flowgrad_at_matched_reward"]
    # FlowGrad at OC-Flow's rewards 1.2, 2.2, 2.8: 0.12, 0.24, 0.36 against 0.06, 0.12, 0.20 on seed 0
    assert headline.headline and headline.log and 1.8 < headline.effect < 2.0
    assert len(headline.gates) == 3 and all(g.passed for g in headline.gates)


def test_ocflow_farther_at_matched_reward_does_not_hold() -> None:
    reward, dist = _good()
    curves = {**CURVES, "ocflow_official": ([1.2, 2.2, 2.8], [0.2, 0.4, 0.6])}
    got = _verdicts(reward_claims(_rows(reward, dist), _pareto(curves), PARAMS))
    assert got["target_closer_than_flowgrad_at_matched_reward"] == "does not hold"


def test_fidelity_bought_with_reward_counts_for_nothing() -> None:
    """OC-Flow on FlowGrad's own curve, only with less reward: nearer the data, the same trade-off."""
    reward, dist = _good()
    curves = {**CURVES, "ocflow_official": ([1.0, 1.5, 2.0], [0.10, 0.15, 0.20])}
    claim = _claims(reward_claims(_rows(reward, dist), _pareto(curves, scale=[1.0, 0.99, 1.01]), PARAMS))[
        "target_closer_than_flowgrad_at_matched_reward"
    ]
    assert claim.verdict == "does not hold" and abs(claim.effect - 1) < 0.02


def test_a_small_fidelity_gain_below_the_smallest_effect_does_not_hold() -> None:
    reward, dist = _good()
    curves = {**CURVES, "ocflow_official": ([1.2, 2.2, 2.8], [0.12 / 1.03, 0.24 / 1.03, 0.36 / 1.03])}
    scale = [1.03 / 1.01, 1.03 / 1.05, 1.0]  # FlowGrad / OC-Flow: 1.01, 1.05, 1.03 on the three seeds
    claim = _claims(reward_claims(_rows(reward, dist), _pareto(curves, scale=scale), PARAMS))[
        "target_closer_than_flowgrad_at_matched_reward"
    ]
    assert 1.0 < claim.effect < 1.1 and claim.verdict == "does not hold"


def test_a_difference_within_seed_noise_is_not_resolved() -> None:
    reward, dist = _good()
    curves = {**CURVES, "ocflow_official": ([1.2, 2.2, 2.8], [0.12, 0.24, 0.36])}
    claim = _claims(reward_claims(_rows(reward, dist), _pareto(curves, scale=[0.7, 1.3, 1.0]), PARAMS))[
        "target_closer_than_flowgrad_at_matched_reward"
    ]
    assert claim.verdict == "not resolved" and claim.units_needed


def test_curves_without_a_shared_reward_range_decide_nothing() -> None:
    reward, dist = _good()
    curves = {**CURVES, "ocflow_official": ([3.5, 4.0, 4.5], [0.06, 0.12, 0.20])}  # beyond FlowGrad's reach
    claim = _claims(reward_claims(_rows(reward, dist), _pareto(curves), PARAMS))[
        "target_closer_than_flowgrad_at_matched_reward"
    ]
    assert claim.verdict == "not resolved" and "lies inside flowgrad's rewards" in claim.reason
    sweep = [r for r in _pareto() if not (r["method"] == "flowgrad" and r["seed"] == 2)]  # FlowGrad lacks a seed
    claim = _claims(reward_claims(_rows(reward, dist), sweep, PARAMS))["target_closer_than_flowgrad_at_matched_reward"]
    assert claim.verdict == "not resolved" and "gate failed" in claim.reason


def test_a_baseline_that_gains_nothing_leaves_its_claims_unresolved() -> None:
    reward, dist = _good()
    reward["flowgrad"] = [u + d for u, d in zip(UNGUIDED, [0.1, -0.1, 0.05])]  # gain interval contains 0
    claims = _claims(reward_claims(_rows(reward, dist), _pareto(), PARAMS))
    claim = claims["target_closer_than_flowgrad_at_matched_reward"]
    assert claim.verdict == "not resolved" and "vs unguided sampling" in claim.reason
    assert claims["target_closer_than_dflow_at_matched_reward"].verdict == "holds"


def test_a_method_left_out_of_the_sweep_is_not_measured() -> None:
    reward, dist = _good()
    sweep = [r for r in _pareto() if r["method"] != "ocflow_alg1"]
    claim = _claims(reward_claims(_rows(reward, dist), sweep, PARAMS))[
        "target_closer_than_flowgrad_at_matched_reward_alg1"
    ]
    assert claim.verdict == "not resolved" and claim.reason.startswith("not measured")


# ---- gamma ---------------------------------------------------------------------------------------
def test_gamma_claims_follow_the_rank_trend() -> None:
    reward, dist = _good()
    claims = gamma_claims(_rows(reward, dist), PARAMS)
    assert _verdicts(claims) == {"target_gamma_lowers_reward": "holds", "target_gamma_brings_closer": "holds"}
    assert all(g.passed for c in claims for g in c.gates)
    reward = {
        **reward,
        "ocflow_g0": _shift(UNGUIDED, 0.5),
        "ocflow_g0.1": _shift(UNGUIDED, 1.5),
        "ocflow_g1": _shift(UNGUIDED, 3.0),
    }  # more gamma, more reward
    dist = {
        **dist,
        "ocflow_g0": [0.01, 0.02, 0.01],
        "ocflow_g0.1": [0.10, 0.11, 0.10],
        "ocflow_g1": [0.30, 0.31, 0.32],
    }  # and farther from the data
    assert set(_verdicts(gamma_claims(_rows(reward, dist), PARAMS)).values()) == {"does not hold"}
    dist = {**dist, "ocflow_g0": [0.1, 0.3, 0.2], "ocflow_g0.1": [0.3, 0.1, 0.2], "ocflow_g1": [0.2, 0.2, 0.15]}
    assert _verdicts(gamma_claims(_rows(reward, dist), PARAMS))["target_gamma_brings_closer"] == "not resolved"


def test_gamma_claims_need_guidance_that_acts() -> None:
    reward, dist = _good()
    reward["ocflow_g0"] = [u + d for u, d in zip(UNGUIDED, [0.1, -0.1, 0.05])]  # no gain at the smallest gamma
    claims = gamma_claims(_rows(reward, dist), PARAMS)
    assert {c.verdict for c in claims} == {"not resolved"} and all("gate failed" in c.reason for c in claims)


# ---- QM9 and SO(3) ------------------------------------------------------------------------------
def test_qm9_claims_compare_the_property_mae_on_paired_log_ratios() -> None:
    claims = _claims(qm9_claims(_qm9_rows(QM9_GOOD), PARAMS))
    assert {k: c.verdict for k, c in claims.items()} == {
        "qm9_mae_below_flowgrad": "holds",
        "qm9_mae_below_dflow": "holds",
    }
    assert claims["qm9_mae_below_dflow"].log and claims["qm9_mae_below_dflow"].effect == pytest.approx(2.0, abs=0.05)
    worse = {**QM9_GOOD, "ocflow": [4.0, 4.1, 3.9]}
    assert set(_verdicts(qm9_claims(_qm9_rows(worse), PARAMS)).values()) == {"does not hold"}
    tied = {**QM9_GOOD, "ocflow": [1.8, 2.6, 2.0]}  # FlowGrad / OC-Flow: 1.11, 0.88, 1.05
    assert _verdicts(qm9_claims(_qm9_rows(tied), PARAMS))["qm9_mae_below_flowgrad"] == "not resolved"
    unguided_best = {**QM9_GOOD, "unguided": [1.0, 1.1, 1.05]}  # guidance makes the MAE worse: gated
    claims = _claims(qm9_claims(_qm9_rows(unguided_best), PARAMS))
    assert claims["qm9_mae_below_flowgrad"].verdict == "not resolved"
    assert "gate failed" in claims["qm9_mae_below_flowgrad"].reason


def test_so3_against_unguided_is_a_check() -> None:
    assert so3_check(_so3_rows([100.0, 95.0, 105.0], [40.0, 38.0, 45.0])).passed
    assert not so3_check(_so3_rows([40.0, 38.0, 45.0], [100.0, 95.0, 105.0])).passed
    assert not so3_check(_so3_rows([40.0, 50.0, 45.0], [50.0, 40.0, 45.0])).passed


def test_checks_under_each_update() -> None:
    reward, dist = _good()
    official = {c.id: c.passed for c in checks(_rows(reward, dist), _so3_rows([90.0] * 3, [40.0] * 3), PARAMS)}
    assert official == {
        "target_reward_reaches_dflow": True,
        "so3_states_on_manifold": True,
        "naive_update_leaves_manifold": True,
        "so3_ocflow_approaches_target": True,
    }
    reward["ocflow_g0"] = reward["flowgrad"]  # Alg. 1: gamma = 0 is FlowGrad
    passed = {c.id: c.passed for c in checks(_rows(reward, dist, ALG1), _so3_rows([90.0] * 3, [40.0] * 3), ALG1)}
    assert passed == {
        "ocflow_gamma0_is_flowgrad": True,
        "so3_states_on_manifold": True,
        "naive_update_leaves_manifold": True,
        "so3_ocflow_approaches_target": True,
    }
    reward["ocflow_g0"] = _shift(UNGUIDED, 2.001)  # gamma = 0 drifts from FlowGrad by 1e-3
    reward["ocflow_g0.1"] = _shift(UNGUIDED, 1.0)  # and OC-Flow gains less than D-Flow
    broken = checks(_rows(reward, dist, ALG1), _so3_rows([90.0] * 3, [120.0] * 3, orth=1e-3, naive=1e-4), ALG1)
    assert not any(c.passed for c in broken)
    assert not {c.id: c for c in checks(_rows(reward, dist), _so3_rows([90.0] * 3, [40.0] * 3), PARAMS)}[
        "target_reward_reaches_dflow"
    ].passed


def test_build_report_has_the_tables_claims_and_checks() -> None:
    reward, dist = _good()
    report = build_report(
        _rows(reward, dist),
        _so3_rows([90.0] * 3, [40.0, 41.0, 39.0]),
        _qm9_rows(QM9_GOOD),
        {
            "classifier_accuracy": 0.9,
            "so3_target_to_nearest_centre_deg": 30.0,
            "molecules": 4000,
            "alpha_mad": 6.3,
            "gap_mad": 0.04,
        },
        PARAMS,
        _pareto(),
        {"2-D": [{"reward_fn": "target", "method": "flowgrad", "seed": 0, "seconds": 0.25}]},
    )
    assert [r["method"] for r in report.rows][:3] == ["unguided", "D-Flow (x0 only)", "FlowGrad (controls, no decay)"]
    assert len(report.rows) == len(euclidean_methods(PARAMS.guidance))
    assert len(report.extra_tables["SO(3): rotation flow guided toward R*"]) == len(SO3_METHODS)
    assert len(report.extra_tables["QM9: descriptor flow guided toward a target alpha"]) == len(QM9_METHODS)
    assert len(report.claims) == 4 + 2 + 2 and len(report.checks) == 4
    assert [c.id for c in report.headline] == ["target_closer_than_flowgrad_at_matched_reward"]
    assert report.headline[0].verdict == "holds" and all(c.holm_verdict for c in report.claims)
    assert "## Checks" in report.to_markdown()
    # wall-clock times stay out of what DVC tracks
    tracked = report.tracked()
    assert "wall time of one guided run (s)" not in tracked["extra_tables"]
    assert not any("time" in key for row in tracked["rows"] for key in row)
    assert report.timed_part()["extra_tables"]["wall time of one guided run (s)"][0]["wall s"] == 0.25


def test_one_seed_decides_nothing() -> None:
    p = OcFlowParams.model_validate({"seeds": [0], "guidance": GUIDANCE})
    reward, dist = _good()
    sweep = [r for r in _pareto() if r["seed"] == 0]
    assert set(_verdicts(reward_claims(_rows(reward, dist, p), sweep, p)).values()) == {"not resolved"}


def test_wall_times_are_averaged_per_experiment_and_method() -> None:
    runs = [{"method": "flowgrad", "seed": s, "seconds": t} for s, t in ((0, 1.0), (1, 3.0))]
    assert time_table({"2-D": runs}) == [
        {"experiment": "2-D", "method": "FlowGrad (controls, no decay)", "runs": 2, "wall s": 2.0}
    ]
