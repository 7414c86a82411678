"""The stage contract on a toy two-stage pipeline: declarations, MLflow runs, input/output checks."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from mlflow import MlflowClient
from pydantic import Field

from components.io import load_json, save_json
from components.metrics.stats import Estimate
from paperflows import dvcgen
from paperflows.claims import ClaimSpec, decide, superiority
from paperflows.contract import Pipeline, Plot, Stage, StageContext
from paperflows.engine import execute, run_stage
from paperflows.errors import StageInputError, StageOutputError
from paperflows.paper import Paper
from paperflows.params import ParamsError, PipelineParams, Section, load_section, validate
from paperflows.report import Report
from paperflows.settings import Settings
from paperflows.tracking import MlflowTracker


class ToyModel(Section):
    width: int = Field(4, ge=1, le=64, description="width")


class ToyParams(PipelineParams):
    model: ToyModel = Field(default_factory=ToyModel, description="model")
    rate: float = Field(0.5, gt=0, le=1, description="rate")
    PAPER_SCALE = {"model.width": 32, "rate": 0.9}


def _make(ctx: StageContext) -> None:
    """Write numbers."""
    save_json({"values": [ctx.params.rate * i for i in range(ctx.params.model.width)]}, ctx.path("numbers.json"))
    ctx.log_metrics({"made": 1.0}, step=1)


def _score(ctx: StageContext) -> None:
    """Score numbers and report."""
    values = load_json(ctx.path("numbers.json"))["values"]
    total = sum(values)
    save_json({"total": total}, ctx.path("metrics.json"))
    (ctx.path("curve.csv")).write_text("step,value\n" + "\n".join(f"{i},{v}" for i, v in enumerate(values)))
    Report(
        slug="toy",
        title="Toy",
        columns=["method", "total"],
        rows=[{"method": "toy", "total": total}],
        claims=[
            decide(
                ClaimSpec(
                    "total_positive",
                    "total positive",
                    "total",
                    superiority(1.0, "toy"),
                    headline=True,
                    deterministic=True,
                ),
                Estimate.exact(total),
                numbers={"total": total},
            )
        ],
    ).save(ctx.path("report.json"))


def toy_pipeline(score=_score) -> Pipeline:
    return Pipeline(
        paper=Paper("toy", "Toy", "0000.00000", "total positive"),
        params_model=ToyParams,
        stages=(
            Stage("make", _make, params=("model", "rate"), outs=("numbers.json",)),
            Stage(
                "score",
                score,
                deps=("numbers.json",),
                outs=("report.json", "report.md"),
                metrics=("metrics.json",),
                plots=(Plot("curve.csv", x="step", y="value"),),
            ),
        ),
    )


@pytest.fixture()
def settings(tmp_path: Path) -> Settings:
    return Settings(
        root=tmp_path,
        tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}",
        artifact_root=tmp_path / "mlruns",
        prefect_home=tmp_path / "prefect",
    )


def test_execute_logs_parent_and_child_runs(settings: Settings) -> None:
    pipeline = toy_pipeline()
    tracker = MlflowTracker(settings, "toy")
    summary = execute(pipeline, ToyParams(), settings, settings.workspace("toy"), entry="test", tracker=tracker)
    assert summary.report["claims"][0]["verdict"] == "holds"
    client = MlflowClient(settings.tracking_uri)
    runs = client.search_runs([tracker.experiment_id])
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == summary.run_id]
    assert len(parents) == 1 and {r.data.tags["paperflows.stage"] for r in children} == {"make", "score"}
    assert parents[0].data.params["model.width"] == "4"
    assert parents[0].data.metrics["score/total"] == pytest.approx(0.5 * 6)
    assert all(r.info.status == "FINISHED" for r in runs)
    score_child = next(r for r in children if r.data.tags["paperflows.stage"] == "score")
    logged = {a.path for a in client.list_artifacts(score_child.info.run_id)}
    assert {"metrics", "plots", "tables"} <= logged
    assert len(score_child.data.tags["deps.numbers.json"]) == 16  # content hash of the input it read


def test_missing_input_fails_before_the_stage_runs(settings: Settings) -> None:
    pipeline = toy_pipeline()
    ctx = StageContext(
        pipeline=pipeline, stage=pipeline.stage("score"), params=ToyParams(), root=settings.workspace("toy")
    )
    with pytest.raises(StageInputError, match="numbers.json.*written by stage 'make'"):
        run_stage(ctx)
    assert not (settings.workspace("toy") / "metrics.json").exists()


def test_stage_that_skips_a_declared_output_fails_and_marks_run_failed(settings: Settings) -> None:
    def lazy(ctx: StageContext) -> None:
        save_json({"total": 1}, ctx.path("metrics.json"))

    pipeline = toy_pipeline(score=lazy)
    tracker = MlflowTracker(settings, "toy")
    with pytest.raises(StageOutputError, match="report.json"):
        execute(pipeline, ToyParams(), settings, settings.workspace("toy"), entry="test", tracker=tracker)
    statuses = {r.info.status for r in MlflowClient(settings.tracking_uri).search_runs([tracker.experiment_id])}
    assert statuses == {"FINISHED", "FAILED"}  # make finished; score and the parent failed


def test_undeclared_path_is_refused(settings: Settings) -> None:
    pipeline = toy_pipeline()
    ctx = StageContext(pipeline=pipeline, stage=pipeline.stage("make"), params=ToyParams(), root=settings.root)
    with pytest.raises(KeyError, match="not declared"):
        ctx.path("elsewhere.json")


def test_declaration_errors_are_caught_at_definition() -> None:
    with pytest.raises(ValueError, match="not written by an earlier stage"):
        Pipeline(
            paper=Paper("bad", "", "", ""),
            params_model=ToyParams,
            stages=(Stage("a", _score, deps=("numbers.json",), outs=("report.json",)),),
        )
    with pytest.raises(ValueError, match=r"bad\.a: params key 'nope' is not a key of ToyParams"):
        Pipeline(
            paper=Paper("bad", "", "", ""),
            params_model=ToyParams,
            stages=(Stage("a", _make, params=("nope",), outs=("report.json",)),),
        )


def test_dvc_entry_comes_from_the_declaration() -> None:
    entries = dvcgen.build([toy_pipeline()])["stages"]
    assert list(entries) == ["toy-make", "toy"]
    score = entries["toy"]
    assert score["cmd"] == "paperflows stage toy score"
    # the toy stage uses components.io (derived from its code) and reads the first stage's output
    assert "outputs/toy/numbers.json" in score["deps"] and "components/io.py" in score["deps"]
    assert "paperflows/seeds.py" in score["deps"]  # the engine seeds every stage from its name
    assert score["params"] == ["toy.scale"]
    # metrics are cached like every output, so `dvc metrics diff` / `dvc exp show` find them for any commit
    assert score["metrics"] == ["outputs/toy/metrics.json"]
    assert score["plots"] == [{"outputs/toy/curve.csv": {"x": "step", "y": "value"}}]
    assert entries["toy-make"]["params"] == ["toy.scale", "toy.model", "toy.rate"]


# params deps at key level ------------------------------------------------------------------------
def _keyed_pipeline(**make: object) -> Pipeline:
    return Pipeline(
        paper=Paper("toy", "Toy", "0000.00000", "total positive"),
        params_model=ToyParams,
        stages=(
            Stage("make", _make, **{"params": ("model.width", "rate"), "outs": ("numbers.json",), **make}),
            Stage(
                "score",
                _score,
                deps=("numbers.json",),
                outs=("report.json", "report.md"),
                metrics=("metrics.json",),
                plots=(Plot("curve.csv", x="step", y="value"),),
            ),
        ),
    )


def test_a_stage_may_depend_on_single_keys_and_dvc_lists_them() -> None:
    pipeline = _keyed_pipeline()
    make = pipeline.stage("make")
    assert pipeline.stage_params(make) == ("scale", "model.width", "rate")
    assert dvcgen.build([pipeline])["stages"]["toy-make"]["params"] == ["toy.scale", "toy.model.width", "toy.rate"]
    assert pipeline.stage_param_values(make, ToyParams(rate=0.25)) == {"scale": "cpu", "model.width": 4, "rate": 0.25}
    # a group is flattened to its keys
    grouped = toy_pipeline()
    assert grouped.stage_param_values(grouped.stage("make"), ToyParams()) == {
        "scale": "cpu",
        "model.width": 4,
        "rate": 0.5,
    }


@pytest.mark.parametrize(
    "keys, message",
    [
        (("model.widht",), r"toy\.make: params key 'model\.widht' is not a key of ToyParams .*known keys here: width"),
        (("rate.value",), r"toy\.make: params key 'rate\.value' is not a key of ToyParams .*no sub-keys"),
        (("model", "model.width"), r"toy\.make: params key 'model\.width' is already covered by 'model'"),
    ],
)
def test_a_dotted_key_that_the_params_model_lacks_is_refused_at_definition(keys: tuple[str, ...], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        _keyed_pipeline(params=keys)


def test_the_stage_run_logs_exactly_its_declared_keys(settings: Settings) -> None:
    pipeline = _keyed_pipeline()
    tracker = MlflowTracker(settings, "toy")
    summary = execute(pipeline, ToyParams(rate=0.25), settings, settings.root / "run", entry="test", tracker=tracker)
    client = MlflowClient(settings.tracking_uri)
    children = {
        r.data.tags["paperflows.stage"]: r
        for r in client.search_runs([tracker.experiment_id], f"tags.mlflow.parentRunId = '{summary.run_id}'")
    }
    assert children["make"].data.params == {"scale": "cpu", "model.width": "4", "rate": "0.25"}
    assert children["score"].data.params == {"scale": "cpu"}


def test_data_files_are_checked_for_the_stages_whose_keys_select_them(tmp_path: Path) -> None:
    from typing import Annotated

    from paperflows.params import DataFile, check_data_files

    def must_say_ok(path: Path) -> None:
        if path.read_text() != "ok":
            raise ValueError("does not say ok")

    class Source(Section):
        path: Annotated[str | None, DataFile(must_say_ok, description="greeting")] = Field(None, description="a file")
        n: int = Field(1, description="rows")

    class WithFile(PipelineParams):
        data: Source = Field(default_factory=Source, description="data")

    (tmp_path / "bad.txt").write_text("no")
    params = WithFile(data=Source(path="bad.txt"))
    for groups in (None, ("data",), ("data.path",)):
        with pytest.raises(ParamsError, match=r"toy\.data\.path: .*bad\.txt is not a valid greeting: does not say ok"):
            check_data_files(params, tmp_path, "toy", groups=groups)
    for groups in ((), ("data.n",), ("seeds",)):
        check_data_files(params, tmp_path, "toy", groups=groups)  # the stage does not read the file


def test_a_fan_out_may_run_over_a_declared_dotted_key() -> None:
    class Nested(Section):
        arms: list[str] = Field(default_factory=lambda: ["a", "b"], description="arms")
        size: int = Field(1, description="size")

    class NestedParams(PipelineParams):
        pick: Nested = Field(default_factory=Nested, description="pick")

    def build(params: tuple[str, ...]) -> Pipeline:
        return Pipeline(
            paper=Paper("fan", "Fan", "0", "-"),
            params_model=NestedParams,
            stages=(
                Stage("draw", _draw, params=params, outs=("draws/",), fan_out="pick.arms"),
                Stage("collect", _collect, deps=("draws/",), outs=("report.json", "report.md")),
            ),
        )

    assert build(("pick.arms",)).items(build(("pick",)).stages[0], NestedParams()) == ["a", "b"]
    with pytest.raises(ValueError, match=r"fan_out 'pick\.arms' is not in the stage's params \('pick\.size',\)"):
        build(("pick.size",))


# params ------------------------------------------------------------------------------------------
def test_unknown_and_bad_params_name_the_key(tmp_path: Path) -> None:
    with pytest.raises(ParamsError, match=r"toy\.model\.widht"):
        validate(ToyParams, {"model": {"widht": 3}}, "toy")
    with pytest.raises(ParamsError, match=r"toy\.rate.*less than or equal to 1"):
        validate(ToyParams, {"rate": 3}, "toy")
    with pytest.raises(ParamsError, match=r"toy\.model\.width.*integer"):
        validate(ToyParams, {"model": {"width": "wide"}}, "toy")
    params_file = tmp_path / "params.yaml"
    params_file.write_text("toy:\n  rate: 0.25\n")
    with pytest.raises(ParamsError, match=r"toy\.model\.depth: unknown parameter"):
        load_section(ToyParams, "toy", params_file, [("model.depth", 2)])
    assert load_section(ToyParams, "toy", params_file, [("model.width", 8)]).model.width == 8


def test_paper_scale_switches_defaults_but_keeps_explicit_values() -> None:
    paper = validate(ToyParams, {"scale": "paper"}, "toy")
    assert (paper.model.width, paper.rate) == (32, 0.9)
    mixed = validate(ToyParams, {"scale": "paper", "rate": 0.1}, "toy")
    assert (mixed.model.width, mixed.rate) == (32, 0.1)
    assert validate(ToyParams, {}, "toy").model.width == 4


# --------------------------------------------------------------------------------------------------
# fan-out stages
# --------------------------------------------------------------------------------------------------
class FanParams(PipelineParams):
    arms: list[str] = Field(default_factory=lambda: ["a", "b", "c"], description="arms")


def _draw(ctx: StageContext) -> None:
    """One arm: a random draw, seeded by the runtime from the arm's own name."""
    import torch

    save_json({"arm": ctx.item, "draw": torch.rand(()).item()}, ctx.item_dir("draws/") / "draw.json")


