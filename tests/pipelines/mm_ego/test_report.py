"""MM-Ego claims and checks on constructed evaluation tables: every verdict is reached, and a failed gate makes a
claim not resolved."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from components.egovideo.stats import debiased_rows
from pipelines.mm_ego.params import MmEgoParams
from pipelines.mm_ego.report import (
    bottleneck_note,
    bottleneck_table,
    build_report,
    checks,
    gap_table,
    mpp_claims,
    over_questions_and_seeds,
    qtype_table,
)

BUCKETS = ("short", "medium", "long")


def _pattern(n: int, share: float, offset: int = 0) -> np.ndarray:
    """n answers of which round(share * n) are right, spread evenly."""
    return np.array([((i + offset) * share) % 1 + share >= 1 - 1e-9 for i in range(n)], dtype=bool)


def _tables(
    acc: dict[str, dict[str, float]],
    per_bucket: int = 100,
    biased_share: float = 0.3,
    blind_on_biased: float = 1.0,
    seeds: tuple[int, ...] = (0,),
    drift: float = 0.0,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Rows and predictions of constructed models: ``acc[model][bucket]`` is the share right on the
    unbiased questions; every model but ``blind`` is also right on the biased ones; the blind network is
    right on ``blind_on_biased`` of the biased questions and on none of the others (it defines the mask)."""
    buckets = [b for b in BUCKETS for _ in range(per_bucket)]
    n_biased = round(biased_share * per_bucket)
    biased = [i % per_bucket < n_biased for i in range(len(buckets))]
    qtypes = ["last_put" if i % 2 else "count_open" for i in range(len(buckets))]
    rows, preds = [], []
    for s, seed in enumerate(seeds):
        models = {}
        for name, shares in acc.items():
            ok = np.zeros(len(buckets), dtype=bool)
            for j, b in enumerate(BUCKETS):
                sl = slice(j * per_bucket, (j + 1) * per_bucket)
                unb = _pattern(per_bucket - n_biased, min(1.0, shares[b] + drift * s), offset=s)
                ok[sl] = np.concatenate([np.ones(n_biased, dtype=bool), unb])
            models[name] = ok
        blind = np.zeros(len(buckets), dtype=bool)
        for j in range(3):
            blind[j * per_bucket : j * per_bucket + n_biased] = _pattern(n_biased, blind_on_biased)
        models["blind"] = blind
        r, p = debiased_rows(models, {"blind": blind}, buckets, biased, qtypes, seed)
        rows, preds = rows + r, preds + p
    return rows, preds


def _by_id(claims: list) -> dict[str, Any]:
    return {c.id: c for c in claims}


STRONG = {"mpp": {"short": 0.7, "medium": 0.7, "long": 0.7}, "uniform": {"short": 0.7, "medium": 0.45, "long": 0.25}}


def test_mpp_claims_hold_on_a_clear_growing_lead() -> None:
    rows, preds = _tables(STRONG)
    out = _by_id(mpp_claims(rows, preds))
    mda, grow = out["mpp_beats_uniform_mda"], out["mpp_gap_grows_with_length"]
    assert mda.verdict == "holds" and grow.verdict == "holds" and mda.headline and not grow.headline
    # 70 kept questions per bucket: leads of 0, 25 and 45 pp -> MDA difference 23.3, trend 45
    assert mda.effect == pytest.approx((0 + 25 + 45) / 3, abs=1.0) and grow.effect == pytest.approx(45, abs=1.5)
    assert mda.ci[0] > 0 and grow.ci[0] > 0 and mda.n == 210
    assert "bootstrap over test questions x seeds" in mda.statistic and all(g.passed for g in mda.gates)
    assert mda.numbers["gap_long"] == pytest.approx(45, abs=1.5)


def test_mpp_claims_do_not_hold_when_uniform_wins_and_its_lead_grows() -> None:
    reverse = {"mpp": STRONG["uniform"], "uniform": STRONG["mpp"]}
    out = _by_id(mpp_claims(*_tables(reverse)))
    assert out["mpp_beats_uniform_mda"].verdict == "does not hold"
    assert out["mpp_gap_grows_with_length"].verdict == "does not hold"


def test_a_lead_well_below_one_point_does_not_hold() -> None:
    """Over 420 kept questions per bucket MPP and uniform-k differ on four, two each way: no lead of a point."""
    same = {"mpp": {"short": 0.5, "medium": 0.5, "long": 0.5}, "uniform": {"short": 0.5, "medium": 0.5, "long": 0.5}}
    rows, preds = _tables(same, per_bucket=600)
    kept_mpp = [i for i, p in enumerate(preds) if p["model"] == "mpp" and p["kept"]]
    flips = [kept_mpp[0], kept_mpp[1], kept_mpp[500], kept_mpp[501]]  # two in short, two in medium
    preds = [{**p, "correct": not p["correct"]} if i in flips else p for i, p in enumerate(preds)]
    mda = _by_id(mpp_claims(rows, preds))["mpp_beats_uniform_mda"]
    assert mda.ci[0] < 0 < mda.ci[1] < 1.0 and mda.verdict == "does not hold"


