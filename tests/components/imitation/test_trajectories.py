"""Parquet trajectory files: a round trip, and each malformation names the file, the column and the row."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from components.imitation.trajectories import (
    TrajectoryFormatError,
    TrajectorySpec,
    read_trajectories,
    write_trajectories,
)

SPEC = TrajectorySpec(obs_dim=3, action_dim=2, n_styles=2, action_bounds=(-1.0, 1.0))


def test_round_trip_in_any_row_order(tmp_path: Path, demos) -> None:
    demos = demos()
    path = write_trajectories(demos, tmp_path / "d.parquet")
    table = pq.read_table(path)
    shuffled = table.take(np.random.default_rng(1).permutation(table.num_rows))  # rows in any order
    pq.write_table(shuffled.append_column("weight", pa.array(np.ones(table.num_rows))), tmp_path / "s.parquet")
    for name in ("d.parquet", "s.parquet"):
        back = read_trajectories(tmp_path / name, SPEC)
        for key in ("obs", "action", "style", "episode", "t"):
            assert np.array_equal(back[key], demos[key]), (name, key)


def _table(tmp_path: Path, demos: dict, change) -> Path:
    columns = pq.read_table(write_trajectories(demos, tmp_path / "good.parquet")).to_pydict()
    change(columns)
    path = tmp_path / "bad.parquet"
    pq.write_table(pa.table(columns), path)
    return path


def _set(column: str, row: int, value: object):
    def change(columns: dict) -> None:
        columns[column][row] = value

    return change


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda c: c.pop("obs_2"), r"column 'obs_2' is missing"),
        (lambda c: c.pop("action_1"), r"column 'action_1' is missing"),
        (lambda c: c.pop("style"), r"column 'style' is missing"),
        (lambda c: c.update(obs_1=[str(v) for v in c["obs_1"]]), r"column 'obs_1': expected numbers"),
        (_set("obs_0", 7, float("nan")), r"column 'obs_0' row 7: expected a finite number"),
        (_set("action_0", 3, None), r"column 'action_0' row 3: missing value"),
        (_set("action_1", 4, 1.5), r"column 'action_1' row 4: 1\.5 outside \[-1, 1\]"),
        (_set("style", 9, 2), r"column 'style' row 9: 2 outside \[0, 1\]"),
        (_set("style", 6, 1.5), r"column 'style' row 6: expected an integer"),
        (_set("style", 6, 0), r"column 'style' row 6: trajectory 1 changes style"),
        (_set("t", 2, 1), r"column 't' row 2: step 1 of trajectory 0 appears twice"),
        (lambda c: c.update(style=[0] * len(c["style"])), r"no trajectory of style 1"),
    ],
)
def test_errors_name_file_column_and_row(tmp_path: Path, demos, change, message: str) -> None:
    path = _table(tmp_path, demos(), change)
    with pytest.raises(TrajectoryFormatError, match=message) as err:
        read_trajectories(path, SPEC)
    assert str(path) in str(err.value)


def test_unreadable_or_misnamed_files(tmp_path: Path) -> None:
    (tmp_path / "x.parquet").write_bytes(b"not parquet")
    with pytest.raises(TrajectoryFormatError, match=r"x.parquet: not a readable Parquet file"):
        read_trajectories(tmp_path / "x.parquet", SPEC)
    (tmp_path / "x.csv").write_text("a\n")
    with pytest.raises(TrajectoryFormatError, match=r"expected a .parquet file"):
        read_trajectories(tmp_path / "x.csv", SPEC)
    with pytest.raises(TrajectoryFormatError, match=r"no such file"):
        read_trajectories(tmp_path / "none.parquet", SPEC)


def test_integer_columns_keep_exact_ids_and_refuse_values_beyond_int64(tmp_path: Path, demos) -> None:
    """A float id of 1e20 once wrapped in the int64 cast and the message blamed column 't' (review bc26)."""
    path = _table(tmp_path, demos(), _set("traj_id", 0, 1e20))
    with pytest.raises(TrajectoryFormatError, match=r"column 'traj_id' row 0: 1e\+20 is beyond a 64-bit integer"):
        read_trajectories(path, SPEC)
    big = 2**60  # ids beyond 2**53 stay distinct: read as integers, not floats
    path = _table(tmp_path, demos(), lambda c: c.update(traj_id=[big + e for e in c["traj_id"]]))
    assert read_trajectories(path, SPEC)["episode"].max() == 3
    path = _table(tmp_path, demos(), _set("obs_1", 2, 1e300))
    with pytest.raises(TrajectoryFormatError, match=r"column 'obs_1' row 2: 1e\+300 is above 1e\+30 in magnitude"):
        read_trajectories(path, SPEC)
