"""Which run the results come from: the record a DVC run writes, a stale record never paired with newer results
(the parameters dvc.lock holds for them instead), links to the MLflow and Prefect runs, the commit, and the short
history of run folders on the results page."""

from __future__ import annotations

import copy
import hashlib
import json
import os
from pathlib import Path

import pytest
import yaml

from components.io import load_json, save_json
from paperflows import provenance, spool
from paperflows.__main__ import main
from paperflows.contract import StageContext
from paperflows.engine import run_stage
from paperflows.params import read_params_file
from paperflows.results import run_history, run_source
from paperflows.settings import Settings, load_settings
from paperflows.tracking import run_tags
from tests.platform.test_results_page import Page, constructed_report, file_params, site, write_run  # noqa: F401
from tests.platform.test_tracking_story import StoryParams, story_pipeline


@pytest.fixture()
def story_settings(tmp_path: Path) -> Settings:
    (tmp_path / "params.yaml").write_text("story:\n  seeds: [0, 1]\n  model:\n    width: 3\n")
    return Settings(
        root=tmp_path,
        tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}",
        artifact_root=tmp_path / "mlruns",
        prefect_home=tmp_path / "prefect",
    )


def md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes(), usedforsecurity=False).hexdigest()


def page_text(path: Path) -> str:
    return " ".join(" ".join(Page(path.read_text()).text).split())


def write_lock(root: Path, slug: str, params: dict, report: Path) -> None:
    """A dvc.lock whose report stage of ``slug`` holds ``report`` and ran with ``params`` (whole groups)."""
    flat = {f"{slug}.{key}": value for key, value in params.items()}
    lock = {
        "schema": "2.0",
        "stages": {
            slug: {
                "cmd": f"paperflows stage {slug} report",
                "params": {"params.yaml": flat},
                "outs": [{"path": f"outputs/{slug}/report.json", "hash": "md5", "md5": md5(report), "size": 1}],
            }
        },
    }
    (root / "dvc.lock").write_text(yaml.safe_dump(lock))


