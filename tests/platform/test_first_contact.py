"""What a newcomer meets first: the paper's title on its MLflow experiment, `paperflows ui`, the Prefect form's
labels and path fields, a refusal in one line, a report artifact that carries its figures, a readable
`paperflows report` in a terminal, log lines that do not run into progress bars, no telemetry notice."""

from __future__ import annotations

import base64
import fcntl
import io
import json
import os
import pty
import re
import signal
import socket
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path
from typing import Annotated

import pytest
from pydantic import Field

from paperflows import registry
from paperflows.__main__ import build_parser, main
from paperflows.completion import complete
from paperflows.inline_figures import embed_figures, png_within
from paperflows.params import DataFile, PipelineParams, Section, field_title, form_schema, form_values, load_section
from paperflows.settings import Settings, pin_environment
from paperflows.termtable import text_table, wrap_cell
from tests.conftest import REPO
from tests.platform.test_deploy import alive, free_port, healthy, tree, wait_for
from tests.platform.test_results_page import png, site  # noqa: F401


# --------------------------------------------------------------------------------------------------
# MLflow: the experiment is the paper
# --------------------------------------------------------------------------------------------------
def test_each_experiment_carries_its_papers_title(tmp_path: Path) -> None:
    from mlflow import MlflowClient

    from paperflows.tracking import MlflowTracker

    settings = Settings(
        root=tmp_path,
        tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}",
        artifact_root=tmp_path / "mlruns",
        prefect_home=tmp_path / "prefect",
    )
    client = MlflowClient(settings.tracking_uri)
    client.create_experiment("knots")  # made before experiments carried their paper: described on next use
    for slug in ("csa", "knots"):
        MlflowTracker(settings, slug)
        tags = client.get_experiment_by_name(slug).tags
        paper = registry.paper(slug)
        assert tags["paper.title"] == paper.title and tags["paper.arxiv"] == paper.arxiv
        assert tags["mlflow.note.content"].startswith(f"**{paper.title}** ([arXiv {paper.arxiv}]")
        assert paper.claim in tags["mlflow.note.content"]


# --------------------------------------------------------------------------------------------------
# the Prefect form
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "label"),
    [
        ("batch_size", "Batch size"),
        ("n_heads", "Number of heads"),
        ("lr", "Learning rate"),
        ("lora_r", "LoRA r"),
        ("d_model", "Model width"),
        ("emsize", "Embedding size"),
        ("knn_k", "kNN k"),
        ("so3_steps", "SO(3) steps"),
        ("csv_path", "CSV path"),
        ("max_new_tokens", "Maximum new tokens"),
        ("C", "C"),
        ("steps", "Steps"),
    ],
)
def test_form_labels_read_as_words(name: str, label: str) -> None:
    assert field_title(name) == label


def test_every_label_of_every_form_is_words() -> None:
    for slug in registry.slugs():
        schema = registry.params_model(slug).model_json_schema()
        for node in [schema, *schema.get("$defs", {}).values()]:
            for name, prop in node.get("properties", {}).items():
                title = prop.get("title", "")
                assert title and "_" not in title, (slug, name, title)
                words = title.split()
                assert all(not w[:1].isupper() or w.isupper() or not w[1:].islower() for w in words[1:]), (slug, title)


class _PathData(Section):
    path: Annotated[str | None, DataFile(lambda p: None, description="a table")] = Field(None, description="A table.")
    rows: int | None = Field(None, ge=1, description="Rows.")


class _PathParams(PipelineParams):
    data: _PathData = Field(default_factory=_PathData, description="Data.")


