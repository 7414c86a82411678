"""Linear probe: logistic regression on frozen (mean-pooled) features with a fraction of the labels, scored by
macro ROC-AUC over label columns (one-vs-rest for a single-label task, per column for multi-hot labels).

The training subset of a label fraction is drawn at random, with at least one positive of every column that has
positives in the training pool (so that the 1 % split of a small set still sees every class); a column whose
subset holds a single class scores a constant (AUC 0.5). Columns without both classes in the test set are left
out of the macro average (as undefined).

:func:`count_features` is the probe's trivial reference for sentence-level labels: what a QRS sentence shows by its
length alone (the number of real tokens and of beats), which tells heart rate and so most of a rate-defined rhythm
class without any morphology."""

from __future__ import annotations

import warnings

import numpy as np

from components.metrics.ranking import roc_auc


def label_subset(labels: np.ndarray, fraction: float, rng: np.random.Generator) -> np.ndarray:
    """Indices of ``round(fraction * N)`` rows (at least one positive per column that has any)."""
    labels = np.asarray(labels, dtype=bool)
    n = len(labels)
    chosen: list[int] = []
    for col in range(labels.shape[1]):
        pos = np.flatnonzero(labels[:, col])
        if len(pos) and not labels[chosen, col].any():
            chosen.append(int(rng.choice(pos)))
    size = max(int(round(fraction * n)), len(set(chosen)))
    rest = rng.permutation(np.setdiff1d(np.arange(n), chosen))
    return np.sort(np.concatenate([np.unique(chosen), rest[: size - len(set(chosen))]]).astype(np.int64))


def macro_auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """Mean over label columns of ROC-AUC (columns with a single class in ``labels`` are skipped)."""
    aucs = [roc_auc(scores[:, c], labels[:, c].astype(bool)) for c in range(labels.shape[1])]
    aucs = [a for a in aucs if not np.isnan(a)]
    return float(np.mean(aucs)) if aucs else float("nan")


def linear_probe(
    train_x: np.ndarray,
    train_y: np.ndarray,
    test_x: np.ndarray,
    test_y: np.ndarray,
    c: float = 1.0,
    max_iter: int = 500,
) -> float:
    """Macro ROC-AUC on the test set of per-column logistic regressions on standardised features."""
    from sklearn.linear_model import LogisticRegression

    mean, std = train_x.mean(0), train_x.std(0) + 1e-6
    a, b = (train_x - mean) / std, (test_x - mean) / std
    scores = np.zeros(test_y.shape, dtype=np.float64)
    for col in range(train_y.shape[1]):
        y = train_y[:, col].astype(int)
        if y.min() == y.max():
            continue  # a constant score: AUC 0.5
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            clf = LogisticRegression(C=c, max_iter=max_iter).fit(a, y)
        scores[:, col] = clf.decision_function(b)
    return macro_auc(scores, test_y)


def one_hot(classes: np.ndarray, n: int) -> np.ndarray:
    out = np.zeros((len(classes), n), dtype=np.int8)
    out[np.arange(len(classes)), classes] = 1
    return out


def count_features(in_chans: np.ndarray) -> np.ndarray:
    """(N, 2) float features of sentences from their lead codes ``in_chans`` (N, L) (0 = padding): the number of
    real tokens and the number of tokens of the sentence's first lead (its beat count, for QRS sentences)."""
    chans = np.asarray(in_chans)
    real = (chans > 0).sum(1)
    first = (chans == chans[:, :1]).sum(1) * (chans[:, 0] > 0)
    return np.stack([real, first], axis=1).astype(np.float64)
