"""The real-ECG readers' limits: PTB-XL labels the probe can score, and WFDB records whose files are checked
before wfdb reads them (a device never read, a header's sample count within memory)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from components.ecg.readers import check_ptbxl, check_wfdb


def _ptbxl(folder: Path, labels: dict[str, np.ndarray]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for split, y in labels.items():
        np.save(folder / f"{split}_data.npy", np.zeros((len(y), 12, 1000), np.float32))
        np.save(folder / f"{split}_labels.npy", y)
    return folder


def test_ptbxl_needs_a_label_column_with_both_classes_in_train_and_test(tmp_path: Path) -> None:
    both = np.array([[1, 0], [0, 0], [1, 1]], dtype=bool)  # bool labels are 0/1 labels
    assert check_ptbxl(_ptbxl(tmp_path / "ok", {s: both for s in ("train", "val", "test")}))["test"] == (3, 2)
    zeros = np.zeros((3, 2), np.int8)  # review hl02: the probe's AUC was NaN
    with pytest.raises(ValueError, match=r"no label column holds both positive and negative rows"):
        check_ptbxl(_ptbxl(tmp_path / "zero", {"train": both, "val": zeros, "test": zeros}))
    only_col0 = np.array([[1, 1], [0, 1], [1, 1]], np.int8)  # column 1 never negative in test
    check_ptbxl(_ptbxl(tmp_path / "one", {"train": both, "val": zeros, "test": only_col0}))


def _header(folder: Path, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "100.hea").write_text(text)
    return folder


def test_wfdb_files_are_checked_before_wfdb_reads_them(tmp_path: Path) -> None:
    folder = _header(tmp_path / "zero", "100 1 360 3600\n100.dat 16 200 11 1024 0 0 0 I\n")
    os.symlink("/dev/zero", folder / "100.dat")  # never ends: never read
    with pytest.raises(ValueError, match=r"100\.dat: not a regular file"):
        check_wfdb(folder)
    folder = tmp_path / "zero_header"
    folder.mkdir()
    os.symlink("/dev/zero", folder / "100.hea")
    with pytest.raises(ValueError, match=r"100\.hea: not a regular file"):
        check_wfdb(folder)
    folder = _header(tmp_path / "huge", "100 1 360 1000000000000\n100.dat 16 200 11 1024 0 0 0 I\n")
    (folder / "100.dat").write_bytes(b"\0" * 100)
    with pytest.raises(ValueError, match=r"fields 'n_sig' x 'sig_len' announce 1000000000000 samples"):
        check_wfdb(folder)
    folder = _header(tmp_path / "elsewhere", "100 1 360 3600\nother.dat 16 200 11 1024 0 0 0 I\n")
    with pytest.raises(ValueError, match=r"a signal file it names is not a regular file of the folder"):
        check_wfdb(folder)
