"""heartlang claims on constructed numbers: every verdict reachable, the content, chance and headroom gates, the
table's shape."""

from __future__ import annotations

from typing import Any

import pytest

from pipelines.heartlang.params import HeartlangParams
from pipelines.heartlang.report import (
    CONTENT_BITS,
    HEADLINE,
    build_report,
    checks,
    content_bits,
    content_share,
    pretraining_claim,
    table,
    tokenizer_claim,
)


def _rows(
    heartlang: list[float], random_init: list[float], window: list[float], counts: list[float] | None = None
) -> list[dict[str, Any]]:
    rows = []
    for seed in range(len(heartlang)):
        for task in ("rhythm", "form"):
            for fraction in (0.01, 0.1, 1.0):
                arms = [("heartlang", heartlang), ("random_init", random_init), ("fixed_window", window)]
                for method, aucs in arms + ([("beat_count", counts)] if counts else []):
                    rows.append({"seed": seed, "method": method, "task": task, "fraction": fraction, "auc": aucs[seed]})
    return rows


def _usage(qrs_left: float = 4.0, window_left: float = 4.0, total: float = 5.0) -> list[dict[str, Any]]:
    """Code usage rows of both tokenizers with ``*_left`` bits of the ``total`` left given lead and time."""
    return [
        {
            "tokenizer": tok,
            "seed": seed,
            "code": k,
            "count": 10,
            "h_code_bits": total,
            "h_code_given_lead_time_bits": left,
        }
        for tok, left in (("qrs", qrs_left), ("window", window_left))
        for seed in (0, 1, 2)
        for k in range(4)
    ]


HEALTHY = _usage()


def test_the_headline_is_pretraining_against_random_init() -> None:
    assert [s.id for s in HEADLINE] == ["heartlang_beats_random_init"] and HEADLINE[0].headline
    assert HEADLINE[0].rule.smallest_effect == 0.03 and "PTB-XL" in HEADLINE[0].rule.source


def test_pretraining_claim_verdicts() -> None:
    holds = pretraining_claim(_rows([0.80, 0.82, 0.81], [0.70, 0.71, 0.69], [0.7] * 3), HEALTHY)
    assert holds.verdict == "holds" and holds.headline and all(g.passed for g in holds.gates)
    assert (
        pretraining_claim(_rows([0.60, 0.61, 0.62], [0.70, 0.71, 0.69], [0.7] * 3), HEALTHY).verdict == "does not hold"
    )
    assert (
        pretraining_claim(_rows([0.70, 0.75, 0.66], [0.70, 0.71, 0.69], [0.7] * 3), HEALTHY).verdict == "not resolved"
    )
    one_seed = pretraining_claim(_rows([0.8], [0.7], [0.7]), HEALTHY)
    assert one_seed.verdict == "not resolved"


def test_a_gain_below_the_smallest_effect_does_not_hold() -> None:
    small = pretraining_claim(_rows([0.705, 0.712, 0.688, 0.70], [0.70, 0.71, 0.69, 0.695], [0.7] * 4), HEALTHY)
    assert small.ci[0] < 0 < small.ci[1] < 0.03 and small.verdict == "does not hold"


def test_codes_explained_by_lead_and_time_decide_nothing() -> None:
    # the audit's measurement: 0.67 of 5.17 bits left given lead and time; a clear "loss" still says nothing
    degenerate = _usage(qrs_left=0.67, total=5.17)
    assert content_share(degenerate, "qrs") == pytest.approx(0.67 / 5.17)
    claim = pretraining_claim(_rows([0.60, 0.61, 0.62], [0.70, 0.71, 0.69], [0.7] * 3), degenerate)
    assert claim.verdict == "not resolved" and "QRS-token VQ-HBR codes vs lead and time" in claim.reason
    unmeasured = pretraining_claim(_rows([0.80, 0.82, 0.81], [0.70, 0.71, 0.69], [0.7] * 3))
    assert unmeasured.verdict == "holds" and "not measured for the QRS-token tokenizer" in unmeasured.evidence


def test_a_collapsed_codebook_decides_nothing() -> None:
    # the default run before standardisation: two codes used, all of their bit beyond lead and time; the share
    # passes (1.0) but the targets cannot name a beat form
    collapsed = _usage(qrs_left=0.9, total=0.9)
    assert content_share(collapsed, "qrs") == 1.0 and content_bits(collapsed, "qrs") == 0.9
    claim = pretraining_claim(_rows([0.60, 0.61, 0.62], [0.70, 0.71, 0.69], [0.7] * 3), collapsed)
    assert claim.verdict == "not resolved" and "a collapsed codebook" in claim.reason
    just_enough = _usage(qrs_left=CONTENT_BITS, total=CONTENT_BITS + 0.5)
    assert pretraining_claim(_rows([0.60, 0.61, 0.62], [0.70, 0.71, 0.69], [0.7] * 3), just_enough).verdict == (
        "does not hold"
    )


def _curves(final_losses: list[float]) -> list[dict[str, Any]]:
    """Masked-pretraining curves of the QRS tokenizer: a loss of 3 nats, then each seed's final loss."""
    return [
        {"tokenizer": "qrs", "seed": seed, "step": step, "loss": loss}
        for seed, last in enumerate(final_losses)
        for step, loss in ((10, 3.0), (120, last))
    ]


