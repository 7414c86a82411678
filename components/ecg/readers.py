"""Readers of real ECG data, each checked in full before any work (messages name the file, the row and the field).

* PTB-XL benchmark arrays (the official preprocessing's output): a folder with ``{split}_data.npy`` at 100 Hz and
  ``{split}_labels.npy`` (N, C) multi-hot for the splits train, val and test. The benchmark code
  (``ecg_ptbxl_benchmarking``, ``wfdb.rdsamp``) writes the data as (N, 1000, 12); HeartLang's tokenizer transposes
  an array whose second axis is longer than 12, and so does :func:`read_ptbxl`: both (N, 1000, 12) and
  (N, 12, 1000) are read, as (N, 12, 1000).
* WFDB records: a folder of ``.hea`` / ``.dat`` records (any sampling rate, leads named as in the standard 12, or
  as PhysioNet's Holter and arrhythmia databases name them: ``MLII`` is a modified lead II, ``MLI`` / ``MLIII``
  likewise, ``MV1``... a modified V1...; :data:`LEAD_ALIASES`); where a ``.atr`` annotation file sits beside a
  record, its beat annotations are the reference of the R-peak detector's sensitivity and positive predictive
  value.

numpy only at import (parameter checks import this module); wfdb is imported where it is used.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from components.data.npy_files import array_bytes_limit, describe_bytes, npy_header

SPLITS = ("train", "val", "test")
PTBXL_LAYOUT = tuple(f"{s}_{k}.npy" for s in SPLITS for k in ("data", "labels"))
PTBXL_SHAPE = (12, 1000)
PTBXL_BENCHMARK_SHAPE = (1000, 12)  # what the official benchmark code writes (time first)
WFDB_LAYOUT = ("100.hea", "100.dat", "100.atr")  # one record as PhysioNet names it (MIT-BIH record 100)
BEAT_SYMBOLS = frozenset("NLRBAaJSVrFejnE/fQ?")
STANDARD_LEADS = ("I", "II", "III", "aVR", "aVL", "aVF", "V1", "V2", "V3", "V4", "V5", "V6")
LEAD_NAMES = frozenset(n.lower() for n in STANDARD_LEADS)
# PhysioNet's modified leads (MIT-BIH Arrhythmia, Long-Term ST...): the standard lead they stand in for
LEAD_ALIASES = {
    **{f"ml{n.lower()}": n for n in ("I", "II", "III")},
    **{f"m{n.lower()}": n for n in ("V1", "V2", "V3", "V4", "V5", "V6")},
}


def standard_lead(name: str) -> str | None:
    """The standard 12-lead name of a record's signal name (case-insensitive, modified leads mapped), or None."""
    key = name.strip().lower()
    if key in LEAD_NAMES:
        return next(n for n in STANDARD_LEADS if n.lower() == key)
    return LEAD_ALIASES.get(key)


MIN_SECONDS = 10.0
MAX_HEADER_BYTES = 1 << 20


def _nan_only_rows(data: np.ndarray, chunk: int = 512) -> np.ndarray:
    bad = []
    for i in range(0, len(data), chunk):
        block = np.asarray(data[i : i + chunk], dtype=np.float64)
        bad.append(~np.isfinite(block).any(axis=(1, 2)) | (np.isinf(block).any(axis=(1, 2))))
    return np.flatnonzero(np.concatenate(bad)) if bad else np.zeros(0, dtype=np.int64)


