"""Demonstration files: both formats round-trip, and each malformation names the file, line/row and field."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from components.imitation.demos import DemoFormatError, read_demonstrations, write_demonstrations
from components.imitation.gridworld import GridConfig, expert_demonstrations


@pytest.mark.parametrize("suffix", [".jsonl", ".npz"])
def test_round_trip(tmp_path: Path, suffix: str) -> None:
    demos = expert_demonstrations(GridConfig(), 3, np.random.default_rng(0))
    back = read_demonstrations(write_demonstrations(demos, tmp_path / f"d{suffix}"))
    for key in ("state", "action", "style", "episode", "t"):
        assert np.array_equal(back[key], demos[key]), key


def _jsonl(tmp_path: Path, rows: list[object]) -> Path:
    path = tmp_path / "d.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


GOOD = [
    {"episode": 0, "state": [10, 5], "action": 0, "style": 0},
    {"episode": 1, "state": [10, 5], "action": 0, "style": 1},
    {"episode": 2, "state": [10, 5], "action": 0, "style": 2},
]


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"episode": 3, "state": [10, 5], "action": 7, "style": 0}, r"line 4: field 'action': expected an int in 0..4"),
        ({"episode": 3, "state": [10, 11], "action": 0, "style": 0}, r"line 4: field 'state': coordinate 11 outside"),
        ({"episode": 3, "state": [10, 5], "action": 0}, r"line 4: field 'style' is missing"),
        ({"episode": 3, "state": [10, 5], "action": 0, "style": 3}, r"line 4: field 'style': expected an int in 0..2"),
        ({"episode": 0, "state": [9, 5], "action": 0, "style": 1}, r"line 4: field 'style': episode 0 has style 1"),
        ({"episode": -1, "state": [9, 5], "action": 0, "style": 1}, r"line 4: field 'episode'"),
        ([1, 2], r"line 4 holds a JSON list, expected an object"),
    ],
)
def test_jsonl_errors_name_line_and_field(tmp_path: Path, bad: object, message: str) -> None:
    path = _jsonl(tmp_path, [*GOOD, bad])
    with pytest.raises(DemoFormatError, match=message) as err:
        read_demonstrations(path)
    assert str(path) in str(err.value)


def test_npz_errors_name_row_and_field(tmp_path: Path) -> None:
    demos = expert_demonstrations(GridConfig(), 2, np.random.default_rng(0))
    demos["action"][5] = 9
    path = write_demonstrations(demos, tmp_path / "d.npz")
    with pytest.raises(DemoFormatError, match=r"d.npz: row 5: field 'action'"):
        read_demonstrations(path)
    np.savez(
        tmp_path / "f.npz",
        state=demos["state"].astype(float),
        action=demos["action"],
        style=demos["style"],
        episode=demos["episode"],
    )
    with pytest.raises(DemoFormatError, match=r"f.npz: field 'state': expected an integer array"):
        read_demonstrations(tmp_path / "f.npz")
    demos["action"][5] = 0
    only_two = {k: v[demos["style"] < 2] for k, v in demos.items()}
    with pytest.raises(DemoFormatError, match=r"no episode of style 2"):
        read_demonstrations(write_demonstrations(only_two, tmp_path / "g.npz"))
    (tmp_path / "h.csv").write_text("a,b\n")
    with pytest.raises(DemoFormatError, match=r"expected a .jsonl or .npz file"):
        read_demonstrations(tmp_path / "h.csv")


def test_episode_ids_fit_int64_and_damaged_archives_are_named(tmp_path: Path) -> None:
    """Review bc03 (episode 10**30), bc05 (a member with a bad CRC) and bc07 (an empty .npz): named, not crashed."""
    row = {"episode": 10**30, "state": [10, 5], "action": 0, "style": 0}
    with pytest.raises(DemoFormatError, match=r"line 1: field 'episode': expected an int in 0\.\.2\*\*63-1"):
        read_demonstrations(_jsonl(tmp_path, [row]))
    demos = expert_demonstrations(GridConfig(), 1, np.random.default_rng(0))
    path = write_demonstrations(demos, tmp_path / "d.npz")
    raw = bytearray(path.read_bytes())
    raw[raw.index(b"\x93NUMPY") + 130] ^= 0xFF
    path.write_bytes(bytes(raw))
    with pytest.raises(DemoFormatError, match=r"d\.npz: field 'state': cannot be read \(BadZipFile\)"):
        read_demonstrations(path)
    (tmp_path / "e.npz").write_bytes(b"")
    with pytest.raises(DemoFormatError, match=r"e\.npz: not a numpy \.npz archive \(the file is empty\)"):
        read_demonstrations(tmp_path / "e.npz")