def test_equal_models_are_not_resolved() -> None:
    same = {"mpp": {"short": 0.5, "medium": 0.5, "long": 0.5}, "uniform": {"short": 0.5, "medium": 0.5, "long": 0.5}}
    out = _by_id(mpp_claims(*_tables(same)))
    for claim in out.values():
        assert claim.verdict == "not resolved" and "no variance" in claim.reason
    assert out["mpp_beats_uniform_mda"].ci == (0.0, 0.0)


def test_a_lead_that_does_not_grow_is_reported_apart_from_the_mda_win() -> None:
    flat = {"mpp": {"short": 0.8, "medium": 0.8, "long": 0.8}, "uniform": {"short": 0.4, "medium": 0.4, "long": 0.4}}
    out = _by_id(mpp_claims(*_tables(flat)))
    assert out["mpp_beats_uniform_mda"].verdict == "holds"
    assert out["mpp_gap_grows_with_length"].verdict == "not resolved"


def test_too_few_kept_questions_fails_a_gate() -> None:
    rows, preds = _tables(STRONG, per_bucket=20)  # 14 kept per bucket
    out = _by_id(mpp_claims(rows, preds))
    for claim in out.values():
        assert claim.verdict == "not resolved"
        assert "gate failed: de-biasing vs 30 kept questions per bucket" in claim.reason
        assert claim.gates[0].effect == 14
    missing = _by_id(mpp_claims([r for r in rows if r["model"] != "uniform"], preds))
    assert missing["mpp_beats_uniform_mda"].verdict == "not resolved"
    assert "not both among train.methods" in missing["mpp_beats_uniform_mda"].reason


def test_a_baseline_that_never_learned_to_read_frames_fails_its_gate() -> None:
    """MPP far ahead of a uniform-k at chance on the de-biased questions: not evidence for the pointer."""
    untrained = {"mpp": STRONG["mpp"], "uniform": {"short": 0.25, "medium": 0.25, "long": 0.25}}
    claims = mpp_claims(*_tables(untrained))
    for claim in claims:
        assert claim.verdict == "not resolved"
        assert "gate failed: uniform-k frames vs chance (25 %) on de-biased questions" in claim.reason
        assert "MPP (pointer top-k) vs chance" not in claim.reason
    assert claims[0].ci[0] > 0  # the interval alone would have said "holds"


def _seen(preds: list[dict[str, Any]], right_when_seen: float) -> list[dict[str, Any]]:
    """Predictions marked with whether uniform-k's frames hold the evidence (the short bucket's first 65 questions,
    35 of them kept); uniform-k is right on ``right_when_seen`` of the kept seen questions."""
    out = []
    for p in preds:
        seen = p["bucket"] == "short" and p["q"] % 100 < 65
        row = {**p, "uniform_sees_evidence": seen}
        if p["model"] == "uniform" and seen and p["kept"]:
            row["correct"] = (p["q"] % 100) / 100 < 0.3 + right_when_seen * 0.35
        out.append(row)
    return out


def test_uniform_gate_asks_whether_it_reads_the_frames_it_holds() -> None:
    """Beside its MDA, uniform-k must read the evidence its frames hold: right on the seen questions, the gate
    passes; at chance there (a pass that reads no frame), it fails and the claims are not resolved."""
    rows, preds = _tables(STRONG)
    reads = _by_id(mpp_claims(rows, _seen(preds, right_when_seen=1.0)))["mpp_beats_uniform_mda"]
    gate = reads.gates[-1]
    assert gate.reference.startswith("chance (25 %) on the de-biased questions whose evidence frames")
    assert gate.passed and gate.effect > 20
    assert reads.verdict == "holds"
    blind = _by_id(mpp_claims(rows, _seen(preds, right_when_seen=0.0)))["mpp_beats_uniform_mda"]
    assert not blind.gates[-1].passed and blind.verdict == "not resolved"
    assert "on the de-biased questions whose evidence frames" in blind.reason
    assert len(_by_id(mpp_claims(rows, preds))["mpp_beats_uniform_mda"].gates) == 3  # no flag: no such gate


