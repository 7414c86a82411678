"""MLflow runs that tell their story: names that say what differs, the claims on the parent run, MLflow's own
source fields, registered models, previewable tables and figures, DVC stage runs grouped under one parent."""

from __future__ import annotations

import dataclasses
import json
import logging
import subprocess
from dataclasses import dataclass
from pathlib import Path

import mlflow
import pytest
import torch
from mlflow import MlflowClient
from pydantic import Field

from components.io import load_json, safetensors_metadata, save_model, save_table
from components.metrics.stats import Estimate
from paperflows import spool
from paperflows.claims import ClaimSpec, decide, superiority
from paperflows.contract import Pipeline, Plot, StageContext, stage
from paperflows.engine import execute, run_stage
from paperflows.paper import Paper
from paperflows.params import PipelineParams, Section
from paperflows.report import Report
from paperflows.settings import Settings
from paperflows.tracking import (
    MlflowTracker,
    changed_params,
    claim_metrics,
    git_state,
    mlflow_run_url,
    run_name,
    run_tags,
)


class StoryModel(Section):
    width: int = Field(3, ge=1, le=64, description="width")


class StoryParams(PipelineParams):
    model: StoryModel = Field(default_factory=StoryModel, description="model")
    rate: float = Field(0.5, gt=0, le=1, description="rate")


@dataclass
class LinearConfig:
    width: int