def test_a_path_field_is_a_plain_text_box_and_empty_means_no_file() -> None:
    from prefect.utilities.schema_tools.validation import validate

    schema = _PathParams.model_json_schema(ref_template="#/definitions/{model}")
    schema = {
        "type": "object",
        "properties": {"params": {"$ref": "#/definitions/_PathParams", "default": _PathParams().model_dump()}},
        "definitions": schema.pop("$defs") | {"_PathParams": schema},
    }
    form = form_schema(schema, _PathParams)
    prop = form["definitions"]["_PathData"]["properties"]["path"]
    assert prop["type"] == "string" and "anyOf" not in prop and "default" not in prop
    assert prop["title"] == "Path" and prop["description"].endswith("Leave empty for the pipeline's own offline data.")
    assert "anyOf" in form["definitions"]["_PathData"]["properties"]["rows"]  # other nullable fields unchanged
    assert form["properties"]["params"]["default"]["data"]["path"] == ""
    assert schema["definitions"]["_PathData"]["properties"]["path"].get("anyOf")  # the input is not modified
    # Prefect's server: null (params.yaml, --param) and "" (the empty box) pass, a number does not
    for value in (None, "", "data/x.csv"):
        assert validate({"params": {"data": {"path": value}}}, form, ignore_required=True) == [], value
    assert validate({"params": {"data": {"path": 3}}}, form, ignore_required=True)
    # the model: an empty box is no file, and at the params.yaml values
    assert _PathParams.model_validate({"data": {"path": ""}}) == _PathParams()
    assert form_values(_PathParams().model_dump(mode="json"), _PathParams)["data"] == {"path": "", "rows": None}


def test_an_empty_path_from_the_command_line_is_no_file(tmp_path: Path) -> None:
    (tmp_path / "params.yaml").write_text("mothernet: {}\n")
    model = registry.params_model("mothernet")
    assert load_section(model, "mothernet", tmp_path / "params.yaml", [("data.csv_path", "")]).data.csv_path is None


def test_a_refusal_is_one_line_and_its_engine_traceback_is_dropped() -> None:
    import logging

    pin_environment()
    from prefect.exceptions import FailedRun

    from paperflows import flows
    from paperflows.params import ParamsError

    pipeline = registry.get("nsot")
    params = load_section(pipeline.params_model, "nsot", REPO / "params.yaml").model_dump(mode="json")
    params["model"]["n_heads"] = 3
    with pytest.raises(ParamsError) as refused:
        flows.checked_params(pipeline, params)
    line = flows.one_line(refused.value)
    assert line == f"nsot.model: n_heads (3) must divide d_model ({params['model']['d_model']})"
    assert flows.checked_params(pipeline, {"data": {"pc15k_root": ""}}).data.pc15k_root is None

    quiet = flows._RefusalTraceback(line)

    def record(exc: BaseException) -> logging.LogRecord:
        return logging.LogRecord("prefect.flow_runs", logging.ERROR, __file__, 1, "x", (), (type(exc), exc, None))

    assert not quiet.filter(record(FailedRun(line)))
    assert quiet.filter(record(FailedRun("another failure"))) and quiet.filter(record(ValueError(line)))


# --------------------------------------------------------------------------------------------------
# the report artifact carries its figures
# --------------------------------------------------------------------------------------------------
def _noise_png(path: Path, size: int) -> Path:
    """A PNG that does not compress (random pixels): large on disk."""
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    Image.frombytes("RGB", (size, size), os.urandom(size * size * 3)).save(path)
    return path


def test_figures_go_inside_the_markdown_within_a_budget(tmp_path: Path) -> None:
    from PIL import Image

    png(tmp_path / "plots" / "small.png")
    _noise_png(tmp_path / "plots" / "big.png", 700)
    _noise_png(tmp_path / "plots" / "last.png", 200)
    text = (
        "![small](plots/small.png)\n![big](plots/big.png)\n![last](plots/last.png)\n![gone](plots/gone.png)\n"
        "![remote](https://example.org/a.png) ![inline](data:image/png;base64,AAAA)"
    )
    # a budget that the first two figures use up exactly (their sizes after scaling, measured alone)
    first_two = embed_figures(text.split("![last]")[0], tmp_path, per_figure=300_000, total=10**9)
    assert list(first_two.embedded) == ["plots/small.png", "plots/big.png"]
    total = sum(first_two.embedded.values())
    done = embed_figures(text, tmp_path, per_figure=300_000, total=total, elsewhere="in the run folder")
    assert sum(done.embedded.values()) <= total
    uris = re.findall(r"!\[(\w+)\]\(data:image/png;base64,([^)]+)\)", done.text)
    assert [name for name, _ in uris] == ["small", "big", "inline"]
    big = base64.b64decode(dict(uris)["big"])
    assert len(big) <= 300_000 and Image.open(io.BytesIO(big)).width < 700  # scaled down to fit
    assert done.skipped == {"plots/last.png": "the artifact's figure budget is used up", "plots/gone.png": "missing"}
    assert (
        "*(figure `plots/last.png` not shown here (the artifact's figure budget is used up): in the run folder)*"
        in (done.text)
    )
    assert "(https://example.org/a.png)" in done.text  # links that are not the run's files stay as they are
    assert png_within(b"not a png" * 10, 10) is None


