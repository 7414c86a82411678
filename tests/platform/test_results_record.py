"""The headline table of ``paperflows report`` and the results record ``RESULTS.md`` (``--markdown``): built from
run folders, one row per paper, scale and headline claim; the committed record names real claims and commits."""

from __future__ import annotations

import importlib
import subprocess
from pathlib import Path

import pytest

from components.io import load_json, save_json
from paperflows import registry
from paperflows.__main__ import main
from paperflows.results import RECORD_COLUMNS, RESULTS_FILE, read_record
from tests.conftest import REPO
from tests.platform.test_results_page import constructed_report, file_params, write_run


def finish(
    folder: Path,
    seconds: float,
    scale: str = "cpu",
    commit: str = "a" * 40,
    finished: str = "2025-05-01T10:05:00+00:00",
) -> Path:
    """Mark a constructed run folder as complete, as the engine does at the end of a run."""
    run = load_json(folder / "run.json")
    run.update(
        {"seconds": seconds, "scale": scale, "commit": commit, "params_digest": "0123456789ab", "finished": finished}
    )
    run["params"]["scale"] = scale
    save_json(run, folder / "run.json")
    return folder


@pytest.fixture()
def runs(project: Path) -> Path:
    """knots: a complete cpu run in the workspace, two evidence runs (the newer one wins) and one unfinished;
    nsot: no complete run."""
    write_run(project / "outputs" / "knots", constructed_report("knots"), file_params(project, "knots"))
    finish(project / "outputs" / "knots", 61.0)
    for name, when, seconds in (
        ("old", "2025-05-01T11:00:00+00:00", 500.0),
        ("new", "2025-05-02T11:00:00+00:00", 720.0),
    ):
        folder = write_run(
            project / "runs" / "knots" / name, constructed_report("knots"), file_params(project, "knots")
        )
        finish(folder, seconds, scale="evidence", finished=when, commit="b" * 40 + "-dirty")
    write_run(project / "runs" / "knots" / "unfinished", constructed_report("knots"), file_params(project, "knots"))
    write_run(project / "runs" / "nsot" / "unfinished", constructed_report("nsot"), file_params(project, "nsot"))
    return project


def test_the_record_has_the_newest_complete_run_per_paper_and_scale(runs: Path) -> None:
    assert main(["report", "--markdown"]) == 0
    rows = read_record(runs / RESULTS_FILE)
    knots = [r for r in rows if r["paper"] == "knots"]
    assert [(r["scale"], r["headline claim"], r["verdict"]) for r in knots] == [
        ("cpu", "beats_baseline", "holds"),
        ("evidence", "beats_baseline", "holds"),
    ]
    assert knots[0]["wall time"] == "61 s" and knots[1]["wall time"] == "12.0 min"
    assert knots[0]["commit"] == "a" * 10 and knots[1]["commit"] == "b" * 10 + "-dirty"
    assert knots[0]["params"] == "0123456789ab" and knots[0]["n"] == "3"
    assert not [r for r in rows if r["paper"] == "nsot"]


def test_rows_without_a_run_folder_here_are_kept_from_the_record(runs: Path) -> None:
    kept = {
        "paper": "nsot",
        "scale": "evidence",
        "headline claim": "nsot_beats_independent_few_steps",
        "verdict": "holds",
        "effect [95% CI]": "20.0 [10.0, 30.0]",
        "n": "6",
        "wall time": "11.0 min",
        "commit": "c" * 10,
        "params": "fedcba987654",
    }
    stale = {**kept, "paper": "knots", "scale": "cpu", "headline claim": "old_claim"}
    (runs / RESULTS_FILE).write_text(
        "| "
        + " | ".join(RECORD_COLUMNS)
        + " |\n|"
        + "---|" * len(RECORD_COLUMNS)
        + "\n"
        + "\n".join("| " + " | ".join(r[c] for c in RECORD_COLUMNS) + " |" for r in (kept, stale))
        + "\n"
    )
    assert main(["report", "--markdown"]) == 0
    rows = read_record(runs / RESULTS_FILE)
    assert kept in rows
    assert not [r for r in rows if r["headline claim"] == "old_claim"]  # knots/cpu has a run here


def test_report_opens_with_the_headline_table(runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report"]) == 0
    out = capsys.readouterr().out
    head, _, rest = out.partition("All claims")
    assert head.startswith("Headline claims")
    knots = [line for line in head.splitlines() if line.startswith("| knots |")]
    # the newest report (the last folder written), its scale and its folder
    assert (
        len(knots) == 1
        and "| beats_baseline | holds | 0.120 [0.070, 0.170] | 3 | cpu | runs/knots/unfinished |" in knots[0]
    )
    assert "gap_grows" not in head and "gap_grows" in rest


# --------------------------------------------------------------------------------------------------
# the committed record
# --------------------------------------------------------------------------------------------------
def _committed() -> list[dict[str, str]]:
    path = REPO / RESULTS_FILE
    assert path.is_file(), f"{RESULTS_FILE} is missing: run `paperflows report --markdown` after real runs"
    rows = read_record(path)
    assert rows, f"{RESULTS_FILE} has no rows"
    return rows


def test_the_committed_record_names_existing_headline_claims() -> None:
    for row in _committed():
        assert row["paper"] in registry.slugs(), row
        headline = {spec.id for spec in importlib.import_module(f"pipelines.{row['paper']}.report").HEADLINE}
        assert row["headline claim"] in headline, f"{row['paper']}: {row['headline claim']} is not a headline claim"
        assert row["scale"] in ("cpu", "evidence", "paper"), row


def test_the_committed_record_names_commits_of_the_history() -> None:
    for row in _committed():
        sha = row["commit"].removesuffix("-dirty")
        found = subprocess.run(
            ["git", "rev-parse", "--verify", "--quiet", f"{sha}^{{commit}}"], cwd=REPO, capture_output=True, text=True
        )
        assert found.returncode == 0, f"{row['paper']}/{row['scale']}: commit {sha} is not in the history"
