"""heartlang: parameter rules, the PTB-XL and WFDB readers (good files used, bad files refused before any work),
and one tiny Prefect flow."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from components.ecg.readers import check_ptbxl, read_wfdb
from components.ecg.synth import simulate_labelled
from components.io import load_json, load_table
from paperflows.contract import StageContext
from paperflows.engine import run_stage
from paperflows.params import ParamsError, validate
from pipelines.heartlang.params import HeartlangParams
from pipelines.heartlang.pipeline import PIPELINE
from tests.pipelines.heartlang.mitbih import write_mitbih_like

TINY: dict[str, Any] = {
    "seeds": [0, 1],
    "data": {"unlabelled": 16, "labelled": 40},
    "tokenize": {"max_len": 32},
    "vqhbr": {"steps": 4, "batch": 8, "num_codes": 8},
    "pretrain": {"steps": 4, "batch": 8},
    "probe": {"fractions": [0.1, 1.0]},
}


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ({"vqhbr": {"dim": 60, "heads": 8}}, "must divide"),
        ({"pretrain": {"tokenizers": ["qrs", "qrs"]}}, "tokenizers repeat"),
        ({"tokenize": {"leads": ["I", "X"]}}, "heartlang.tokenize.leads"),
        ({"tokenize": {"detector": "pan_tompkins"}}, "heartlang.tokenize.detector"),
        ({"probe": {"fractions": [0.0]}}, "heartlang.probe.fractions"),
        ({"pretrain": {"mask_ratio": 1.0}}, "heartlang.pretrain.mask_ratio"),
    ],
)
def test_bad_params_name_the_key(section: dict[str, Any], message: str) -> None:
    with pytest.raises(ParamsError, match=message):
        validate(HeartlangParams, section, "heartlang")


def test_paper_preset_quotes_the_official_sizes() -> None:
    paper = HeartlangParams(scale="paper")
    assert (paper.vqhbr.num_codes, paper.vqhbr.code_dim, paper.vqhbr.depth) == (8192, 128, 4)
    assert (paper.pretrain.depth, paper.pretrain.dim, paper.pretrain.heads, paper.pretrain.mask_ratio) == (
        12,
        768,
        8,
        0.5,
    )
    assert paper.tokenize.max_len == 256 and len(paper.tokenize.leads) == 12


def _ptbxl(folder: Path, n: int = 12, classes: int = 3, **bad: Any) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    x, _, _ = simulate_labelled(n, 0)
    for split in ("train", "val", "test"):
        np.save(folder / f"{split}_data.npy", bad.get(f"{split}_data", x))
        np.save(folder / f"{split}_labels.npy", bad.get(f"{split}_labels", rng.integers(0, 2, (n, classes))))
    return folder


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"train_data": np.zeros((12, 12, 500))}, r"train_data\.npy: field 'shape' is \(12, 12, 500\)"),
        ({"val_labels": np.zeros((11, 3))}, r"val_labels\.npy: 11 label rows for 12 recordings"),
        ({"test_labels": np.full((12, 3), 2)}, r"test_labels\.npy: row 0, column 0"),
        ({"test_data": np.full((12, 12, 1000), np.nan)}, r"test_data\.npy: row 0: field 'data' is all NaN"),
        ({"val_labels": np.zeros((12, 4))}, r"val_labels\.npy: 4 label columns"),
    ],
)
def test_bad_ptbxl_arrays_are_refused(tmp_path: Path, bad: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        check_ptbxl(_ptbxl(tmp_path / "ptb", **bad))


def test_missing_ptbxl_file_is_named(tmp_path: Path) -> None:
    folder = _ptbxl(tmp_path / "ptb")
    (folder / "val_labels.npy").unlink()
    with pytest.raises(ValueError, match=r"val_labels\.npy: missing"):
        check_ptbxl(folder)


def _wfdb(folder: Path, name: str = "rec1", seconds: int = 25, fs: int = 250, with_atr: bool = True) -> np.ndarray:
    import wfdb

    folder.mkdir(parents=True, exist_ok=True)
    t = np.arange(seconds * fs) / fs
    beats = np.arange(int(0.4 * fs), seconds * fs - int(0.2 * fs), int(0.8 * fs))
    sig = 0.05 * np.sin(2 * np.pi * 0.3 * t)
    for b in beats:
        sig = sig + np.exp(-0.5 * ((t - b / fs) / 0.012) ** 2) - 0.2 * np.exp(-0.5 * ((t - b / fs - 0.03) / 0.012) ** 2)
    signal = np.stack([sig, 1.4 * sig], 1)
    wfdb.wrsamp(
        name, fs=fs, units=["mV", "mV"], sig_name=["I", "II"], p_signal=signal, fmt=["16", "16"], write_dir=str(folder)
    )
    if with_atr:
        wfdb.wrann(name, "atr", beats, symbol=["N"] * len(beats), write_dir=str(folder))
    return beats


def test_wfdb_records_feed_pretraining_and_score_the_detector(project: Path) -> None:
    beats = _wfdb(project / "records")
    _wfdb(project / "records", "rec2", seconds=12, with_atr=False)
    records = read_wfdb(project / "records")
    assert [r.name for r in records] == ["rec1", "rec2"] and np.array_equal(records[0].beats, beats)
    params = HeartlangParams.model_validate({**TINY, "data": {**TINY["data"], "wfdb_path": "records"}})
    root = project / "out"
    run_stage(
        StageContext(
            pipeline=PIPELINE, stage=PIPELINE.stage("data"), params=params, root=root, progress=False, project=project
        )
    )
    metrics = load_json(root / "metrics" / "data.json")
    assert metrics["source"] == "wfdb" and metrics["unlabelled"] == 3  # 2 + 1 windows of 10 s
    assert np.load(root / "data" / "unlabelled.npy").shape == (3, 12, 1000)
    (score,) = metrics["detector"]
    assert score["record"] == "rec1" and score["sensitivity"] >= 0.9 and score["ppv"] >= 0.9


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("short", r"rec1\.hea: field 'sig_len'"),
        ("empty", r"no \.hea file"),
        ("badhea", r"rec1\.hea: unreadable WFDB record"),
    ],
)
def test_bad_wfdb_folders_are_refused(tmp_path: Path, case: str, message: str) -> None:
    folder = tmp_path / "records"
    if case == "short":
        _wfdb(folder, seconds=5)
    elif case == "empty":
        folder.mkdir()
    else:
        _wfdb(folder)
        (folder / "rec1.hea").write_text("rec1 2 250 garbage\nnot a signal line\n")
    with pytest.raises(ValueError, match=message):
        read_wfdb(folder)


def test_ptbxl_arrays_are_probed(project: Path) -> None:
    _ptbxl(project / "ptb", n=20)
    for split in ("train", "val", "test"):  # as the benchmark code writes them: (N, 1000, 12), time first
        path = project / "ptb" / f"{split}_data.npy"
        np.save(path, np.load(path).transpose(0, 2, 1))
    params = HeartlangParams.model_validate({**TINY, "data": {**TINY["data"], "path": "ptb"}})
    root = project / "out"
    for name in ("data", "tokenize", "vqhbr", "pretrain", "probe"):
        run_stage(
            StageContext(
                pipeline=PIPELINE, stage=PIPELINE.stage(name), params=params, root=root, progress=False, project=project
            )
        )
    rows = load_table(root / "tables" / "probe.parquet")
    assert {r["task"] for r in rows} == {"ptbxl"} and len(rows) == 2 * 4 * 2
    assert np.load(root / "tokens" / "qrs" / "probe_train_data.npy").shape == (20, 32, 96)
    x, _, _ = simulate_labelled(20, 0)  # read as (N, 12, 1000), the values as the benchmark stored them
    np.testing.assert_allclose(np.load(root / "data" / "probe_train.npy"), x, rtol=1e-6)


def test_a_two_lead_mitbih_record_runs_end_to_end(project: Path) -> None:
    """A record as PhysioNet distributes MIT-BIH (MLII and V1 at 360 Hz, format 212, .atr beats): once crashed in
    the VQ stage on an empty batch (no lead I, so no beat was found)."""
    beats = write_mitbih_like(project / "mitbih", seconds=30)
    given = {
        **TINY,
        "data": {**TINY["data"], "wfdb_path": "mitbih"},
        "tokenize": {"max_len": 32, "leads": ["II", "V1"]},
    }
    params = HeartlangParams.model_validate(given)
    root = project / "out"
    for stage in PIPELINE.stages:
        run_stage(StageContext(PIPELINE, stage, params, root, progress=False, project=project))
    metrics = load_json(root / "metrics" / "data.json")
    assert metrics["unlabelled"] == 3 and metrics["source"] == "wfdb"
    (score,) = metrics["detector"]
    assert score["reference"] == len(beats) and score["lead"] == 1  # lead II: the record has no lead I
    assert score["sensitivity"] >= 0.9 and score["ppv"] >= 0.9
    tokens = np.load(root / "tokens" / "qrs" / "unlabelled_data_in_chans.npy")
    assert set(np.unique(tokens)) == {0, 2, 7}  # padding, II, V1
    report = load_json(root / "report.json")
    assert report["claims"][0]["id"] == "heartlang_beats_random_init"


def test_flow_smoke(prefect_harness: None, project: Path, run_flow_and_check) -> None:
    report = run_flow_and_check(PIPELINE, HeartlangParams.model_validate(TINY), project)
    assert [c["id"] for c in report["claims"]] == ["heartlang_beats_random_init", "qrs_ge_window_rhythm_10pct"]
    assert report["claims"][0]["headline"]
    content = [g for g in report["claims"][0]["gates"] if g["statistic"] == "H(code | lead, time) / H(code)"]
    assert len(content) == 1 and 0 <= content[0]["effect"] <= 1  # measured by the pretrain stage
    assert len(report["rows"]) == 2 * 2 * 4  # tasks x fractions x methods (the beat-count reference included)
    qrs = next(c for c in report["claims"] if c["id"] == "qrs_ge_window_rhythm_10pct")
    assert any(g["reference"] == "beat count only (QRS sentence length)" for g in qrs["gates"])
    assert {c["id"] for c in report["checks"]} == {"r_peaks_found", "codebook_used_qrs", "codebook_used_window"}
