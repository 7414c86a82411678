"""bc_pmi: parameter rules, the user's demonstration file learned from, and one tiny Prefect flow (a malformed
file refused before any work: rows of tests/reliability/test_bad_inputs.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from components.imitation.demos import write_demonstrations
from components.imitation.gridworld import GridConfig, expert_demonstrations
from components.io import load_json, load_table
from paperflows.contract import StageContext
from paperflows.engine import run_stage
from paperflows.params import ParamsError, validate
from pipelines.bc_pmi.params import BcPmiParams
from pipelines.bc_pmi.pipeline import PIPELINE

TINY: dict[str, Any] = {
    "seeds": [0, 1],
    "data": {"sizes": [2, 4]},
    "mine": {"steps": 30, "batch_size": 64},
    "train": {"steps": 30, "batch_size": 64},
    "evaluate": {"rollouts": 4},
}


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ({"data": {"sizes": [20, 5]}}, "distinct and increasing"),
        ({"data": {"sizes": [0]}}, "bc_pmi.data.sizes"),
        ({"train": {"methods": ["bc", "bc"]}}, "methods repeat"),
        ({"train": {"methods": ["gail"]}}, "bc_pmi.train.methods"),
        ({"train": {"alpha": 1.5}}, "bc_pmi.train.alpha"),
        ({"evaluate": {"action": "argmax"}}, "bc_pmi.evaluate.action"),
        ({"data": {"env": "reacher"}, "train": {"methods": ["bc", "bc_count_pmi"]}}, "exact count PMI"),
    ],
)
def test_bad_params_name_the_key(section: dict[str, Any], message: str) -> None:
    with pytest.raises(ParamsError, match=message):
        validate(BcPmiParams, section, "bc_pmi")


def test_paper_preset() -> None:
    paper = BcPmiParams(scale="paper")
    assert paper.data.sizes == [20, 100] and paper.mine.steps == paper.train.steps == 2000 and len(paper.seeds) == 5


def test_users_file_is_read_in_place_of_the_experts(project: Path) -> None:
    demos = expert_demonstrations(GridConfig(), 3, np.random.default_rng(7))
    write_demonstrations(demos, project / "mine.jsonl")
    params = BcPmiParams.model_validate({**TINY, "seeds": [0], "data": {"demos_path": "mine.jsonl", "sizes": [2, 10]}})
    root = project / "out"
    for name in ("demos", "mine"):
        run_stage(
            StageContext(
                pipeline=PIPELINE, stage=PIPELINE.stage(name), params=params, root=root, progress=False, project=project
            )
        )
    data = load_json(root / "metrics" / "data.json")
    assert data["source"] == "file" and data["sizes"] == [2, 3]  # 10 capped at the 3 episodes per style
    rows = load_table(root / "data" / "demos.parquet")
    assert len(rows) == len(demos["action"]) and {r["rank"] for r in rows} == {0, 1, 2}
    pmi = load_table(root / "tables" / "pmi.parquet")
    assert {r["size"] for r in pmi} == {2, 3} and sum(r["size"] == 3 for r in pmi) == len(demos["action"])


def test_flow_smoke(prefect_harness: None, project: Path, run_flow_and_check) -> None:
    report = run_flow_and_check(PIPELINE, BcPmiParams.model_validate(TINY), project)
    assert [c["id"] for c in report["claims"]] == [
        "bc_pmi_style_accuracy_low_data",
        "bc_pmi_equal_success_low_data",
        "bc_pmi_gt_count_pmi_low_data",
        "bc_pmi_gt_zone_low_data",
    ]
    arms = ["Conditional BC", "BC-PMI", "BC, exact count-PMI weights (control)", "BC, zone up-weighted (control)"]
    assert [(r["method"], r["actions"]) for r in report["rows"]] == [
        ("Experts (demonstrators)", "own"),
        ("Random policy (uniform actions; the gates' reference)", "own"),
        *[(arm, mode) for mode in ("greedy", "sample") for _ in (2, 4) for arm in arms],
    ]
    assert {c["id"] for c in report["checks"]} == {
        "weights_concentrate_in_zone",
        "dv_estimate_in_bounds",
        "mine_pmi_tracks_exact_pmi",
        "pmi_zero_where_styles_agree",
        "experts_show_their_styles",
    }
    assert all(g["reference"] == "the random policy" for g in report["claims"][1]["gates"])


REACHER: dict[str, Any] = {
    "seeds": [0, 1],
    "data": {"env": "reacher", "sizes": [2]},
    "mine": {"steps": 20, "batch_size": 64},
    "train": {"steps": 20, "batch_size": 64, "methods": ["bc", "bc_pmi", "bc_zone"]},
    "evaluate": {"rollouts": 2},
}


def _run(project: Path, params: BcPmiParams, names: tuple[str, ...]) -> Path:
    root = project / "out"
    for name in names:
        run_stage(
            StageContext(
                pipeline=PIPELINE, stage=PIPELINE.stage(name), params=params, root=root, progress=False, project=project
            )
        )
    return root


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"path": "t.parquet"}, r"bc_pmi.data.path: .*set data.env to 'reacher'"),
        ({"env": "reacher", "demos_path": "d.jsonl"}, r"bc_pmi.data.demos_path: .*set data.env to 'gridworld'"),
        ({"env": "mujoco"}, r"bc_pmi.data.env"),
    ],
)
def test_a_file_belongs_to_its_environment(data: dict[str, Any], message: str) -> None:
    with pytest.raises(ParamsError, match=message):
        validate(BcPmiParams, {"data": data}, "bc_pmi")


def test_reacher_stages_report_return_style_and_weights(project: Path) -> None:
    pytest.importorskip("mujoco")
    root = _run(project, BcPmiParams.model_validate(REACHER), ("demos", "mine", "train", "evaluate", "report"))
    demos = load_table(root / "data" / "demos.parquet")
    assert {f"obs_{i}" for i in range(10)} | {"action_0", "action_1"} <= set(demos[0])
    assert len(demos) == 2 * 2 * 2 * 50  # seeds x styles x episodes x steps
    pmi = load_table(root / "tables" / "pmi.parquet")
    assert all(r["pmi_exact"] is None for r in pmi) and 0 < np.mean([r["in_zone"] for r in pmi]) < 1
    report = load_json(root / "report.json")
    assert "return" in report["columns"] and "counter-clockwise" in report["columns"]
    experts = next(r for r in report["rows"] if r["method"] == "Experts (demonstrators)")
    assert experts["success"].startswith("1.00") and experts["style accuracy"].startswith("1.00")
    assert {c["id"] for c in report["checks"]} == {
        "weights_concentrate_in_zone",
        "dv_estimate_in_bounds",
        "pmi_zero_where_styles_agree",
        "experts_show_their_styles",
    }
    assert [c["id"] for c in report["claims"]] == [
        "bc_pmi_style_accuracy_low_data",
        "bc_pmi_equal_success_low_data",
        "bc_pmi_gt_zone_low_data",
    ]
    assert next(r for r in report["rows"] if r["method"].startswith("Random policy"))["return"] != "–"
    along = (root / "plots" / "weights_along.csv").read_text().splitlines()
    assert along[0].split(",")[:3] == ["style", "episode", "t"] and len(along) > 50


@pytest.mark.parametrize("name", ["mine.parquet", "mine-v0/data/main_data.hdf5"])
def test_users_trajectories_are_read_in_place_of_the_experts(project: Path, name: str) -> None:
    """A Parquet file, or the trajectories as a Minari dataset keeps them."""
    pytest.importorskip("mujoco")
    from components.imitation.minari import write_minari
    from components.imitation.reacher import ReacherConfig, expert_demonstrations
    from components.imitation.trajectories import write_trajectories

    demos = expert_demonstrations(ReacherConfig(horizon=12), 3, np.random.default_rng(0))
    (write_minari if name.endswith(".hdf5") else write_trajectories)(demos, project / name)
    params = BcPmiParams.model_validate(
        {**REACHER, "seeds": [0], "data": {"env": "reacher", "path": name, "sizes": [2, 10]}}
    )
    root = _run(project, params, ("demos", "mine"))
    data = load_json(root / "metrics" / "data.json")
    assert data["source"] == "file" and data["sizes"] == [2, 3] and data["env"] == "reacher"
    rows = load_table(root / "data" / "demos.parquet")
    assert len(rows) == len(demos["t"]) and {r["rank"] for r in rows} == {0, 1, 2}
    assert sum(r["size"] == 3 for r in load_table(root / "tables" / "pmi.parquet")) == len(demos["t"])
