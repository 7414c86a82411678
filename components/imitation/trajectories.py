"""Trajectory files of continuous-state environments: Parquet, one row per step, checked before use.

Columns (other columns, e.g. a ``weight``, are ignored):

* ``traj_id``: an int naming the trajectory; ``t``: an int >= 0, the step within it (distinct per trajectory;
  rows may come in any order, they are sorted by ``(traj_id, t)``);
* ``obs_0 .. obs_{d-1}``: the observation, finite numbers of magnitude at most 1e30 (``d`` = the environment's
  observation size);
* ``action_0 .. action_{k-1}``: a continuous action, finite numbers within ``action_bounds``, or one int column
  ``action`` in ``0 .. n_actions-1`` for a discrete one;
* ``style``: an int in ``0 .. n_styles-1``, the same on every row of a trajectory; every style needs a trajectory.

A Minari dataset's ``main_data.hdf5`` (``.hdf5`` / ``.h5``) is read as well, by
:func:`components.imitation.minari.read_minari` (the episode's style from its attribute or ``infos``).

Anything else is a ``TrajectoryFormatError`` naming the file, the column and the row (0-based, in file order);
a message quotes a number it refuses, never other contents of the file.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from components.data.npy_files import MAX_ABS_VALUE
from components.io import quote_value

INT64_MAX = 2**63 - 1


class TrajectoryFormatError(ValueError):
    """A trajectory file that does not match the documented format."""


@dataclass(frozen=True)
class TrajectorySpec:
    """What a file must hold: observation size, continuous action size (0: one discrete ``action`` column with
    ``n_actions`` values), number of styles and the bounds of continuous actions."""

    obs_dim: int
    action_dim: int
    n_styles: int
    n_actions: int = 0
    action_bounds: tuple[float, float] = (-math.inf, math.inf)

    @property
    def obs_columns(self) -> list[str]:
        return [f"obs_{i}" for i in range(self.obs_dim)]

    @property
    def action_columns(self) -> list[str]:
        return [f"action_{i}" for i in range(self.action_dim)] if self.action_dim else ["action"]


def _column(path: Path, table, name: str, integer: bool) -> np.ndarray:
    import pyarrow as pa

    column = table.column(name)
    kind = column.type
    if not (pa.types.is_integer(kind) or pa.types.is_floating(kind)):
        raise TrajectoryFormatError(f"{path}: column {name!r}: expected numbers, got type {kind}")
    if column.null_count:
        row = next(i for i, v in enumerate(column.is_null().to_pylist()) if v)
        raise TrajectoryFormatError(f"{path}: column {name!r} row {row}: missing value")
    raw = column.to_numpy(zero_copy_only=False)
    if integer and pa.types.is_integer(kind):  # exact: ids beyond 2**53 stay distinct (a float64 would merge them)
        if pa.types.is_unsigned_integer(kind) and len(raw) and int(raw.max()) > INT64_MAX:
            row = int(np.argmax(raw))
            raise TrajectoryFormatError(
                f"{path}: column {name!r} row {row}: {quote_value(int(raw[row]))} is beyond a 64-bit integer"
            )
        return raw.astype(np.int64)
    values = raw.astype(np.float64)
    bad = np.flatnonzero(~np.isfinite(values) | ((values != np.round(values)) if integer else False))
    if len(bad):
        what = "an integer" if integer else "a finite number"
        raise TrajectoryFormatError(
            f"{path}: column {name!r} row {bad[0]}: expected {what}, got {quote_value(float(values[bad[0]]))}"
        )
    if integer:  # whole floats, cast to int64 below: one beyond its range would wrap (and blame another column)
        big = np.flatnonzero(np.abs(values) >= 2.0**63)
        if len(big):
            raise TrajectoryFormatError(
                f"{path}: column {name!r} row {big[0]}: {quote_value(float(values[big[0]]))} is beyond a 64-bit integer"
            )
        return values.astype(np.int64)
    huge = np.flatnonzero(np.abs(values) > MAX_ABS_VALUE)
    if len(huge):
        raise TrajectoryFormatError(
            f"{path}: column {name!r} row {huge[0]}: {quote_value(float(values[huge[0]]))} is "
            f"above {MAX_ABS_VALUE:.0e} in magnitude (the policies compute in float32)"
        )
    return values


def read_trajectories(path: str | os.PathLike[str], spec: TrajectorySpec) -> dict[str, np.ndarray]:
    """Read and check a trajectory file (Parquet, or a Minari ``.hdf5``); returns, sorted by ``(traj_id, t)``:
    ``obs [N, obs_dim]`` float64,
    ``action [N, action_dim]`` float64 (or ``[N]`` int64 for a discrete action), ``style [N]``, ``episode [N]``
    (0 .. trajectories-1 in order of ``traj_id``), ``t [N]`` (0 .. length-1 within each trajectory)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = Path(path)
    if not path.is_file():
        raise TrajectoryFormatError(f"{path}: no such file")
    if path.suffix.lower() in (".hdf5", ".h5"):
        from components.imitation.minari import read_minari

        return read_minari(path, spec)
    if path.suffix.lower() != ".parquet":
        raise TrajectoryFormatError(f"{path}: expected a .parquet file or a Minari dataset's main_data.hdf5")
    try:
        table = pq.read_table(path)
    except (pa.ArrowException, OSError) as err:
        raise TrajectoryFormatError(f"{path}: not a readable Parquet file ({type(err).__name__})") from None
    columns = ["traj_id", "t", *spec.obs_columns, *spec.action_columns, "style"]
    for name in columns:
        if name not in table.column_names:
            raise TrajectoryFormatError(f"{path}: column {name!r} is missing (expected {', '.join(columns)})")
    if table.num_rows == 0:
        raise TrajectoryFormatError(f"{path}: no rows")
    integer = {"traj_id", "t", "style"} | ({"action"} if not spec.action_dim else set())
    data = {name: _column(path, table, name, name in integer) for name in columns}
    for name, (low, high) in [("t", (0, math.inf)), ("style", (0, spec.n_styles - 1))] + (
        [(c, spec.action_bounds) for c in spec.action_columns]
        if spec.action_dim
        else [("action", (0, spec.n_actions - 1))]
    ):
        bad = np.flatnonzero((data[name] < low) | (data[name] > high))
        if len(bad):
            value = data[name][bad[0]]
            shown = quote_value(int(value) if name in integer else float(value))
            raise TrajectoryFormatError(f"{path}: column {name!r} row {bad[0]}: {shown} outside [{low:g}, {high:g}]")
    traj = data["traj_id"].astype(np.int64)
    order = np.lexsort((data["t"], traj))
    sorted_traj, sorted_t, sorted_style = traj[order], data["t"][order], data["style"][order]
    same = sorted_traj[1:] == sorted_traj[:-1]
    repeat = np.flatnonzero(same & (sorted_t[1:] == sorted_t[:-1]))
    if len(repeat):
        raise TrajectoryFormatError(
            f"{path}: column 't' row {order[repeat[0] + 1]}: step "
            f"{int(sorted_t[repeat[0] + 1])} of trajectory {int(sorted_traj[repeat[0]])} "
            "appears twice"
        )
    switch = np.flatnonzero(same & (sorted_style[1:] != sorted_style[:-1]))
    if len(switch):
        raise TrajectoryFormatError(
            f"{path}: column 'style' row {order[switch[0] + 1]}: trajectory {int(sorted_traj[switch[0]])} changes style"
        )
    missing = sorted(set(range(spec.n_styles)) - set(sorted_style.astype(np.int64).tolist()))
    if missing:
        raise TrajectoryFormatError(
            f"{path}: column 'style': no trajectory of style {missing[0]} "
            f"(every style 0..{spec.n_styles - 1} needs one)"
        )
    episode = np.unique(sorted_traj, return_inverse=True)[1].astype(np.int64)
    starts = np.r_[0, np.flatnonzero(~same) + 1]
    t = np.arange(len(order)) - np.repeat(starts, np.diff(np.r_[starts, len(order)]))
    action = (
        np.stack([data[c][order] for c in spec.action_columns], axis=1)
        if spec.action_dim
        else data["action"][order].astype(np.int64)
    )
    return {
        "obs": np.stack([data[c][order] for c in spec.obs_columns], axis=1),
        "action": action,
        "style": sorted_style.astype(np.int64),
        "episode": episode,
        "t": t.astype(np.int64),
    }


def write_trajectories(demos: dict[str, np.ndarray], path: str | os.PathLike[str]) -> Path:
    """Write ``obs``, ``action``, ``style``, ``episode``, ``t`` arrays as the Parquet file
    :func:`read_trajectories` reads (``traj_id`` = ``episode``)."""
    from components.io import save_table

    obs, action = np.asarray(demos["obs"]), np.asarray(demos["action"])
    columns = {"traj_id": np.asarray(demos["episode"]), "t": np.asarray(demos["t"])}
    columns.update({f"obs_{i}": obs[:, i] for i in range(obs.shape[1])})
    columns.update(
        {f"action_{i}": action[:, i] for i in range(action.shape[1])} if action.ndim == 2 else {"action": action}
    )
    columns["style"] = np.asarray(demos["style"])
    import pyarrow as pa

    return save_table(pa.table(columns), path)