def check_ptbxl(folder: Path) -> dict[str, tuple[int, int]]:
    """The ``DataFile`` check of ``data.path``: every file present, readable without pickles, data (N, 12, 1000)
    numeric with no all-NaN or infinite recording, labels (N, C) of 0/1 with the data's N and one C for all splits,
    and at least one label column with positives and negatives in both train and test (the probe's AUC).
    Returns ``{split: (N, C)}``."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ValueError(f"{folder}: not a folder (expected {', '.join(PTBXL_LAYOUT)})")
    out, classes, two_classes = {}, None, {}
    for split in SPLITS:
        data_path, label_path = folder / f"{split}_data.npy", folder / f"{split}_labels.npy"
        for p in (data_path, label_path):
            if not p.is_file():
                raise ValueError(f"{p}: missing (expected {', '.join(PTBXL_LAYOUT)})")
        shape, dtype = npy_header(data_path)
        if len(shape) != 3 or tuple(shape[1:]) not in (PTBXL_SHAPE, PTBXL_BENCHMARK_SHAPE):
            raise ValueError(
                f"{data_path}: field 'shape' is {tuple(shape)}, expected (N, 1000, 12) as the benchmark writes it, "
                "or (N, 12, 1000) (12 leads, 10 s at 100 Hz)"
            )
        if dtype.kind not in "fiu" or shape[0] == 0:
            raise ValueError(f"{data_path}: field 'dtype' is {dtype} with {shape[0]} rows, expected numbers, >= 1 row")
        lshape, ldtype = npy_header(label_path)
        if len(lshape) != 2 or lshape[1] == 0 or ldtype.kind not in "fiub":
            raise ValueError(f"{label_path}: field 'shape' is {tuple(lshape)} ({ldtype}), expected (N, C) of 0/1")
        if lshape[0] != shape[0]:
            raise ValueError(f"{label_path}: {lshape[0]} label rows for {shape[0]} recordings in {data_path.name}")
        if classes is not None and lshape[1] != classes:
            raise ValueError(f"{label_path}: {lshape[1]} label columns, the other splits have {classes}")
        classes = lshape[1]
        labels = np.load(label_path, allow_pickle=False)
        bad = np.argwhere((labels != 0) & (labels != 1))
        if len(bad):
            raise ValueError(f"{label_path}: row {bad[0][0]}, column {bad[0][1]}: a label that is not 0 or 1")
        two_classes[split] = (labels == 1).any(axis=0) & (labels == 0).any(axis=0)
        rows = _nan_only_rows(np.load(data_path, mmap_mode="r", allow_pickle=False))
        if len(rows):
            raise ValueError(f"{data_path}: row {rows[0]}: field 'data' is all NaN or holds an infinite value")
        out[split] = (int(shape[0]), int(classes))
    # the probe scores each label column by ROC-AUC on test (columns of one class are left out of the macro mean)
    # after training on train: with no column holding positives and negatives in both, no AUC is defined
    if not (two_classes["train"] & two_classes["test"]).any():
        raise ValueError(
            f"{folder}: no label column holds both positive and negative rows in train_labels.npy and "
            "test_labels.npy; the probe's ROC-AUC needs at least one (are all labels 0?)"
        )
    return out


def leads_first(data: np.ndarray) -> np.ndarray:
    """(N, 12, T) from a benchmark array: transposed when its second axis is longer than 12, as HeartLang's
    tokenizer does (``if data.shape[1] > 12: data = data.transpose(0, 2, 1)``)."""
    return data.transpose(0, 2, 1) if data.shape[1] > len(STANDARD_LEADS) else data


def read_ptbxl(folder: Path) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """``{split: (data float32 (N, 12, 1000), labels int8 (N, C))}`` after `check_ptbxl`."""
    check_ptbxl(folder)
    folder = Path(folder)
    return {
        s: (
            np.ascontiguousarray(leads_first(np.load(folder / f"{s}_data.npy", allow_pickle=False))).astype(np.float32),
            np.load(folder / f"{s}_labels.npy", allow_pickle=False).astype(np.int8),
        )
        for s in SPLITS
    }


@dataclass
class WfdbRecord:
    name: str
    signal: np.ndarray  # (leads, T), physical units
    fs: float
    leads: tuple[str, ...]
    beats: np.ndarray | None  # reference beat sample indices (at fs) from the .atr file, if any


def _check_record_files(hea: Path) -> None:
    """What wfdb would read of a record, refused before it reads: a header, signal or annotation file that is not a
    regular file of the folder (a link to a device such as /dev/zero never ends), a header above
    :data:`MAX_HEADER_BYTES`, and samples that would not fit in memory. Messages never quote the header."""
    import wfdb

    for part in (hea, hea.with_suffix(".dat"), hea.with_suffix(".atr")):
        if (part.exists() or part.is_symlink()) and not part.is_file():
            raise ValueError(f"{part}: not a regular file")
    size = hea.stat().st_size
    if size > MAX_HEADER_BYTES:
        raise ValueError(
            f"{hea}: {describe_bytes(size)}, too large for a WFDB header (at most {describe_bytes(MAX_HEADER_BYTES)})"
        )
    try:
        header = wfdb.rdheader(str(hea.with_suffix("")))
    except Exception as err:  # wfdb raises many types on a malformed header
        raise ValueError(f"{hea}: unreadable WFDB record (its header: {type(err).__name__})") from None
    for name in sorted(set(header.file_name or [])):
        if not (hea.parent / name).is_file():
            raise ValueError(f"{hea}: field 'file_name': a signal file it names is not a regular file of the folder")
    samples = int(header.n_sig or 0) * int(header.sig_len or 0)
    if samples * 8 > array_bytes_limit():  # read as float64 physical values
        raise ValueError(
            f"{hea}: fields 'n_sig' x 'sig_len' announce {samples} samples "
            f"({describe_bytes(samples * 8)}), more than this machine's memory"
        )


def _read_one(hea: Path, with_signal: bool = True) -> WfdbRecord:
    import wfdb

    base = hea.with_suffix("")
    _check_record_files(hea)
    try:
        record = wfdb.rdrecord(str(base))
    except Exception as err:  # wfdb raises many types on a malformed header or signal file
        raise ValueError(f"{hea}: unreadable WFDB record ({type(err).__name__})") from None
    signal = record.p_signal
    if signal is None or signal.ndim != 2 or signal.shape[0] == 0:
        raise ValueError(f"{hea}: field 'p_signal' is empty")
    raw = tuple(str(n) for n in (record.sig_name or []))
    if not any(standard_lead(n) for n in raw):
        raise ValueError(f"{hea}: field 'sig_name': no standard 12-lead name among {len(raw)} signals")
    names = tuple(standard_lead(n) or n for n in raw)
    if not record.fs or record.fs <= 0:
        raise ValueError(f"{hea}: field 'fs' is not a positive sampling rate")
    if signal.shape[0] / record.fs < MIN_SECONDS:
        raise ValueError(
            f"{hea}: field 'sig_len' is {signal.shape[0]} samples ({signal.shape[0] / record.fs:.1f} s); "
            f"at least {MIN_SECONDS:g} s are needed"
        )
    if not np.isfinite(signal).any():
        raise ValueError(f"{hea}: field 'p_signal' is all NaN")
    beats = None
    if base.with_suffix(".atr").is_file():
        try:
            ann = wfdb.rdann(str(base), "atr")
        except Exception as err:
            raise ValueError(f"{base.with_suffix('.atr')}: unreadable annotation file ({type(err).__name__})") from None
        symbols = np.asarray(ann.symbol)
        beats = np.asarray(ann.sample)[np.isin(symbols, list(BEAT_SYMBOLS))].astype(np.int64)
    return WfdbRecord(base.name, signal.T.astype(np.float64), float(record.fs), names, beats)


def read_wfdb(folder: Path) -> list[WfdbRecord]:
    """Every record of ``folder`` (sorted by name), each checked (see `_read_one`)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ValueError(f"{folder}: not a folder of WFDB records (.hea/.dat)")
    headers = sorted(folder.glob("*.hea"))
    if not headers:
        raise ValueError(f"{folder}: no .hea file (expected WFDB records <name>.hea + <name>.dat)")
    return [_read_one(h) for h in headers]