def _collect(ctx: StageContext) -> None:
    """Collect the arms."""
    draws = {p.parent.name: load_json(p)["draw"] for p in sorted(ctx.path("draws/").glob("*/draw.json"))}
    Report(
        slug="fan",
        title="Fan",
        columns=["arm", "draw"],
        rows=[{"arm": k, "draw": v} for k, v in draws.items()],
        claims=[],
    ).save(ctx.path("report.json"))


def fan_pipeline() -> Pipeline:
    return Pipeline(
        paper=Paper("fan", "Fan", "0000.00000", "-"),
        params_model=FanParams,
        stages=(
            Stage("draw", _draw, params=("arms",), outs=("draws/",), fan_out="arms"),
            Stage("collect", _collect, deps=("draws/",), outs=("report.json", "report.md")),
        ),
    )


def test_fan_out_items_are_independent_of_order_and_logged_one_run_each(settings: Settings) -> None:
    pipeline = fan_pipeline()
    tracker = MlflowTracker(settings, "fan")
    summary = execute(pipeline, FanParams(), settings, settings.root / "all", entry="test", tracker=tracker)
    draws = {r["arm"]: r["draw"] for r in summary.report["rows"]}
    assert sorted(draws) == ["a", "b", "c"] and len(set(draws.values())) == 3
    assert [r["item"] for r in summary.stages[0]["items"]] == ["a", "b", "c"]
    # one arm alone, after something else consumed the RNG, draws the same number
    import torch

    torch.rand(1000)
    ctx = StageContext(
        pipeline=pipeline, stage=pipeline.stages[0], params=FanParams(arms=["b"]), root=settings.root / "one"
    )
    run_stage(ctx)
    assert load_json(settings.root / "one" / "draws" / "b" / "draw.json")["draw"] == draws["b"]
    client = MlflowClient(settings.tracking_uri)
    runs = client.search_runs([tracker.experiment_id])
    items = sorted(r.data.tags.get("paperflows.item", "") for r in runs if r.info.run_name.startswith("fan.draw"))
    assert items == ["a", "b", "c"]


