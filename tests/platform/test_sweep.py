"""Sweeps: a comma list is a grid, every point is checked before anything starts, one table at the end."""

from __future__ import annotations

from pathlib import Path

import pytest

from components.io import save_json
from paperflows.__main__ import main
from paperflows.params import ParamsError
from paperflows.sweep import Sweep, comparison_rows, plan, point_overrides, split_values


def test_a_comma_outside_brackets_and_quotes_is_a_sweep() -> None:
    assert split_values("4,8,16") == ["4", "8", "16"]
    assert split_values("[0,1]") is None and split_values("'a,b'") is None and split_values("8") is None
    assert split_values("[0,1],[2,3]") == ["[0,1]", "[2,3]"]


def test_swept_keys_make_a_grid_and_the_rest_is_shared() -> None:
    sweep = plan(["lora.r=4,8", "seeds=[0,1]", "lora.lr=1e-3,1e-2"])
    assert sweep is not None and sweep.keys == ["lora.r", "lora.lr"] and sweep.fixed == ["seeds=[0,1]"]
    assert sweep.points == [
        {"lora.r": 4, "lora.lr": 0.001},
        {"lora.r": 4, "lora.lr": 0.01},
        {"lora.r": 8, "lora.lr": 0.001},
        {"lora.r": 8, "lora.lr": 0.01},
    ]
    assert point_overrides(sweep, 3) == ["seeds=[0,1]", "lora.r=8", "lora.lr=0.01"]
    assert plan(["lora.r=8", "seeds=[0,1]"]) is None


@pytest.mark.parametrize(
    "overrides, says",
    [(["lora.r=4,4"], "repeats"), (["lora.r=4,"], "empty value"), (["a=" + ",".join(map(str, range(300)))], "at most")],
)
def test_bad_grids_are_refused(overrides: list[str], says: str) -> None:
    with pytest.raises(ParamsError, match=says):
        plan(overrides)


def test_a_bad_point_refuses_the_whole_sweep_before_anything_starts(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "knots", "--set", "lora.r=4,0"]) == 2  # r = 0 is out of range
    err = capsys.readouterr().err
    assert "sweep point 2 (lora.r=0)" in err and "lora.r" in err
    assert not (project / "runs").exists() and not (project / "outputs").exists()
    assert main(["run", "all", "--set", "knots.lora.r=4,8"]) == 2
    assert "one pipeline" in capsys.readouterr().err


def test_the_comparison_has_one_row_per_point(tmp_path: Path) -> None:
    sweep = Sweep("sweep-x", ["train.steps"], [{"train.steps": 5}, {"train.steps": 10}], ["seeds=[0]"])
    head = {"id": "h", "headline": True, "verdict": "holds", "effect": 0.5, "ci": [0.1, 0.9], "n": 3}
    found = [
        {
            "index": 1,
            "values": {"train.steps": 10},
            "run": {"seconds": 12.0},
            "folder": tmp_path / "r1",
            "report": {"claims": [head, {"id": "s", "verdict": "not resolved"}]},
        }
    ]
    rows = comparison_rows(sweep, found)
    assert rows[0]["headline"] == "(no finished run)"
    assert rows[1] == {
        "train.steps": "10",
        "headline": "h",
        "verdict": "holds",
        "effect [95% CI]": "0.500 [0.100, 0.900]",
        "n": 3,
        "claims held": "1/2",
        "wall time": "12 s",
        "run": "r1",
    }
    save_json({}, tmp_path / "r1" / "run.json")  # a folder of another run is not collected