def test_several_seeds_are_resampled_with_the_questions() -> None:
    rows, preds = _tables(STRONG, seeds=(0, 1, 2), drift=0.02)
    mda = _by_id(mpp_claims(rows, preds))["mpp_beats_uniform_mda"]
    assert mda.n == 3 * 210 and mda.verdict == "holds"
    per_seed = {s: [r["mda"] for r in rows if r["seed"] == s and r["model"] in ("mpp", "uniform")] for s in (0, 1, 2)}
    assert mda.effect == pytest.approx(np.mean([a - b for a, b in per_seed.values()]))
    # two seeds that disagree in sign: resampling the seeds spans both
    rows0, preds0 = _tables(STRONG, seeds=(0,))
    rows1, preds1 = _tables({"mpp": STRONG["uniform"], "uniform": STRONG["mpp"]}, seeds=(1,))
    mixed = _by_id(mpp_claims(rows0 + rows1, preds0 + preds1))["mpp_beats_uniform_mda"]
    assert mixed.verdict == "not resolved" and mixed.ci[0] < 0 < mixed.ci[1]


def test_paired_models_must_answer_the_same_questions() -> None:
    _, preds = _tables(STRONG)
    shifted = [{**p, "q": p["q"] + 1} if p["model"] == "uniform" else p for p in preds]
    with pytest.raises(ValueError, match="different test questions"):
        over_questions_and_seeds(shifted, ("mpp", "uniform"), lambda v, b: float(v.mean()))


def _blind_check(tables: tuple[list, list]) -> Any:
    found = [c for c in checks(*tables, ("blind",)) if c.id == "blind_model_above_chance_on_biased"]
    return found[0] if found else None


def test_blind_check_passes_and_fails() -> None:
    weak = {"mpp": {"short": 0.5, "medium": 0.5, "long": 0.5}}
    above = _blind_check(_tables(weak, blind_on_biased=0.8))
    assert above.passed and above.numbers["blind_acc_biased"] == pytest.approx(80.0)
    assert not _blind_check(_tables(weak, blind_on_biased=0.1)).passed
    assert not _blind_check(_tables(weak, blind_on_biased=0.25)).passed
    assert _blind_check(_tables(weak, blind_on_biased=0.8, per_bucket=20)) is None  # 18 biased questions
    rows, preds = _tables(weak)
    assert [c.id for c in checks([r for r in rows if r["model"] != "blind"], preds, ())] == [
        "debiased_blind_models_score_zero"
    ]


def test_blind_check_spearman_over_the_models_outside_the_mask() -> None:
    models = {
        "mpp": {"short": 0.9, "medium": 0.9, "long": 0.9},
        "uniform": {"short": 0.6, "medium": 0.6, "long": 0.6},
        "compressed": {"short": 0.3, "medium": 0.3, "long": 0.3},
    }
    check = _blind_check(_tables(models))
    # lower accuracy on the unbiased questions: more prior exploitation and more inflation, in the same order
    assert check.numbers["spearman_exploit_inflation"] == pytest.approx(1.0)
    assert check.numbers["exploit_compressed"] > check.numbers["exploit_uniform"] > check.numbers["exploit_mpp"]


def test_check_passes_by_construction_and_fails_on_a_leaky_mask() -> None:
    rows, preds = _tables(STRONG)
    check = checks(rows, preds, ("blind",))[0]
    assert check.passed and check.numbers["mda_blind"] == 0.0
    leaky = [{**p, "kept": True} if p["model"] == "blind" and p["correct"] else p for p in preds]
    bad = checks(rows, leaky, ("blind",))[0]
    assert not bad.passed and "answered correctly: 90" in bad.evidence


def test_tables_and_the_whole_report() -> None:
    rows, preds = _tables(STRONG)
    gaps = gap_table(rows, preds)
    assert [g["bucket"] for g in gaps] == list(BUCKETS) and gaps[0]["raw gap"] == pytest.approx(0.0)
    by_type = {r["model"]: r for r in qtype_table(preds)}
    assert by_type["blind"]["last_put"] == 0.0 == by_type["blind"]["count_open"]
    assert (by_type["mpp"]["count_open"] + by_type["mpp"]["last_put"]) / 2 == pytest.approx(70.0)  # 35 kept each
    bench = {
        "test/questions": 300,
        "test/videos": 30,
        "train/questions": 900,
        "train/videos": 90,
        **{f"test/{b}/questions": 100 for b in BUCKETS},
        **{f"test/{b}/biased_share": 0.3 for b in BUCKETS},
    }
    summary = {f"pointer/{b}/recall_at_k": 0.5 for b in BUCKETS}
    params = MmEgoParams.model_validate({"train": {"methods": ["mpp", "uniform", "blind"]}, "debias": {"llm": "none"}})
    report = build_report(rows, preds, summary, bench, {"engine": "template"}, params)
    assert [c.id for c in report.claims] == ["mpp_beats_uniform_mda", "mpp_gap_grows_with_length"]
    assert [c.verdict for c in report.claims] == ["holds", "holds"]
    assert [c.id for c in report.checks] == ["debiased_blind_models_score_zero", "blind_model_above_chance_on_biased"]
    assert all(c.passed for c in report.checks)
    mpp = report.rows[0]
    assert mpp["model"] == "MPP (pointer top-k)" and mpp["paper MDA"] == 61.27
    assert mpp["MDA"] == pytest.approx(70.0) and mpp["raw - debiased"] == pytest.approx(79 - 70, abs=0.5)
    assert report.extra_tables["benchmark buckets"][2]["uniform coverage k/T"] == pytest.approx(8 / 256)
    text = report.to_markdown()
    assert "mpp_gap_grows_with_length" in text and "MPP minus uniform-k by bucket" in text
    assert not math.isnan(report.to_dict()["claims"][0]["effect"])