def test_fan_out_declarations_are_checked() -> None:
    with pytest.raises(ValueError, match="not in the stage's params"):
        Pipeline(
            paper=Paper("fan", "Fan", "0", "-"),
            params_model=FanParams,
            stages=(Stage("draw", _draw, outs=("draws/", "report.json"), fan_out="arms"),),
        )
    with pytest.raises(ValueError, match="declares only outs folders"):
        Pipeline(
            paper=Paper("fan", "Fan", "0", "-"),
            params_model=FanParams,
            stages=(Stage("draw", _draw, params=("arms",), outs=("draws/", "report.json"), fan_out="arms"),),
        )


def test_fan_out_item_missing_its_folder_is_an_output_error(settings: Settings) -> None:
    def lazy(ctx: StageContext) -> None:
        """Writes only arm a."""
        if ctx.item == "a":
            save_json({"x": 1}, ctx.item_dir("draws/") / "x.json")

    pipeline = Pipeline(
        paper=Paper("fan", "Fan", "0", "-"),
        params_model=FanParams,
        stages=(
            Stage("draw", lazy, params=("arms",), outs=("draws/",), fan_out="arms"),
            Stage("collect", _collect, deps=("draws/",), outs=("report.json", "report.md")),
        ),
    )
    ctx = StageContext(pipeline=pipeline, stage=pipeline.stages[0], params=FanParams(), root=settings.root)
    with pytest.raises(StageOutputError, match=r"draws/b/"):
        run_stage(ctx)


