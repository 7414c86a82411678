"""Ratings -> next-item sequences in the official txt format: ordering, filtering, re-numbering, the user split,
the round trip through the three files, the reader's errors (file, line, field) and the (history, target) pairs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from components.data.rec_sequences import (
    SPLIT_FILES,
    check_sequence_folder,
    examples,
    ratings_to_sequences,
    read_sequence_folder,
    split_users,
    write_sequence_folder,
)


def test_sequences_are_time_ordered_filtered_and_renumbered() -> None:
    users = [1, 1, 1, 2, 2, 2, 3, 1]
    items = [10, 20, 30, 20, 10, 99, 10, 20]
    times = [3, 1, 2, 1, 2, 3, 1, 0]
    seqs, ids = ratings_to_sequences(users, items, times, min_item_count=2, min_user_length=2, max_items=None)
    # item 99 and 30 are rated once -> dropped; ids by first appearance in time: 20 (t=0) -> 1, 10 (t=1) -> 2
    assert ids == {20: 1, 10: 2}
    # user 1: 20 (t0), 20 (t1), 10 (t3); user 2: 20 (t1), 10 (t2); user 3 keeps one item -> dropped
    assert seqs == [[1, 1, 2], [1, 2]]
    seqs, _ = ratings_to_sequences(users, items, times, min_item_count=2, min_user_length=2, max_items=2)
    assert seqs == [[1, 2], [1, 2]]


def test_split_is_by_user_and_seeded() -> None:
    s = split_users(100, seed=3)
    assert [len(s[k]) for k in ("train", "valid", "test")] == [80, 10, 10]
    assert sorted(np.concatenate(list(s.values())).tolist()) == list(range(100))
    assert all((a == b).all() for a, b in zip(s.values(), split_users(100, seed=3).values()))


def test_folder_round_trip(tmp_path: Path) -> None:
    splits = {"train": [[1, 2, 3], [4, 5]], "valid": [[2, 3]], "test": [[5, 1, 7]]}
    write_sequence_folder(splits, tmp_path)
    assert (tmp_path / "train_data.txt").read_text() == "1 2 3\n4 5\n"
    assert read_sequence_folder(tmp_path) == splits
    assert check_sequence_folder(tmp_path) == 7


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("1 2\n3 x\n", r"line 2: field 2 is not a positive integer"),
        ("1 2\n\n3 4\n", r"line 2: empty line"),
        ("1 0 2\n", r"line 1: field 2: item id 0 is the padding"),
        ("5\n", r"line 1: 1 item id\(s\)"),
        ("1 -2\n", r"line 1: field 2 is not a positive integer"),
        ("", r"no sequences"),
    ],
)
def test_malformed_lines_name_file_line_and_field(tmp_path: Path, text: str, message: str) -> None:
    write_sequence_folder({"train": [[1, 2]], "valid": [[1, 2]], "test": [[1, 2]]}, tmp_path)
    (tmp_path / SPLIT_FILES["valid"]).write_text(text)
    with pytest.raises(ValueError, match=message) as err:
        check_sequence_folder(tmp_path)
    assert "valid_data.txt" in str(err.value)


def test_blank_lines_at_the_end_crlf_and_a_bom_are_read(tmp_path: Path) -> None:
    """The official release's files end in a blank line (review pd82); Windows line ends and a BOM are text."""
    write_sequence_folder({"train": [[1, 2]], "valid": [[1, 2]], "test": [[1, 2]]}, tmp_path)
    (tmp_path / SPLIT_FILES["train"]).write_text("1 2 3\n4 5\n\n")
    (tmp_path / SPLIT_FILES["valid"]).write_bytes(b"\xef\xbb\xbf2 3\r\n3 4\r\n\r\n  \n")
    assert read_sequence_folder(tmp_path) == {"train": [[1, 2, 3], [4, 5]], "valid": [[2, 3], [3, 4]], "test": [[1, 2]]}


def test_missing_file_and_binary_bytes(tmp_path: Path) -> None:
    write_sequence_folder({"train": [[1, 2]], "valid": [[1, 2]], "test": [[1, 2]]}, tmp_path)
    (tmp_path / SPLIT_FILES["test"]).write_bytes(b"1 2\n\xff\xfe\n")
    with pytest.raises(ValueError, match="test_data.txt: not UTF-8"):
        check_sequence_folder(tmp_path)
    (tmp_path / SPLIT_FILES["test"]).unlink()
    with pytest.raises(ValueError, match="test_data.txt: missing"):
        check_sequence_folder(tmp_path)


def test_examples_histories_are_right_padded_windows() -> None:
    hist, tgt = examples([[1, 2, 3, 4]], max_len=2, targets="all")
    assert hist.tolist() == [[1, 0], [1, 2], [2, 3]] and tgt.tolist() == [2, 3, 4]
    hist, tgt = examples([[1, 2, 3, 4], [7, 8]], max_len=3, targets=1)  # the official: last id is the target
    assert hist.tolist() == [[1, 2, 3], [7, 0, 0]] and tgt.tolist() == [4, 8]
    hist, tgt = examples([[1, 2, 3]], max_len=3, targets=5)  # more targets than positions
    assert tgt.tolist() == [2, 3]