# --------------------------------------------------------------------------------------------------
def test_a_dvc_run_writes_the_workspace_record_that_names_it(
    story_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = story_settings
    monkeypatch.setenv("DVC_EXP_NAME", "wider")
    pipeline = story_pipeline()
    params = StoryParams.model_validate({"seeds": [0, 1], "model": {"width": 3}})
    root = settings.workspace("story")
    root.mkdir(parents=True)
    save_json(
        {"entry": "prefect", "params": {"model": {"width": 9}}, "started": "2025-01-01T00:00:00+00:00"},
        root / "run.json",
    )
    for stage in pipeline.stages:  # as `dvc exp run` does: one process per stage, each spooling its MLflow run
        ctx = StageContext(
            pipeline=pipeline, stage=stage, params=params, root=root, tracker=spool.SpoolTracker(settings, "story")
        )
        run_stage(ctx, None, run_tags(settings, "dvc", source=f"dvc.yaml:{pipeline.dvc_name(stage)}"))
    spool.replay(settings, "story", pipeline, params)

    record = load_json(root / "run.json")
    assert record["entry"] == "dvc" and record["dvc_exp_name"] == "wider"
    assert record["dvc_command"] == "dvc exp run (wider)" and record["stages_ran"] == ["report", "train"]
    assert record["params"]["model"]["width"] == 3 and record["report_md5"] == md5(root / "report.json")
    assert record["mlflow_run_id"] and record["mlflow_experiment_id"] and "seconds" in record  # every stage ran
    source = run_source(settings, "story", root / "report.json")
    assert source.unmatched is None and source.how == "dvc exp run (wider)" and source.params == "params.yaml values"
    assert source.mlflow_url is not None and f"/runs/{record['mlflow_run_id']}" in source.mlflow_url
    assert source.prefect_url is None and source.commit == record["commit"]


def test_results_rewritten_after_a_run_are_not_shown_under_its_record(site: Path) -> None:  # noqa: F811
    """The review's case: `dvc exp run -S ...` rewrote the workspace's results; run.json still names an older run."""
    workspace = site / "outputs" / "knots"
    record = load_json(workspace / "run.json")
    old = copy.deepcopy(record["params"])
    old["lora"]["r"] = old["lora"]["r"] * 2  # the Prefect run that wrote the record ran another value
    save_json({**record, "params": old, "report_md5": md5(workspace / "report.json")}, workspace / "run.json")
    constructed_report("knots", claim_text="rewritten by dvc exp run").save(workspace / "report.json")
    settings = load_settings()

    source = run_source(settings, "knots", workspace / "report.json")  # no dvc.lock witness: unknown, not the record
    assert source.unmatched == "the results were rewritten after this run" and "unknown" in source.params
    assert f"lora.r={old['lora']['r']}" not in source.params

    experiment = file_params(site, "knots")
    experiment["lora"]["r"] = experiment["lora"]["r"] + 4  # what the experiment ran, as dvc.lock records it
    write_lock(site, "knots", experiment, workspace / "report.json")
    source = run_source(settings, "knots", workspace / "report.json")
    filed = read_params_file(site / "params.yaml")["knots"]["lora"]["r"]
    assert source.entry == "dvc" and source.unmatched
    assert source.params == f"from dvc.lock, differing from params.yaml: lora.r={filed + 4} (params.yaml: {filed})"
    assert main(["report", "--html", str(site / "p.html")]) == 0
    text = page_text(site / "p.html")
    assert f"lora.r={filed + 4} (params.yaml: {filed})" in text and "were not written by the run" in text
    assert f"params.yaml changed since this run: lora.r={old['lora']['r']}" not in text


def test_an_older_record_without_a_digest_is_checked_against_dvc_lock(site: Path) -> None:  # noqa: F811
    workspace = site / "outputs" / "knots"
    settings = load_settings()
    assert run_source(settings, "knots", workspace / "report.json").params == "params.yaml values"  # no witness
    write_lock(site, "knots", file_params(site, "knots"), workspace / "report.json")
    assert run_source(settings, "knots", workspace / "report.json").unmatched is None  # the lock agrees
    other = file_params(site, "knots")
    other["lora"]["r"] += 1
    write_lock(site, "knots", other, workspace / "report.json")
    source = run_source(settings, "knots", workspace / "report.json")
    assert source.unmatched == "dvc.lock holds these results with other parameter values than this run"


def test_a_run_in_progress_does_not_claim_the_previous_results(site: Path) -> None:  # noqa: F811
    workspace = site / "outputs" / "knots"
    report = workspace / "report.json"
    os.utime(report, (1_700_000_000, 1_700_000_000))  # written before the new run started
    save_json(
        {"entry": "prefect", "params": file_params(site, "knots"), "started": "2025-05-01T10:00:00+00:00"},
        workspace / "run.json",
    )
    source = run_source(load_settings(), "knots", report)
    assert source.unmatched == "a run started 2025-05-01 10:00 UTC has not finished"


def test_the_page_links_the_runs_gives_the_commit_and_a_history(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    monkeypatch.setenv("PAPERFLOWS_PREFECT_UI_URL", "http://127.0.0.1:4300")
    workspace = site / "outputs" / "knots"
    record = load_json(workspace / "run.json")
    commit = "0123456789abcdef0123456789abcdef01234567-dirty"
    save_json(
        {
            **record,
            "commit": commit,
            "finished": "2025-05-01T10:05:00+00:00",
            "mlflow_run_id": "r" * 32,
            "mlflow_experiment_id": "7",
            "prefect_flow_run_id": "f-1",
            "prefect_flow_run_url": "http://127.0.0.1:39999/runs/flow-run/f-1",  # a temporary server: rebuilt
            "report_md5": md5(workspace / "report.json"),
        },
        workspace / "run.json",
    )
    for index in range(6):  # six edited runs of knots: the history keeps the newest five folders
        folder = write_run(
            site / "runs" / "knots" / f"2025050{index}-run", constructed_report("knots"), record["params"]
        )
        os.utime(folder / "report.json", (1_746_000_000 + index, 1_746_000_000 + index))
    os.utime(workspace / "report.json", (1_746_000_100, 1_746_000_100))
    settings = load_settings()
    history = run_history(settings, "knots")
    assert [h.source.folder for h in history] == [
        "outputs/knots",
        *(f"runs/knots/2025050{i}-run" for i in (5, 4, 3, 2)),
    ]
    assert history[0].headline == (("beats_baseline", "holds"),) and history[0].held == (1, 2)

    out = site / "page.html"
    assert main(["report", "--html", str(out)]) == 0
    text = out.read_text()
    mlflow = f"http://127.0.0.1:5000/#/experiments/7/runs/{'r' * 32}?workflowType=machine_learning"
    assert f'href="{mlflow}"' in text and 'href="http://127.0.0.1:4300/runs/flow-run/f-1"' in text
    words = page_text(out)
    assert "commit 0123456789-dirty" in words and "finished 2025-05-01 10:05 UTC" in words
    assert "Runs (the newest 5 run folders)" in words and "runs/knots/20250500-run" not in words


def test_the_record_of_a_prefect_run_gets_the_digest_and_links(tmp_path: Path) -> None:
    (tmp_path / "report.json").write_text(json.dumps({"claims": []}))
    save_json({"entry": "prefect", "params": {}}, tmp_path / "run.json")
    stamped = provenance.stamp(tmp_path, mlflow_experiment_id="3", prefect_flow_run_id="", prefect_flow_run_url=None)
    assert stamped == load_json(tmp_path / "run.json")
    assert stamped["report_md5"] == md5(tmp_path / "report.json") and stamped["mlflow_experiment_id"] == "3"
    assert "prefect_flow_run_id" not in stamped  # empty values are not recorded
    assert provenance.stamp(tmp_path / "missing") is None


def test_a_partial_rerun_keeps_the_cost_of_the_last_full_run(tmp_path: Path) -> None:
    from paperflows.engine import _last_full_run

    record = tmp_path / "run.json"
    assert _last_full_run(record, "abc") is None  # no record yet
    for text in ("[1, 2]", "not json", '{"params_digest": "abc"}', '{"params_digest": "xyz", "seconds": 9.5}'):
        record.write_text(text)
        assert _last_full_run(record, "abc") is None, text
    record.write_text('{"params_digest": "abc", "seconds": 61.6}')
    assert _last_full_run(record, "abc") == 61.6
