"""DVC stages record their MLflow runs and write them later: nothing is lost, order and times are kept."""

from __future__ import annotations

import sys
from pathlib import Path

from mlflow import MlflowClient

from paperflows import spool
from paperflows.settings import Settings


def _settings(root: Path) -> Settings:
    return Settings(
        root=root,
        tracking_uri=f"sqlite:///{root / 'mlflow.db'}",
        artifact_root=root / "mlruns",
        prefect_home=root / "prefect",
    )


def test_a_spooled_run_is_written_to_mlflow_with_its_params_metrics_artifacts_and_status(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    (tmp_path / "table.md").write_text("| a |\n")
    tracker = spool.SpoolTracker(settings, "toy")
    first = tracker.start("toy.make", {"paperflows.stage": "make"})
    tracker.log_params(first, {"model.width": 4})
    tracker.log_metrics(first, {"loss": 1.0}, step=1)
    tracker.log_metrics(first, {"loss": 0.5}, step=2)
    tracker.log_artifact(first, tmp_path / "table.md", "tables")
    tracker.end(first, ok=True)
    second = tracker.start("toy.score", {"paperflows.stage": "score"})
    tracker.end(second, ok=False)
    assert len(spool.pending(settings, "toy")) == 2

    assert spool.replay(settings, "toy") == 2
    assert spool.pending(settings, "toy") == [] and spool.replay(settings, "toy") == 0
    client = MlflowClient(settings.tracking_uri)
    runs = {r.info.run_name: r for r in client.search_runs([client.get_experiment_by_name("toy").experiment_id])}
    made, scored = runs["toy.make"], runs["toy.score"]
    assert made.info.status == "FINISHED" and scored.info.status == "FAILED"
    assert made.data.params == {"model.width": "4"} and made.data.tags["paperflows.stage"] == "make"
    history = client.get_metric_history(made.info.run_id, "loss")
    assert [(m.step, m.value) for m in history] == [(1, 1.0), (2, 0.5)]
    assert [a.path for a in client.list_artifacts(made.info.run_id, "tables")] == ["tables/table.md"]
    assert made.info.start_time <= made.info.end_time <= scored.info.start_time


def test_the_spool_tracker_does_not_import_mlflow(tmp_path: Path) -> None:
    import subprocess

    code = (
        "import sys; from pathlib import Path; from paperflows.spool import SpoolTracker; "
        "from paperflows.settings import Settings; "
        f"s = Settings(root=Path({str(tmp_path)!r}), tracking_uri='sqlite:///x', artifact_root=Path('m'), "
        "prefect_home=Path('p')); t = SpoolTracker(s, 'toy'); r = t.start('toy.a', {}); t.end(r, ok=True); "
        "assert 'mlflow' not in sys.modules, 'mlflow was imported'"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