# --------------------------------------------------------------------------------------------------
# paperflows report in a terminal
# --------------------------------------------------------------------------------------------------
def test_a_terminal_table_fits_its_width_and_wraps_identifiers_at_their_parts() -> None:
    rows = [
        {"slug": "activity_cliff", "id": "lac_lowers_rmse_cliff_ecfp_mlp", "verdict": "not resolved", "n": 9},
        {"slug": "csa", "id": "csa_beats_contrastive_zero_shot", "verdict": "holds", "n": 3},
    ]
    for width in (40, 60, 120):
        text = text_table(["slug", "id", "verdict", "n"], rows, width=width)
        assert max(len(line) for line in text.splitlines()) <= width, text
        assert "not resolved" in text or width < 50  # short cells stay whole while the table can fit
    wide = text_table(["slug", "id", "verdict", "n"], rows, width=120).splitlines()
    assert len(wide) == 4 and wide[2].split() == [
        "activity_cliff",
        "lac_lowers_rmse_cliff_ecfp_mlp",
        "not",
        "resolved",
        "9",
    ]
    assert wrap_cell("csa_beats_contrastive_zero_shot", 12) == ["csa_beats_", "contrastive_", "zero_shot"]
    assert wrap_cell("x" * 100, 10, max_lines=2) == ["x" * 10, "x" * 9 + "…"]