class Linear(torch.nn.Module):
    def __init__(self, cfg: LinearConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.layer = torch.nn.Linear(cfg.width, 1)


@stage(
    params=("seeds", "model"),
    outs=("models/linear/", "tables/curve.parquet"),
    plots=(Plot("plots/curve.png"),),
    models={"linear": "models/linear/"},
)
def train(ctx: StageContext) -> None:
    """Train a linear model per seed."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    for seed in ctx.params.seeds:
        save_model(Linear(LinearConfig(ctx.params.model.width)), ctx.path("models/linear/") / f"seed{seed}.safetensors")
        ctx.log_metrics({f"seed{seed}/loss": 1.0 / (seed + 1)}, step=1)
    save_table(
        [{"seed": s, "loss": 1.0 / (s + 1), "values": [1.0, 2.0]} for s in ctx.params.seeds],
        ctx.path("tables/curve.parquet"),
    )
    fig, ax = plt.subplots(figsize=(2, 2))
    ax.plot([0, 1], [1, 0])
    fig.savefig(ctx.path("plots/curve.png"))
    plt.close(fig)


@stage("report", params=("seeds", "rate"), deps=("models/linear/",), outs=("report.json", "report.md"))
def story_report(ctx: StageContext) -> None:
    """Decide the claims."""
    values = [ctx.params.rate + 0.01 * s for s in ctx.params.seeds]
    Report(
        slug="story",
        title="Story | a toy",
        columns=["method", "rate"],
        rows=[{"method": "toy", "rate": values[0]}],
        claims=[
            decide(
                ClaimSpec("rate_positive", "rate is positive", "rate", superiority(0.01, "toy"), headline=True),
                Estimate.of(dict(zip(ctx.params.seeds, values))),
            ),
            decide(
                ClaimSpec("rate_large", "rate above 10", "rate", superiority(1.0, "toy", boundary=10.0)),
                Estimate.of(dict(zip(ctx.params.seeds, values))),
            ),
        ],
        extra_tables={"per seed": [{"seed": s, "rate": v} for s, v in zip(ctx.params.seeds, values)]},
    ).save(ctx.path("report.json"))


def story_pipeline() -> Pipeline:
    return Pipeline(
        paper=Paper("story", "Story", "0000.00001", "rate positive"),
        params_model=StoryParams,
        stages=(train, story_report),
    )


@pytest.fixture()
def settings(tmp_path: Path) -> Settings:
    (tmp_path / "params.yaml").write_text("story:\n  seeds: [0, 1]\n  model:\n    width: 3\n")
    return Settings(
        root=tmp_path,
        tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}",
        artifact_root=tmp_path / "mlruns",
        prefect_home=tmp_path / "prefect",
    )


def _parents(client: MlflowClient, experiment_id: str) -> list:
    return [r for r in client.search_runs([experiment_id]) if "mlflow.parentRunId" not in r.data.tags]


# --------------------------------------------------------------------------------------------------
def test_run_names_say_what_differs_from_params_yaml() -> None:
    assert run_name("oc_flow", {}, "brave-fox") == "oc_flow · params.yaml · brave-fox"
    assert run_name("oc_flow", {"train.steps": 500}) == "oc_flow · train.steps=500"
    assert run_name("oc_flow", None, "dvc repro") == "oc_flow · dvc repro"
    many = run_name("knots", {f"lora.key_{i}": [0.1, 0.2, 0.3] for i in range(12)}, "ui-run")
    assert len(many) <= 100 and many.endswith("more · ui-run") and many.startswith("knots · lora.key_0=")
    assert changed_params({"a": {"b": 1, "c": 2}}, {"a": {"b": 1, "c": 3}}) == {"a.c": 2}
    assert changed_params({"a": 1}, None) is None


def test_claims_become_sortable_metrics_and_tags() -> None:
    report = {
        "claims": [
            {"id": "a", "verdict": "holds", "effect": 0.3, "ci": [0.1, 0.5], "n": 8},
            {"id": "b", "verdict": "not resolved", "effect": 0.0, "ci": [None, None], "n": 1},
            {"id": "c", "verdict": "does not hold", "effect": -0.2, "ci": [-0.3, -0.1], "n": 8},
        ],
        "checks": [{"id": "k", "passed": True}, {"id": "m", "passed": False}],
    }
    metrics, tags = claim_metrics(report)
    assert metrics["claims/a/verdict"] == 1 and metrics["claims/b/verdict"] == 0 and metrics["claims/c/verdict"] == -1
    assert metrics["claims/a/ci_low"] == 0.1 and "claims/b/ci_low" not in metrics
    assert metrics["claims/held"] == 1 and metrics["claims/held_fraction"] == pytest.approx(1 / 3)
    assert tags["claim.c"] == "does not hold" and tags["claims.held"] == "1/3" and tags["checks.passed"] == "1/2"
    assert tags["claims.summary"] == "1 holds, 1 not resolved, 1 does not hold"


def test_a_run_is_not_dirty_because_it_rewrote_dvc_lock(tmp_path: Path) -> None:
    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    git("init", "-q")
    (tmp_path / "dvc.lock").write_text("a\n")
    (tmp_path / "params.yaml").write_text("x: 1\n")
    git("add", ".")
    git("-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "init")
    commit, dirty = git_state(tmp_path)
    assert len(commit) == 40 and not dirty
    (tmp_path / "dvc.lock").write_text("b\n")
    assert git_state(tmp_path) == (commit, False)
    (tmp_path / "params.yaml").write_text("x: 2\n")
    assert git_state(tmp_path) == (commit, True)
    tags = run_tags(
        Settings(root=tmp_path, tracking_uri="sqlite:///x", artifact_root=tmp_path, prefect_home=tmp_path),
        "prefect",
        source="paperflows/flows.py:x_flow",
    )
    assert tags["mlflow.source.git.commit"] == commit and tags["git.commit"] == f"{commit}-dirty"
    assert tags["mlflow.source.name"] == "paperflows/flows.py:x_flow" and tags["mlflow.source.type"] == "LOCAL"


def test_the_parent_run_tells_the_story(settings: Settings) -> None:
    pipeline = story_pipeline()
    tracker = MlflowTracker(settings, "story")
    params = StoryParams.model_validate({"seeds": [0, 1], "model": {"width": 5}})
    summary = execute(
        pipeline,
        params,
        settings,
        settings.runs("story") / "r1",
        entry="test",
        tracker=tracker,
        tags={"prefect.flow_run_name": "brave-fox"},
    )
    client = MlflowClient(settings.tracking_uri)
    [parent] = _parents(client, tracker.experiment_id)
    assert parent.info.run_id == summary.run_id
    assert parent.info.run_name == "story · model.width=5 · brave-fox"
    data = parent.data
    assert data.metrics["claims/rate_positive/verdict"] == 1 and data.metrics["claims/rate_large/verdict"] == -1
    assert data.tags["claims.held"] == "1/2" and data.tags["claim.rate_large"] == "does not hold"
    assert data.tags["paperflows.output_root"] == "runs/story/r1" and data.tags["paperflows.changed"] == "model.width"
    assert "rate_positive" in data.tags["mlflow.note.content"] and "`model.width=5`" in data.tags["mlflow.note.content"]
    tables = {a.path for a in client.list_artifacts(parent.info.run_id, "tables")}
    assert {
        "tables/report.json",
        "tables/report.md",
        "tables/00-results.csv",
        "tables/01-per_seed.csv",
        "tables/02-claims.csv",
    } <= tables
    csv = Path(client.download_artifacts(parent.info.run_id, "tables/02-claims.csv", str(settings.root / "dl")))
    assert csv.read_text().splitlines()[0].split(",")[:4] == ["id", "headline", "verdict", "holm_verdict"]
    assert data.tags["headline.verdict"] == "holds" and data.tags["headline"].startswith("rate_positive: holds")
    assert [a.path for a in client.list_artifacts(parent.info.run_id, "plots")] == ["plots/curve.png"]
    # the trained model: a registered model <slug>-<role>, its version holds the weights and config.json
    [version] = client.search_model_versions("name = 'story-linear'")
    assert version.run_id == parent.info.run_id and data.tags["paperflows.models"] == "story-linear/1"
    # it is a pyfunc LoggedModel of the parent run (tests/platform/test_pyfunc_models.py loads and runs them)
    logged = client.get_logged_model(version.source.removeprefix("models:/"))
    assert logged.source_run_id == parent.info.run_id and logged.name == "linear"
    location = f"{logged.artifact_location}/artifacts/linear"
    folder = Path(mlflow.artifacts.download_artifacts(artifact_uri=location, dst_path=str(settings.root / "dl")))
    assert sorted(p.name for p in folder.iterdir()) == ["config.json", "seed0.safetensors", "seed1.safetensors"]
    config = load_json(folder / "config.json")
    assert config["files"]["seed0.safetensors"]["model.config"] == {"width": 5}
    assert config["files"]["seed0.safetensors"]["model.class"].endswith(":Linear") and config["stage"] == "train"
    assert config["params"] == {"scale": "cpu", "seeds": [0, 1], "model.width": 5}
    # a child's Parquet table also as CSV (MLflow previews CSV); list columns are left to the Parquet file
    runs = [r for r in client.search_runs([tracker.experiment_id]) if r.data.tags.get("paperflows.stage") == "train"]
    [child] = [r for r in runs if "paperflows.seed" not in r.data.tags]
    # the per-seed curves: one run per seed under the stage's run, the seed out of the metric's name
    seeds = {r.data.tags["paperflows.seed"]: r for r in runs if "paperflows.seed" in r.data.tags}
    assert sorted(seeds) == ["0", "1"] and all(
        r.data.tags["mlflow.parentRunId"] == child.info.run_id for r in seeds.values()
    )
    assert seeds["1"].data.metrics == {"loss": 0.5} and not any("seed" in k for k in child.data.metrics)
    assert {a.path for a in client.list_artifacts(child.info.run_id, "tables")} == {
        "tables/curve.parquet",
        "tables/curve.csv",
    }
    csv_copy = Path(client.download_artifacts(child.info.run_id, "tables/curve.csv", str(settings.root / "dl")))
    assert csv_copy.read_text().splitlines()[:2] == ['"seed","loss"', "0,1"]
    # a second run is a second version
    execute(pipeline, params, settings, settings.runs("story") / "r2", entry="test", tracker=tracker)
    assert sorted(int(v.version) for v in client.search_model_versions("name = 'story-linear'")) == [1, 2]
    # PAPERFLOWS_MODEL_VERSIONS bounds the registry: the oldest versions go, an aliased one stays
    client.set_registered_model_alias("story-linear", "production", "1")
    kept_two = dataclasses.replace(settings, model_versions_kept=2)
    for run in ("r3", "r4"):
        execute(
            pipeline,
            params,
            kept_two,
            kept_two.runs("story") / run,
            entry="test",
            tracker=MlflowTracker(kept_two, "story"),
        )
    assert sorted(int(v.version) for v in client.search_model_versions("name = 'story-linear'")) == [1, 3, 4]


def test_dvc_stage_runs_are_grouped_under_one_parent(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DVC_EXP_NAME", "steps-up")
    pipeline = story_pipeline()
    params = StoryParams.model_validate({"seeds": [0, 1], "model": {"width": 3}})
    root = settings.workspace("story")
    for s in pipeline.stages:  # what `dvc repro` does: one process per stage, each spooling its run
        tracker = spool.SpoolTracker(settings, "story")
        ctx = StageContext(pipeline=pipeline, stage=s, params=params, root=root, tracker=tracker, progress=False)
        run_stage(ctx, None, run_tags(settings, "dvc", source=f"dvc.yaml:{pipeline.dvc_name(s)}"))
    assert spool.replay(settings, "story", pipeline, params) == 4  # two stage runs, two per-seed runs of train
    client = MlflowClient(settings.tracking_uri)
    experiment = client.get_experiment_by_name("story").experiment_id
    [parent] = _parents(client, experiment)
    children = [
        r for r in client.search_runs([experiment]) if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id
    ]
    assert sorted(r.info.run_name for r in children) == ["story.report", "story.train"]
    [train] = [r for r in children if r.info.run_name == "story.train"]
    seed_runs = [
        r for r in client.search_runs([experiment]) if r.data.tags.get("mlflow.parentRunId") == train.info.run_id
    ]
    assert sorted(r.data.tags["paperflows.seed"] for r in seed_runs) == ["0", "1"]
    assert parent.info.run_name.startswith("story · ") and parent.info.run_name.endswith("dvc exp steps-up")
    assert parent.info.status == "FINISHED" and parent.data.tags["dvc.exp_name"] == "steps-up"
    assert parent.data.tags["claims.held"] == "1/2" and parent.data.params["model.width"] == "3"
    assert client.search_model_versions("name = 'story-linear'")[0].run_id == parent.info.run_id


def test_progress_reaches_a_log_at_a_sensible_rate(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    from components.training import TrainConfig, fit, loop

    clock = iter(range(0, 10_000, 2))  # every call of the clock is two seconds later
    monkeypatch.setattr(loop.time, "perf_counter", lambda: float(next(clock)))
    model = torch.nn.Linear(2, 1)
    batches = lambda step, gen: (torch.ones(4, 2), torch.zeros(4, 1))  # noqa: E731
    with caplog.at_level(logging.INFO, logger="paperflows.progress"):
        fit(
            model,
            lambda m, b: ((m(b[0]) - b[1]) ** 2).mean(),
            batches,
            TrainConfig(steps=100, lr=0.1, seed=0, progress=False, log_every=10, desc="toy fit"),
        )
    lines = [r.getMessage() for r in caplog.records if r.name == "paperflows.progress"]
    assert 2 <= len(lines) <= 11 and lines[-1].startswith("toy fit: step 100/100 (100%), loss ")
    steps = [int(line.split("step ")[1].split("/")[0]) for line in lines]
    assert steps == sorted(set(steps)) and all(s % 10 == 0 for s in steps)


def test_stage_summary_line_names_metrics_and_the_mlflow_run() -> None:
    from paperflows.flows import stage_summary

    settings = Settings(root=Path("."), tracking_uri="sqlite:///x", artifact_root=Path("m"), prefect_home=Path("p"))
    url = mlflow_run_url(settings, "3", "abc")
    assert url == "http://127.0.0.1:5000/#/experiments/3/runs/abc?workflowType=machine_learning"
    line = stage_summary(
        "knots",
        {
            "stage": "finetune",
            "item": "rotate90",
            "seconds": 4.25,
            "final": {"lora/rotate90/seed0/loss": 0.1234},
            "metrics": {"acc": 0.9},
        },
        url,
    )
    assert line == (
        "knots.finetune[rotate90]: done in 4.2 s; final lora/rotate90/seed0/loss 0.1234; "
        f"metrics acc=0.9; MLflow run: {url}"
    )


def test_config_json_rebuilds_the_model(tmp_path: Path) -> None:
    path = save_model(Linear(LinearConfig(7)), tmp_path / "m.safetensors", {"seed": "0"})
    meta = safetensors_metadata(path)
    assert meta["model.class"] == f"{Linear.__module__}:Linear" and json.loads(meta["model.config"]) == {"width": 7}
    rebuilt = Linear(LinearConfig(**json.loads(meta["model.config"])))
    from safetensors.torch import load_file

    rebuilt.load_state_dict(load_file(str(path)))
    assert rebuilt.layer.in_features == 7 and meta["seed"] == "0"
