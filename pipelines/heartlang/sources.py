"""HeartLang's data sources as stage ``data`` reads them: the unlabelled pretraining recordings (deepfake-ecg, or
the user's WFDB records cut into 10 s windows, the detector scored against their .atr beats) and the labelled
probe set (the Gaussian-wave PQRST simulation, or PTB-XL benchmark arrays), all as (N, 12, 1000) at 100 Hz,
standardised as the PTB-XL benchmark standardises its arrays (one mean and standard deviation of the training
split), so every source reaches the tokenizer on the scale HeartLang tokenizes: at raw millivolts the beats'
content is small next to the token embedding's bias and the VQ-HBR codebook collapses to one or two codes."""

from __future__ import annotations

from typing import Any

import numpy as np

from components.ecg.peaks import detect_r_peaks, first_signal_lead
from components.ecg.preprocess import Standardiser, fill_nan, preprocess
from components.ecg.probe import one_hot
from components.ecg.readers import detector_scores, read_ptbxl, read_wfdb
from components.ecg.synth import FORMS, RHYTHMS, deepfake_ecgs, simulate_labelled
from paperflows import StageContext, derive_seed

WINDOW = 1000  # samples of one recording at 100 Hz (10 s)


def unlabelled(ctx: StageContext) -> tuple[np.ndarray, list[dict[str, Any]]]:
    """The pretraining recordings and, for WFDB records with a .atr file, the R-peak detector's scores against
    the reference beats (on the lead the tokenizer detects on: lead I, else the first lead with a signal)."""
    d = ctx.params.data
    if not d.wfdb_path:
        x = preprocess(deepfake_ecgs(d.unlabelled, derive_seed(d.seed, "deepfake")), 500)
        return Standardiser.fit(x)(x), []
    windows, scores = [], []
    for rec in read_wfdb(ctx.data_path(d.wfdb_path)):
        x = preprocess(rec.signal[None], rec.fs, rec.leads)[0]
        windows += [x[:, i : i + WINDOW] for i in range(0, x.shape[1] - WINDOW + 1, WINDOW)]
        if rec.beats is not None:
            lead = int(first_signal_lead(x[None])[0])
            found = detect_r_peaks(x[None], 100, ctx.params.tokenize.detector, lead=lead)[0]
            reference = np.round(rec.beats * 100 / rec.fs)
            scores.append({"record": rec.name, "lead": lead, **detector_scores(reference, found, 100)})
    x = np.stack(windows)
    return Standardiser.fit(x)(x), scores


def probe_set(ctx: StageContext) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray], dict[str, np.ndarray]]:
    """``(train_x, test_x, train_tasks, test_tasks)``: PTB-XL benchmark arrays (already standardised by the
    benchmark, so only their NaNs are filled, as HeartLang tokenizes them), or the simulated labelled set split by
    ``data.test_fraction`` and standardised by its training split; tasks map a name to (N, C) multi-hot labels."""
    d = ctx.params.data
    if d.path:
        arrays = read_ptbxl(ctx.data_path(d.path))
        (train_x, train_y), (test_x, test_y) = arrays["train"], arrays["test"]
        as_is = [fill_nan(x).astype(np.float32) for x in (train_x, test_x)]
        return as_is[0], as_is[1], {"ptbxl": train_y}, {"ptbxl": test_y}
    x, rhythm, form = simulate_labelled(d.labelled, derive_seed(d.seed, "labelled"), noise=d.noise)
    x = preprocess(x, 100)
    order = np.random.default_rng(derive_seed(d.seed, "split")).permutation(len(x))
    n_test = int(round(d.test_fraction * len(x)))
    test, train = order[:n_test], order[n_test:]
    tasks = {"rhythm": one_hot(rhythm, len(RHYTHMS)), "form": one_hot(form, len(FORMS))}
    scale = Standardiser.fit(x[train])
    return (
        scale(x[train]),
        scale(x[test]),
        {k: v[train] for k, v in tasks.items()},
        {k: v[test] for k, v in tasks.items()},
    )
