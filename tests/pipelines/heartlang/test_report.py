"""heartlang claims on constructed numbers: every verdict reachable, the headroom gate, the table's shape."""

from __future__ import annotations

from typing import Any

import pytest

from pipelines.heartlang.params import HeartlangParams
from pipelines.heartlang.report import build_report, checks, pretraining_claim, table, tokenizer_claim


def _rows(heartlang: list[float], random_init: list[float], window: list[float]) -> list[dict[str, Any]]:
    rows = []
    for seed in range(len(heartlang)):
        for task in ("rhythm", "form"):
            for fraction in (0.01, 0.1, 1.0):
                for method, auc in (("heartlang", heartlang[seed]), ("random_init", random_init[seed]),
                                    ("fixed_window", window[seed])):
                    rows.append({"seed": seed, "method": method, "task": task, "fraction": fraction, "auc": auc})
    return rows


def test_pretraining_claim_verdicts() -> None:
    assert pretraining_claim(_rows([0.80, 0.82, 0.81], [0.70, 0.71, 0.69], [0.7] * 3)).verdict == "holds"
    assert pretraining_claim(_rows([0.60, 0.61, 0.62], [0.70, 0.71, 0.69], [0.7] * 3)).verdict == "does not hold"
    assert pretraining_claim(_rows([0.70, 0.75, 0.66], [0.70, 0.71, 0.69], [0.7] * 3)).verdict == "not resolved"
    ceiling = pretraining_claim(_rows([1.0, 1.0, 1.0], [0.995, 0.996, 0.995], [0.7] * 3))
    assert ceiling.verdict == "not resolved" and ceiling.precondition is not None and not ceiling.precondition.met
    assert pretraining_claim(_rows([0.8], [0.7], [0.7])).verdict == "not resolved"      # one seed


def test_tokenizer_claim_is_non_inferiority() -> None:
    assert tokenizer_claim(_rows([0.80, 0.81, 0.82], [0.7] * 3, [0.80, 0.81, 0.815])).verdict == "holds"
    assert tokenizer_claim(_rows([0.70, 0.71, 0.70], [0.7] * 3, [0.80, 0.80, 0.81])).verdict == "does not hold"
    assert tokenizer_claim(_rows([0.70, 0.80, 0.75], [0.7] * 3, [0.76, 0.74, 0.75])).verdict == "not resolved"
    no_rhythm = [r for r in _rows([0.8] * 3, [0.7] * 3, [0.7] * 3) if r["task"] != "rhythm"]
    assert tokenizer_claim(no_rhythm).verdict == "not resolved"
    # a control at chance (collapsed features) decides nothing, however far above it QRS tokens are
    collapsed = tokenizer_claim(_rows([0.80, 0.81, 0.82], [0.7] * 3, [0.51, 0.50, 0.52]))
    assert collapsed.verdict == "not resolved" and not collapsed.precondition.met
    assert collapsed.precondition.value == pytest.approx(0.51)


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
    assert peaks.passed and not codes.passed              # 2 of 64 codes used: collapse
    data = {"probe_source": "gaussian-pqrst", "probe_train": 10, "probe_test": 5, "tasks": {"rhythm": 4},
            "unlabelled": 8, "source": "deepfake-ecg"}
    report = build_report(_rows([0.8] * 3, [0.7] * 3, [0.75] * 3), data, tokens, usage, HeartlangParams())
    assert [c.id for c in report.claims] == ["heartlang_beats_random_init", "qrs_ge_window_rhythm_10pct"]