def _versioned(version: int) -> Callable[[StageContext], None]:
    def draw(ctx: StageContext) -> None:
        """Write the arm made at ``version``; arm 'b' of version 2 is stopped mid-stage (a kill)."""
        if version == 2 and ctx.item == "b":
            raise KeyboardInterrupt
        save_json({"arm": ctx.item, "version": version}, ctx.item_dir("draws/") / "draw.json")

    return draw


def _versions(folder: Path) -> dict[str, int]:
    return {p.parent.name: load_json(p)["version"] for p in sorted(folder.glob("*/draw.json"))}


def test_a_fan_out_stopped_between_items_leaves_the_previous_set_whole(settings: Settings) -> None:
    def pipeline(version: int) -> Pipeline:
        return Pipeline(
            paper=Paper("fan", "Fan", "0", "-"),
            params_model=FanParams,
            stages=(
                Stage("draw", _versioned(version), params=("arms",), outs=("draws/",), fan_out="arms"),
                Stage("collect", _collect, deps=("draws/",), outs=("report.json", "report.md")),
            ),
        )

    def run(version: int, arms: list[str]) -> None:
        pipe = pipeline(version)
        run_stage(StageContext(pipeline=pipe, stage=pipe.stages[0], params=FanParams(arms=arms), root=settings.root))

    run(1, ["a", "b", "c"])
    assert _versions(settings.root / "draws") == {"a": 1, "b": 1, "c": 1}
    with pytest.raises(KeyboardInterrupt):  # 'a' is redone at version 2, then the stage is stopped
        run(2, ["a", "b", "c"])
    # the declared folder still holds the complete version-1 set: no mix of 'a' at 2 with 'b', 'c' at 1
    assert _versions(settings.root / "draws") == {"a": 1, "b": 1, "c": 1}
    # the next attempt drops the stopped attempt's items and swaps in a complete set, without stale arms
    run(3, ["a", "c"])
    assert _versions(settings.root / "draws") == {"a": 3, "c": 3}
    assert sorted(p.name for p in settings.root.iterdir() if p.name.startswith("draws")) == ["draws"]