@dataclass(frozen=True)
class WfdbSummary:
    """What the check of a WFDB folder found: the number of records and each record's standard leads."""

    records: int
    leads: dict[str, tuple[str, ...]]

    def __str__(self) -> str:
        return f"{self.records} record(s)"


def check_wfdb(folder: Path) -> WfdbSummary:
    """The ``DataFile`` check of ``data.wfdb_path``: reads every record; returns their number and leads."""
    records = read_wfdb(folder)
    leads = {r.name: tuple(n for n in r.leads if n in STANDARD_LEADS) for r in records}
    return WfdbSummary(len(records), leads)


def missing_leads(summary: WfdbSummary, wanted: list[str] | tuple[str, ...]) -> dict[str, list[str]]:
    """``{record: the leads of wanted it lacks}`` for every record that lacks one (a sentence lead the record
    does not hold would be all zeros)."""
    out = {}
    for name, leads in summary.leads.items():
        lacking = [lead for lead in wanted if lead not in leads]
        if lacking:
            out[name] = lacking
    return out


def detector_scores(
    reference: np.ndarray, detected: np.ndarray, fs: float, tolerance_s: float = 0.15
) -> dict[str, float]:
    """Sensitivity and positive predictive value of ``detected`` against ``reference`` beats (a match within
    ``tolerance_s``), via ``wfdb.processing.compare_annotations``."""
    from wfdb.processing import compare_annotations

    ref, test = np.asarray(reference, dtype=np.int64), np.asarray(detected, dtype=np.int64)
    if len(ref) == 0 or len(test) == 0:
        return {
            "sensitivity": 0.0 if len(ref) else float("nan"),
            "ppv": 0.0 if len(test) else float("nan"),
            "reference": float(len(ref)),
            "detected": float(len(test)),
        }
    cmp = compare_annotations(ref, test, window_width=int(round(tolerance_s * fs)))
    cmp.compare()
    return {
        "sensitivity": float(cmp.sensitivity),
        "ppv": float(cmp.positive_predictivity),
        "reference": float(len(ref)),
        "detected": float(len(test)),
    }
