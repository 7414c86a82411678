"""heartlang report functions on constructed numbers: each verdict is reachable."""

from __future__ import annotations

from pipelines.heartlang.report import method_beats_baseline


def _rows(method: list[float], baseline: list[float]) -> list[dict]:
    return [row for seed, (m, b) in enumerate(zip(method, baseline))
            for row in ({"seed": seed, "method": "method", "score": m},
                        {"seed": seed, "method": "baseline", "score": b})]


def test_each_verdict_is_reachable() -> None:
    assert method_beats_baseline(_rows([2.0, 2.1, 2.2], [1.0, 1.0, 1.1])).verdict == "holds"
    assert method_beats_baseline(_rows([1.0, 1.0, 1.1], [2.0, 2.1, 2.2])).verdict == "does not hold"
    assert method_beats_baseline(_rows([2.0, 0.0, 2.0], [1.0, 1.0, 1.0])).verdict == "not resolved"
