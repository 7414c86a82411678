"""MTSAM report functions on constructed numbers: every verdict of the claims, the learning gates, the checks
passing and failing."""

from __future__ import annotations

from typing import Any

import pytest

from components.models.tora import tora_parameter_count
from pipelines.mtsam.params import METRICS, MtsamParams
from pipelines.mtsam.report import (
    HEADLINE,
    build_report,
    checks,
    deltas,
    tora_beats_lora_per_task,
    tora_beats_lora_shared,
)

BASE = {
    "miou": 40.0,
    "pix_acc": 80.0,
    "abs_err": 0.8,
    "rel_err": 0.25,
    "mean_angle": 25.0,
    "median_angle": 15.0,
    "within_11": 40.0,
    "within_22": 60.0,
    "within_30": 70.0,
}
HIGHER = {key: higher for key, _, higher in METRICS}
TRIVIAL = {"pix_acc": 40.0, "abs_err": 1.4}
TORA_PARAMS = tora_parameter_count(384, 1152, (4, 4, 2), 3)


def _scaled(gain: float) -> dict[str, float]:
    """Every metric moved by ``gain`` (relative) in its better direction: Δm = 100 gain exactly."""
    return {k: v * (1 + gain if HIGHER[k] else 1 - gain) for k, v in BASE.items()}


def _rows(
    tora_gains: list[float],
    lora_gains: list[float] | None = None,
    *,
    init_gap: float = 0.0,
    tora_adapter: int = TORA_PARAMS,
    decoders: list[float] | None = None,
    shared: list[float] | None = None,
) -> list[dict[str, Any]]:
    """One row per method and seed; each list holds the relative gain of every metric on seed i (Δm = 100 gain
    against LoRA per task at gain 0); decoders only sit at -10 % unless given, ``None``: left out."""
    decoders = [-0.10] * len(tora_gains) if decoders is None else decoders
    rows = []
    for seed, gain in enumerate(tora_gains):
        base_gain = 0.0 if lora_gains is None else lora_gains[seed]
        rows.append(
            {
                "method": "lora_per_task",
                "seed": seed,
                **_scaled(base_gain),
                "trainable": 120_000,
                "adapter_params": 13_824,
                "init_max_abs_diff": None,
            }
        )
        rows.append(
            {
                "method": "tora",
                "seed": seed,
                **_scaled(gain),
                "trainable": 110_000,
                "adapter_params": tora_adapter,
                "init_max_abs_diff": init_gap,
            }
        )
        if decoders:
            rows.append(
                {
                    "method": "decoders",
                    "seed": seed,
                    **_scaled(decoders[seed]),
                    "trainable": 100_000,
                    "adapter_params": 0,
                    "init_max_abs_diff": None,
                }
            )
        if shared:
            rows.append(
                {
                    "method": "lora_shared",
                    "seed": seed,
                    **_scaled(shared[seed]),
                    "trainable": 105_000,
                    "adapter_params": 4_608,
                    "init_max_abs_diff": None,
                }
            )
    return rows


def test_delta_m_against_the_baseline_of_the_same_seed():
    table = deltas(_rows([0.02, 0.04, 0.03]), "lora_per_task")
    tora = [d["delta_m"] for d in table if d["method"] == "tora"]
    assert tora == pytest.approx([2.0, 4.0, 3.0])
    assert all(d["delta_m"] == 0.0 for d in table if d["method"] == "lora_per_task")
    assert [d["delta_p"] for d in table if d["method"] == "decoders"] == pytest.approx([-10.0] * 3)


def test_the_headline_is_tora_against_per_task_lora():
    assert [spec.id for spec in HEADLINE] == ["tora_beats_lora_per_task"] and HEADLINE[0].headline
    assert HEADLINE[0].rule.smallest_effect == 2.0 and HEADLINE[0].rule.source


def test_each_verdict_is_reachable():
    holds = tora_beats_lora_per_task(_rows([0.02, 0.04, 0.03]), "lora_per_task", TRIVIAL)
    assert holds.verdict == "holds" and holds.effect == pytest.approx(3.0) and holds.n == 3
    assert all(g.passed for g in holds.gates) and len(holds.gates) == 6
    fails = tora_beats_lora_per_task(_rows([-0.02, -0.04, -0.03]), "lora_per_task", TRIVIAL)
    assert fails.verdict == "does not hold"
    noisy = tora_beats_lora_per_task(_rows([0.05, -0.04, 0.01]), "lora_per_task", TRIVIAL)
    assert noisy.verdict == "not resolved" and noisy.ci[0] < 0 < noisy.ci[1]
    # against another baseline the claim is the paired difference of the two Δm
    other = tora_beats_lora_per_task(_rows([0.03, 0.05, 0.04], [0.01, 0.02, 0.01]), "decoders", TRIVIAL)
    assert other.verdict == "holds" and other.effect > 0


def test_a_gain_below_the_smallest_effect_does_not_hold():
    small = tora_beats_lora_per_task(_rows([0.004, -0.002, 0.003]), "lora_per_task", TRIVIAL)
    assert small.ci[0] < 0 < small.ci[1] < 2.0 and small.verdict == "does not hold"