def test_report_prints_a_fitted_table_on_a_terminal_and_markdown_otherwise(
    site: Path,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert main(["report"]) == 0
    piped = capsys.readouterr().out
    assert "| slug | headline claim |" in piped  # a pipe or a file: Markdown, as before
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    monkeypatch.setenv("COLUMNS", "72")
    assert main(["report"]) == 0
    shown = capsys.readouterr().out
    assert "| slug |" not in shown and "holds" in shown and "─" in shown
    assert max(len(line) for line in shown.splitlines()) <= 72, [line for line in shown.splitlines() if len(line) > 72]
    assert main(["report", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["headline"]


# --------------------------------------------------------------------------------------------------
# a terminal: bars and log lines apart, no telemetry notice
# --------------------------------------------------------------------------------------------------
PROGRESS_PROBE = r"""
import logging, sys, torch
from components.training import TrainConfig, fit
handler = logging.StreamHandler(sys.stderr)
handler.setFormatter(logging.Formatter("LOG %(message)s"))
logging.getLogger().addHandler(handler)
logging.getLogger("paperflows").setLevel(logging.INFO)
talk = logging.getLogger("paperflows.progress")
def batches(step, gen):
    if step % 40 == 0:
        talk.info("line at step %d", step)
    return (torch.ones(4, 2), torch.zeros(4, 1))
fit(torch.nn.Linear(2, 1), lambda m, b: ((m(b[0]) - b[1]) ** 2).mean(), batches,
    TrainConfig(steps=200, lr=0.1, seed=0, progress=True, log_every=10, desc="toy"))
print("END", file=sys.stderr)
"""


def test_log_lines_print_above_a_progress_bar_not_into_it() -> None:
    leader, follower = pty.openpty()  # a terminal, so that tqdm draws its bar
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # 100 columns: a bar has room
    proc = subprocess.Popen(
        [sys.executable, "-c", PROGRESS_PROBE], cwd=REPO, stdin=follower, stdout=follower, stderr=follower
    )
    os.close(follower)
    output = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:
            break
        if not chunk:
            break
        output += chunk
    proc.wait(timeout=60)
    os.close(leader)
    text = output.decode(errors="replace")
    assert proc.returncode == 0 and "END" in text, text[-2000:]
    assert "toy:" in text and "it/s" in text  # a bar was drawn
    lines = re.findall(r"([^\r\n]*)LOG line at step (\d+)", text)
    assert [int(step) for _, step in lines] == [40, 80, 120, 160, 200], text[-3000:]
    # each log line starts a line of its own: nothing of the bar before it (at most tqdm's clearing codes)
    assert all(re.fullmatch(r"(\x1b\[[0-9;]*[A-Za-z]|\s)*", before) for before, _ in lines), lines


def test_the_environment_silences_prefects_telemetry_notice(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DO_NOT_TRACK", raising=False)
    pin_environment()
    assert os.environ["DO_NOT_TRACK"] == "1"
    from prefect._internal.analytics.enabled import is_telemetry_enabled

    assert not is_telemetry_enabled()


# --------------------------------------------------------------------------------------------------
# paperflows ui
# --------------------------------------------------------------------------------------------------
def test_ui_is_a_command_with_completion() -> None:
    parser = build_parser()
    assert "ui" in complete(1, ["paperflows", "u"], parser)
    assert {"--mlflow-port", "--prefect-port"} <= set(complete(2, ["paperflows", "ui", "--"], parser))


def test_ui_refuses_a_taken_port_before_starting_anything(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["ui", "--mlflow-port", str(port), "--prefect-port", str(free_port())]) == 2
    err = capsys.readouterr().err
    assert f"port {port} on 127.0.0.1 is in use (another MLflow UI?)" in err and "--mlflow-port N" in err
    assert not (project / ".paperflows" / "ui").exists()  # nothing was started
    assert main(["ui", "--prefect-port", "0"]) == 2
    assert "--prefect-port 0: not a port" in capsys.readouterr().err


@pytest.mark.slow
def test_ui_starts_both_uis_prints_their_urls_and_stops_cleanly(project: Path) -> None:
    mlflow_port, prefect_port = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "PAPERFLOWS_MLFLOW_UI"))}
    env.update(PAPERFLOWS_ROOT=str(project), PREFECT_HOME=str(project / ".paperflows" / "prefect"))
    log = project / "ui.out"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "paperflows",
                "ui",
                "--mlflow-port",
                str(mlflow_port),
                "--prefect-port",
                str(prefect_port),
            ],
            cwd=project,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_for(lambda: "Ctrl-C stops both" in log.read_text() or proc.poll() is not None, 300, "both UIs", log=log)
        text = log.read_text()
        assert proc.poll() is None, text
        mlflow_url = f"http://127.0.0.1:{mlflow_port}/#/experiments?workflowType=machine_learning"
        prefect_url = f"http://127.0.0.1:{prefect_port}/runs"
        assert re.search(rf"MLflow\s+{re.escape(mlflow_url)}", text) and re.search(
            rf"Prefect\s+{re.escape(prefect_url)}", text
        ), text
        assert healthy(f"http://127.0.0.1:{mlflow_port}/health") and healthy(prefect_url)
        assert healthy(f"http://127.0.0.1:{prefect_port}/api/health")
        members = tree(proc)
        assert len(members) >= 3, members  # paperflows ui, mlflow, prefect (and their workers)
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 128 + signal.SIGTERM
        assert time.monotonic() - started < 40
        wait_for(lambda: not alive(members), 20, "the servers to exit")
        assert "paperflows ui: stopped" in log.read_text()
        assert not healthy(f"http://127.0.0.1:{mlflow_port}/health") and not healthy(prefect_url)
    finally:
        if proc.poll() is None:
            proc.kill()
        for member in alive(tree(proc)):
            member.kill()


def test_the_environment_turns_off_mlflows_artifact_bars(monkeypatch: pytest.MonkeyPatch) -> None:
    """Logging a pyfunc model reads its artifacts back; with MLflow's bar on, a run's log shows one bar per model."""
    monkeypatch.delenv("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", raising=False)
    pin_environment()
    from mlflow.environment_variables import MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR

    assert MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR.get() is False