def _bench(per_bucket: dict[str, int]) -> dict[str, Any]:
    return {
        "test/questions": sum(per_bucket.values()),
        "test/videos": 30,
        "train/questions": 900,
        "train/videos": 90,
        **{f"test/{b}/questions": n for b, n in per_bucket.items()},
        **{f"test/{b}/biased_share": 0.3 for b, n in per_bucket.items() if n},
    }


def test_oracle_row_tells_pointer_from_answer_step() -> None:
    """MPP loses 30 pp to its own answer pass on the evidence frames in the long bucket: the pointer."""
    acc = {
        "mpp": {"short": 0.7, "medium": 0.6, "long": 0.4},
        "oracle": {"short": 0.7, "medium": 0.7, "long": 0.7},
        "uniform": {"short": 0.7, "medium": 0.45, "long": 0.25},
    }
    rows, preds = _tables(acc)
    table = {r["bucket"]: r for r in bottleneck_table(rows, preds, {"pointer/long/recall_at_k": 0.3}, 8, (16, 64, 256))}
    assert table["long"]["oracle"] == pytest.approx(70.0) and table["long"]["MPP"] == pytest.approx(40.0, abs=1)
    assert table["long"]["pointer loss: oracle - MPP [95% CI]"].startswith("30.")
    assert table["short"]["pointer loss: oracle - MPP [95% CI]"] == "0.0 [0.0, 0.0]"
    assert table["long"]["answer-step loss: 100 - oracle"] == pytest.approx(30.0)
    assert table["long"]["pointer recall@8"] == 0.3 and table["short"]["uniform coverage k/T"] == 0.5
    assert "the larger loss is the answer step" in bottleneck_note(rows, preds)  # 30 pp vs 13.3 [..] pp
    blind_pointer = {
        **acc,
        "oracle": {"short": 0.95, "medium": 0.95, "long": 0.95},
        "mpp": {"short": 0.3, "medium": 0.3, "long": 0.3},
    }
    assert "the larger loss is the pointer" in bottleneck_note(*_tables(blind_pointer))
    even = {
        **acc,
        "oracle": {"short": 0.6, "medium": 0.6, "long": 0.6},
        "mpp": {"short": 0.2, "medium": 0.2, "long": 0.2},
    }
    assert "the larger loss is neither clearly" in bottleneck_note(*_tables(even))  # 40 pp each
    rows, preds = _tables(STRONG)
    assert bottleneck_table(rows, preds, {}, 8, (16, 64, 256)) == [] and bottleneck_note(rows, preds) is None


def test_a_bucket_without_questions_is_reported_empty_and_leaves_the_claims_not_resolved() -> None:
    rows, preds = _tables({**STRONG, "oracle": STRONG["mpp"]})
    short = [p for p in preds if p["bucket"] == "short"]
    rows = [
        {
            **r,
            **{f"{k}_{b}": math.nan for k in ("raw", "debiased") for b in ("medium", "long")},
            "kept_medium": 0,
            "kept_long": 0,
        }
        for r in rows
    ]
    params = MmEgoParams.model_validate({"train": {"methods": ["mpp", "uniform", "blind"]}, "debias": {"llm": "none"}})
    report = build_report(
        rows, short, {}, _bench({"short": 100, "medium": 0, "long": 0}), {"engine": "template"}, params
    )
    assert any(n.startswith("Empty bucket(s) medium, long") for n in report.notes)
    assert [c.verdict for c in report.claims[:2]] == ["not resolved", "not resolved"]
    assert math.isnan(report.extra_tables["benchmark buckets"][1]["biased share"])
    assert report.to_markdown()