def test_adaptation_must_beat_decoders_only():
    # ToRA is clearly ahead of LoRA, but LoRA per task does no better than the frozen encoder with its decoders
    claim = tora_beats_lora_per_task(_rows([0.02, 0.04, 0.03], decoders=[0.001, -0.001, 0.0]), "lora_per_task", TRIVIAL)
    assert claim.verdict == "not resolved" and "gate failed" in claim.reason
    assert "LoRA per task vs decoders only" in claim.reason and "ToRA (MTSAM) vs decoders" not in claim.reason
    without = tora_beats_lora_per_task(_rows([0.02, 0.04, 0.03], decoders=[]), "lora_per_task", TRIVIAL)
    assert without.verdict == "holds" and "decoders only did not run" in without.evidence
    assert len(without.gates) == 4


def test_the_claim_is_not_resolved_when_the_models_did_not_learn_or_a_method_is_missing():
    unlearned = tora_beats_lora_per_task(_rows([0.02, 0.04, 0.03]), "lora_per_task", {"pix_acc": 95.0, "abs_err": 1.4})
    assert unlearned.verdict == "not resolved" and "majority class" in unlearned.reason
    deep = tora_beats_lora_per_task(_rows([0.02, 0.04, 0.03]), "lora_per_task", {"pix_acc": 40.0, "abs_err": 0.5})
    assert deep.verdict == "not resolved" and "training-mean depth" in deep.reason
    missing = [r for r in _rows([0.02, 0.04, 0.03]) if r["method"] != "tora"]
    lonely = tora_beats_lora_per_task(missing, "lora_per_task", TRIVIAL)
    assert lonely.verdict == "not resolved" and "not measured" in lonely.reason


def test_seeds_pair_by_key():
    rows = [r for r in _rows([0.02, 0.04, 0.03]) if not (r["method"] == "tora" and r["seed"] == 2)]
    with pytest.raises(ValueError, match="different units"):
        tora_beats_lora_per_task(rows, "lora_per_task", TRIVIAL)


def test_the_shared_lora_claim_is_secondary():
    rows = _rows([0.02, 0.04, 0.03], shared=[0.021, 0.039, 0.031])
    shared = tora_beats_lora_shared(rows, "lora_per_task", TRIVIAL)
    assert not shared.headline and shared.verdict == "does not hold"
    scenes = {
        "trivial/pix_acc": 40.0,
        "trivial/abs_err": 1.4,
        "train/images": 8,
        "test/images": 4,
        "label_size": [28, 28],
        "source": "rendered",
    }
    report = build_report(rows, scenes, MtsamParams())
    assert [(c.id, c.headline) for c in report.claims] == [
        ("tora_beats_lora_per_task", True),
        ("tora_beats_lora_shared", False),
    ]


def test_checks_pass_and_fail_on_the_numbers():
    p = MtsamParams()
    passed = {c.id: c.passed for c in checks(_rows([0.01] * 3), p)}
    assert passed == {
        "tora_init_equals_frozen": True,
        "tora_parameter_formula": True,
        "tora_fewer_adapter_params": True,
    }
    failed = {c.id: c.passed for c in checks(_rows([0.01] * 3, init_gap=1e-7, tora_adapter=20_000), p)}
    assert failed == {
        "tora_init_equals_frozen": False,
        "tora_parameter_formula": False,
        "tora_fewer_adapter_params": False,
    }


def test_build_report_table_shape():
    scenes = {
        "trivial/pix_acc": 40.0,
        "trivial/abs_err": 1.4,
        "train/images": 8,
        "test/images": 4,
        "label_size": [28, 28],
        "source": "rendered",
    }
    report = build_report(_rows([0.02, 0.04, 0.03]), scenes, MtsamParams())
    assert [r["method"] for r in report.rows] == [
        "LoRA per task [single-task baseline]",
        "ToRA (MTSAM)",
        "decoders only (frozen encoder)",
    ]
    assert report.columns[1:10] == [label for _, label, _ in METRICS] and "Δm (%) ↑" in report.columns
    assert [c.id for c in report.claims] == ["tora_beats_lora_per_task"]
    assert report.rows[1]["paper Δm"] is None and report.rows[1]["adapter params"] == f"{TORA_PARAMS:,}"


def test_a_baseline_metric_of_zero_leaves_delta_m_undefined_and_the_claim_unresolved():
    rows = _rows([0.02, 0.04, 0.03])
    for r in rows:
        if r["method"] == "lora_per_task" and r["seed"] == 1:
            r["within_11"] = 0.0
    claim = tora_beats_lora_per_task(rows, "lora_per_task", TRIVIAL)
    assert claim.verdict == "not resolved" and "Δm is undefined on seed(s) [1]" in claim.reason
    scenes = {
        "trivial/pix_acc": 40.0,
        "trivial/abs_err": 1.4,
        "train/images": 8,
        "test/images": 4,
        "label_size": [28, 28],
        "source": "rendered",
    }
    assert build_report(rows, scenes, MtsamParams()).rows[1]["Δm (%) ↑"] == "–"