def test_a_pretraining_that_did_not_learn_decides_nothing() -> None:
    # 4 bits beyond lead and time = 2.77 nats: a masked model still at that loss read no heartbeat
    clear_loss = _rows([0.60, 0.61, 0.62], [0.70, 0.71, 0.69], [0.7] * 3)
    stuck = pretraining_claim(clear_loss, HEALTHY, _curves([2.8, 2.9, 2.75]))
    assert stuck.verdict == "not resolved" and "QRS-token masked pretraining vs a predictor" in stuck.reason
    learned = pretraining_claim(clear_loss, HEALTHY, _curves([1.2, 1.3, 1.1]))
    assert learned.verdict == "does not hold" and all(g.passed for g in learned.gates)
    assert pretraining_claim(clear_loss, HEALTHY, []).verdict == "not resolved"  # asked for, not measured


def test_probes_at_chance_or_random_init_at_the_ceiling_decide_nothing() -> None:
    chance = pretraining_claim(_rows([0.56, 0.48, 0.53], [0.45, 0.41, 0.47], [0.7] * 3), HEALTHY)
    assert chance.verdict == "not resolved" and "HeartLang (QRS tokens, masked pretraining) vs chance" in chance.reason
    ceiling = pretraining_claim(_rows([1.0, 1.0, 1.0], [0.985, 0.99, 0.98], [0.7] * 3), HEALTHY)
    assert ceiling.verdict == "not resolved" and "headroom" in ceiling.reason


def test_seeds_pair_by_key() -> None:
    rows = [
        r
        for r in _rows([0.80, 0.82, 0.81], [0.70, 0.71, 0.69], [0.7] * 3)
        if not (r["method"] == "random_init" and r["seed"] == 1)
    ]
    with pytest.raises(ValueError, match="different units"):
        pretraining_claim(rows, HEALTHY)


def test_tokenizer_claim_is_non_inferiority() -> None:
    holds = tokenizer_claim(_rows([0.80, 0.81, 0.82], [0.7] * 3, [0.80, 0.81, 0.815]), HEALTHY)
    assert holds.verdict == "holds" and not holds.headline and "beat-count-only" in holds.evidence
    assert tokenizer_claim(_rows([0.70, 0.71, 0.70], [0.7] * 3, [0.80, 0.80, 0.81]), HEALTHY).verdict == "does not hold"
    assert tokenizer_claim(_rows([0.70, 0.80, 0.75], [0.7] * 3, [0.76, 0.74, 0.75]), HEALTHY).verdict == "not resolved"
    no_rhythm = [r for r in _rows([0.8] * 3, [0.7] * 3, [0.7] * 3) if r["task"] != "rhythm"]
    missing = tokenizer_claim(no_rhythm, HEALTHY)
    assert missing.verdict == "not resolved" and "not measured" in missing.reason


def test_a_collapsed_control_decides_nothing() -> None:
    # a control at chance (collapsed features) decides nothing, however far above it QRS tokens are
    collapsed = tokenizer_claim(_rows([0.80, 0.81, 0.82], [0.7] * 3, [0.51, 0.48, 0.52]), HEALTHY)
    assert collapsed.verdict == "not resolved" and "fixed windows on rhythm vs chance" in collapsed.reason
    # ... and so do window codes that follow from the token's position
    positional = tokenizer_claim(
        _rows([0.80, 0.81, 0.82], [0.7] * 3, [0.80, 0.81, 0.815]), _usage(window_left=0.01, total=4.85)
    )
    assert positional.verdict == "not resolved" and "fixed-window VQ-HBR codes" in positional.reason


def test_qrs_tokens_must_beat_the_beat_count_alone() -> None:
    # QRS ahead of fixed windows, but no better than a probe on two counts of the sentence: nothing decided
    by_count = tokenizer_claim(_rows([0.80, 0.81, 0.82], [0.7] * 3, [0.6] * 3, counts=[0.81, 0.80, 0.83]), HEALTHY)
    assert by_count.verdict == "not resolved" and "beat count only (QRS sentence length)" in by_count.reason
    beyond = tokenizer_claim(_rows([0.90, 0.91, 0.92], [0.7] * 3, [0.6, 0.62, 0.61], counts=[0.8] * 3), HEALTHY)
    assert beyond.verdict == "holds" and "beat count only 0.800" in beyond.evidence


def test_table_shape_and_paper_columns() -> None:
    columns, body = table(_rows([0.8] * 3, [0.7] * 3, [0.75] * 3))
    assert len(body) == 2 * 3 * 3 and columns[0] == "task"
    first = body[0]
    assert first["task"] == "rhythm" and first["labels"] == "1%" and first["paper PTB-XL HeartLang (%)"] == 62.08
    assert body[1]["paper PTB-XL HeartLang (%)"] == ""
    assert first["macro AUC (ours, %)"].startswith("80.00")


def test_checks_and_report() -> None:
    tokens = {"unlabelled": {"beats_mean": 12.0, "under_2_beats": 0, "truncated": 0}}
    usage = [{"tokenizer": "qrs", "seed": 0, "code": k, "count": int(k < 2)} for k in range(64)]
    (peaks, codes) = checks(tokens, usage, 64)
    assert peaks.passed and not codes.passed  # 2 of 64 codes used: collapse
    data = {
        "probe_source": "gaussian-pqrst",
        "probe_train": 10,
        "probe_test": 5,
        "tasks": {"rhythm": 4},
        "unlabelled": 8,
        "source": "deepfake-ecg",
    }
    report = build_report(_rows([0.8] * 3, [0.7] * 3, [0.75] * 3), data, tokens, usage, HeartlangParams())
    assert [c.id for c in report.claims] == ["heartlang_beats_random_init", "qrs_ge_window_rhythm_10pct"]
    assert [c.id for c in report.headline] == ["heartlang_beats_random_init"]
