"""Time in range and the Kovatchev risk indices, against hand values and simglucose's risk_index."""

from __future__ import annotations

import numpy as np
import pytest

from components.glucose import risk_indices, time_in_range
from components.glucose.reference import _ensure_gym_registration


def _risk(bg: float) -> float:
    return 10 * (1.509 * (np.log(bg) ** 1.084 - 5.381)) ** 2


def test_time_in_range_bounds_inclusive() -> None:
    bg = np.array([[69.9, 70.0, 120.0, 180.0, 180.1]])
    assert time_in_range(bg)[0] == pytest.approx(3 / 5)
    assert time_in_range(bg, 60, 200)[0] == 1.0


def test_risk_symmetry_point_and_hand_values() -> None:
    lbgi, hbgi = risk_indices(np.array([[112.5] * 4]))
    assert lbgi[0] < 1e-3 and hbgi[0] < 1e-3  # f(112.5) ~ 0: no risk either way
    bg = np.array([[50.0, 300.0, 120.0, 120.0]])
    lbgi, hbgi = risk_indices(bg)
    assert lbgi[0] == pytest.approx(_risk(50.0) / 4)
    assert hbgi[0] == pytest.approx((_risk(300.0) + 2 * _risk(120.0)) / 4)
    lbgi_s, hbgi_s = risk_indices(bg, "simglucose")
    assert lbgi_s[0] == pytest.approx(_risk(50.0))  # mean over the one low reading
    assert hbgi_s[0] == pytest.approx((_risk(300.0) + 2 * _risk(120.0)) / 3)


def test_matches_simglucose_risk_index() -> None:
    _ensure_gym_registration()
    from simglucose.analysis.risk import risk_index

    rng = np.random.default_rng(0)
    for _ in range(5):
        bg = rng.uniform(40, 350, size=50)
        lbgi_ref, hbgi_ref, _ = risk_index(bg, len(bg))
        lbgi, hbgi = risk_indices(bg[None], "simglucose")
        assert lbgi[0] == pytest.approx(lbgi_ref) and hbgi[0] == pytest.approx(hbgi_ref)
        lbgi_k, hbgi_k = risk_indices(bg[None], "kovatchev")
        f = 1.509 * (np.log(bg) ** 1.084 - 5.381)
        assert lbgi_k[0] == pytest.approx(lbgi_ref * np.mean(f < 0))
        assert hbgi_k[0] == pytest.approx(hbgi_ref * np.mean(f > 0))


def test_risk_rejects_bad_values() -> None:
    with pytest.raises(ValueError, match="> 0"):
        risk_indices(np.array([[100.0, 0.0]]))
    with pytest.raises(KeyError, match="unknown risk convention"):
        risk_indices(np.array([[100.0]]), "other")
