"""OC-Flow: a Prefect smoke run at tiny size, and the claim test on the reduced experiment."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from components.io import load_table
from pipelines.oc_flow.pipeline import PIPELINE, SO3_METHODS, OcFlowParams, euclidean_methods
from paperflows.params import validate
from paperflows.runtime import execute
from paperflows.settings import load_settings

TINY = {"seeds": [0], "data": {"n_train": 200, "so3_n_train": 60},
        "model": {"hidden": 16, "depth": 2, "time_dim": 8},
        "train": {"steps": 20, "so3_steps": 20, "batch_size": 32},
        "guidance": {"n_samples": 16, "n_steps": 4, "iterations": 2, "gammas": [0.0, 0.1]},
        "so3": {"n_samples": 8, "n_steps": 4, "iterations": 2}}

REDUCED = {"train": {"steps": 1500, "so3_steps": 1500}, "guidance": {"n_samples": 256}, "so3": {"n_samples": 128}}


def test_flow_smoke(prefect_harness: None, project: Path, run_flow_and_check) -> None:
    params = OcFlowParams.model_validate(TINY)
    report = run_flow_and_check(PIPELINE, params, project)
    per_reward = len(euclidean_methods(params.guidance))
    assert len(report["rows"]) == per_reward * len(params.guidance.rewards)
    assert [r["reward fn"] for r in report["rows"]] == [r for r in params.guidance.rewards for _ in range(per_reward)]
    assert len(report["extra_tables"]["SO(3): rotation flow guided toward R*"]) == len(SO3_METHODS)


def test_params_reject_a_claim_gamma_outside_the_sweep() -> None:
    with pytest.raises(ValueError, match="claim_gamma"):
        OcFlowParams.model_validate({"guidance": {"gammas": [0.0, 0.5], "claim_gamma": 0.1}})
    paper = OcFlowParams.model_validate({"scale": "paper"})
    assert paper.guidance.n_steps == 50 and paper.guidance.claim_gamma == 0.01 and paper.so3.lr == 1.5


def _mean(values: list[float]) -> float:
    assert values
    return sum(values) / len(values)


@pytest.mark.claim
def test_claims_on_the_reduced_experiment(project: Path) -> None:
    """Reduced experiment (3 seeds, shorter pretraining): every verdict is re-derived here from the raw
    per-seed tables, and the invariants of the method must hold whatever the verdicts are."""
    params = validate(OcFlowParams, REDUCED, "oc_flow")
    assert len(params.seeds) >= 3
    summary = execute(PIPELINE, params, load_settings(), project / "claim", entry="test", progress=False)
    claims = {c["claim"]: c for c in summary.report["claims"]}
    g, s = params.guidance, params.so3
    rows = load_table(project / "claim" / "tables" / "guidance_euclidean.parquet")
    assert len(rows) == len(params.seeds) * len(g.rewards) * len(euclidean_methods(g))

    def mean(reward_fn: str, method: str, key: str) -> float:
        values = [r[key] for r in rows if r["reward_fn"] == reward_fn and r["method"] == method]
        assert len(values) == len(params.seeds)
        return _mean(values)

    oc = f"ocflow_g{g.claim_gamma:g}"
    for reward_fn in g.rewards:
        unguided = mean(reward_fn, "unguided", "reward")
        # every guided method raises the reward over plain sampling, on every seed
        for method, _, gamma in euclidean_methods(g)[1:]:
            for seed in params.seeds:
                guided = next(r for r in rows if (r["reward_fn"], r["method"], r["seed"]) == (reward_fn, method, seed))
                plain = next(r for r in rows if (r["reward_fn"], r["method"], r["seed"]) == (reward_fn, "unguided", seed))
                assert guided["reward"] > plain["reward"], (reward_fn, method, seed)
        gain = {m: mean(reward_fn, m, "reward") - unguided for m in ("flowgrad", "dflow", oc)}
        dist = {m: mean(reward_fn, m, "dist_to_data") for m in ("flowgrad", "dflow", oc)}
        expected = all(gain[oc] >= g.reward_fraction * gain[b] and dist[oc] < dist[b] for b in ("flowgrad", "dflow"))
        claim = next(c for name, c in claims.items()
                     if name.startswith(f"[{reward_fn}] OC-Flow (γ={g.claim_gamma:g}) reaches"))
        assert claim["holds"] == expected
        assert claim["numbers"]["ocflow_dist"] == pytest.approx(dist[oc])
        sweep = [(mean(reward_fn, f"ocflow_g{gm:g}", "reward"), mean(reward_fn, f"ocflow_g{gm:g}", "dist_to_data"))
                 for gm in g.gammas]
        monotone = all(b[0] <= a[0] and b[1] <= a[1] for a, b in itertools.pairwise(sweep))
        claim = next(c for name, c in claims.items() if name.startswith(f"[{reward_fn}] γ trades"))
        assert claim["holds"] == monotone
        # the running cost does what it is for: more gamma, less control energy
        energy = [mean(reward_fn, f"ocflow_g{gm:g}", "control_energy") for gm in g.gammas]
        assert all(b < a for a, b in itertools.pairwise(energy))

    # Alg. 1 at gamma = 0 is FlowGrad: costates by the VJP recursion equal backprop through the solver
    assert claims["OC-Flow at γ = 0 (costates by the backward VJP recursion) reproduces FlowGrad (backprop "
                  "through the solver)"]["holds"]

    so3 = load_table(project / "claim" / "tables" / "guidance_so3.parquet")
    assert len(so3) == len(params.seeds) * len(SO3_METHODS)

    def so3_values(method: str, key: str) -> list[float]:
        return [r[key] for r in so3 if r["method"] == method]

    # hard invariants: every Riemannian state is a rotation; the naive Euclidean update is clearly not
    for method, _, dynamics in SO3_METHODS:
        if dynamics == "so3":
            assert max(so3_values(method, "orth_err_max")) < 1e-5, method
            assert max(so3_values(method, "det_err_max")) < 1e-5, method
    naive = min(so3_values("naive_ocflow", "orth_err_max"))
    assert naive > 1e-2 and naive > 1e6 * max(so3_values("ocflow", "orth_err_max"))
    falls = _mean(so3_values("ocflow", "dist_to_target_deg")) < _mean(so3_values("unguided", "dist_to_target_deg"))
    claim = next(c for name, c in claims.items() if name.startswith("SO(3): OC-Flow lowers the distance to R*"))
    assert claim["holds"] == (falls and max(so3_values("ocflow", "orth_err_max")) < s.manifold_tol
                              and max(so3_values("ocflow", "det_err_max")) < s.manifold_tol)
    claim = claims["SO(3): the naive Euclidean update of matrix entries leaves the manifold"]
    assert claim["holds"] == (naive > 100 * s.manifold_tol) and claim["holds"]