# --------------------------------------------------------------------------------------------------
# a stopped process leaves no run RUNNING
# --------------------------------------------------------------------------------------------------
SLOW_RUN = '''
import sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[2])
from paperflows.paper import Paper
from paperflows.params import PipelineParams
from paperflows.contract import Pipeline, Stage
from paperflows.engine import execute
from paperflows.settings import Settings
from paperflows.tracking import MlflowTracker

def wait(ctx):
    """Signal readiness, then work for a long time."""
    Path(sys.argv[1], "started").write_text("1")
    time.sleep(120)

root = Path(sys.argv[1])
settings = Settings(root=root, tracking_uri=f"sqlite:///{root / 'mlflow.db'}", artifact_root=root / "mlruns",
                    prefect_home=root / "prefect")
pipeline = Pipeline(paper=Paper("slow", "Slow", "0", "-"), params_model=PipelineParams,
                    stages=(Stage("wait", wait, outs=("report.json",)),))
execute(pipeline, PipelineParams(), settings, root / "out", entry="test", tracker=MlflowTracker(settings, "slow"))
'''


def test_sigterm_ends_the_mlflow_runs_as_killed(tmp_path: Path) -> None:
    import signal
    import subprocess
    import sys
    import time

    from tests.conftest import REPO

    script = tmp_path / "slow_run.py"
    script.write_text(SLOW_RUN)
    proc = subprocess.Popen([sys.executable, str(script), str(tmp_path), str(REPO)])
    try:
        deadline = time.monotonic() + 120
        while not (tmp_path / "started").exists():
            assert proc.poll() is None and time.monotonic() < deadline, "the run did not start"
            time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) != 0
    finally:
        if proc.poll() is None:
            proc.kill()
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name("slow").experiment_id])
    assert sorted(r.info.run_name for r in runs) == ["slow", "slow.wait"]
    assert {r.info.status for r in runs} == {"KILLED"}


def _folder_pipeline(write: Callable[[StageContext], None]) -> Pipeline:
    return Pipeline(
        paper=Paper("toy", "Toy", "0000.00000", "total positive"),
        params_model=ToyParams,
        stages=(Stage("models", write, params=("model",), outs=("models/",)), *toy_pipeline().stages),
    )


def test_a_stage_writes_its_output_folders_from_empty_and_a_failure_keeps_the_old_ones(settings: Settings) -> None:
    """Files an earlier run with other values left in an output folder do not stay beside the new ones (as
    ``dvc repro`` removes outputs first); a stage that fails gives the earlier folder back whole."""
    root = settings.workspace("toy")

    def write(ctx: StageContext) -> None:
        for i in range(ctx.params.model.width):
            (ctx.path("models/") / f"m{i}.bin").write_bytes(b"w")

    def fail(ctx: StageContext) -> None:
        (ctx.path("models/") / "half.bin").write_bytes(b"h")
        raise RuntimeError("stopped half-way")

    def run(fn: Callable[[StageContext], None], width: int) -> None:
        pipeline = _folder_pipeline(fn)
        params = ToyParams(model=ToyModel(width=width))
        run_stage(StageContext(pipeline=pipeline, stage=pipeline.stage("models"), params=params, root=root))

    (root / "models").mkdir(parents=True)
    run(write, 3)
    run(write, 2)
    assert sorted(p.name for p in (root / "models").iterdir()) == ["m0.bin", "m1.bin"]
    with pytest.raises(RuntimeError, match="half-way"):
        run(fail, 2)
    assert sorted(p.name for p in (root / "models").iterdir()) == ["m0.bin", "m1.bin"]
    assert not (root / "models.old").exists()
