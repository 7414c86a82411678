"""Trajectories kept as a Minari dataset (Farama's offline-RL format), read into the arrays of
:func:`components.imitation.trajectories.read_trajectories`.

A Minari dataset is a folder ``<dataset id>/data/`` whose ``main_data.hdf5`` holds one HDF5 group per episode,
``episode_<id>``, with the datasets of every ``env.step`` call:

* ``observations``: ``[T + 1, obs_dim]`` (the reset observation first; the last one, after the final step, is not a
  state an action was taken in and is dropped);
* ``actions``: ``[T, action_dim]`` for a continuous action (``[T]`` allowed when ``action_dim`` is 1), or ``[T]``
  integers for a discrete one;
* ``rewards``, ``terminations``, ``truncations``: ``[T]`` (not read).

Minari has no notion of a demonstrator's style, which imitation from several styles needs. It is read from the
episode, first found of: the episode group's attribute ``style`` (an int), or its ``infos/style`` dataset (one
value per step, the same on every step; Minari records infos from the reset on, so ``T + 1`` values are allowed).
Dictionary and tuple observation spaces (an ``observations`` group) are refused: flatten them in the order your
policy expects before writing the dataset. Episodes written to ``additional_data_*.hdf5`` files are reached through
the external links Minari puts in ``main_data.hdf5``.

Every array's shape and type is checked before it is read; anything that does not match is a
``TrajectoryFormatError`` naming the file, the episode and the dataset (never quoting other contents).
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path

import numpy as np

from components.data.npy_files import MAX_ABS_VALUE
from components.imitation.trajectories import TrajectoryFormatError, TrajectorySpec
from components.io import quote_value

SUFFIXES = (".hdf5", ".h5")
# bounds checked on the shapes before any array is read
MAX_EPISODES = 100_000
MAX_STEPS = 20_000_000
EPISODE = re.compile(r"episode_(\d{1,18})")


def read_minari(path: str | os.PathLike[str], spec: TrajectorySpec) -> dict[str, np.ndarray]:
    """Read and check a Minari ``main_data.hdf5``; returns ``obs``, ``action``, ``style``, ``episode`` (0 ..
    episodes-1 in order of the episode ids) and ``t``, as :func:`~components.imitation.trajectories.read_trajectories`
    does."""
    import h5py

    path = Path(path)
    if not path.is_file():
        raise TrajectoryFormatError(f"{path}: no such file")
    try:
        handle = h5py.File(path, "r")
    except (OSError, ValueError) as err:
        raise TrajectoryFormatError(f"{path}: not a readable HDF5 file ({type(err).__name__})") from None
    with handle:
        try:
            names = _episode_names(path, handle)
            episodes = [_episode(path, handle, name, spec) for name in names]
        except (KeyError, OSError, RuntimeError) as err:  # a broken link or a damaged block inside the file
            raise TrajectoryFormatError(f"{path}: unreadable HDF5 content ({type(err).__name__})") from None
    styles = np.array([style for _, _, style in episodes], dtype=np.int64)
    missing = sorted(set(range(spec.n_styles)) - set(styles.tolist()))
    if missing:
        raise TrajectoryFormatError(
            f"{path}: no episode of style {missing[0]} (every style 0..{spec.n_styles - 1} needs one)"
        )
    lengths = [len(action) for _, action, _ in episodes]
    return {
        "obs": np.concatenate([obs for obs, _, _ in episodes]),
        "action": np.concatenate([action for _, action, _ in episodes]),
        "style": np.repeat(styles, lengths),
        "episode": np.repeat(np.arange(len(episodes), dtype=np.int64), lengths),
        "t": np.concatenate([np.arange(n, dtype=np.int64) for n in lengths]),
    }


def _episode_names(path: Path, handle) -> list[str]:
    import h5py

    ids = []
    for name in handle.keys():
        match = EPISODE.fullmatch(name)
        if match:
            node = handle.get(name)
            if node is None:  # a link (to an additional_data file) that does not resolve
                raise TrajectoryFormatError(f"{path}: {name} is a link to a file or group that cannot be read")
            if not isinstance(node, h5py.Group):
                raise TrajectoryFormatError(f"{path}: {name} is not a group")
            ids.append((int(match.group(1)), name))
    if not ids:
        raise TrajectoryFormatError(f"{path}: no episode_<id> groups (not a Minari dataset's main_data.hdf5)")
    if len(ids) > MAX_EPISODES:
        raise TrajectoryFormatError(f"{path}: {len(ids)} episodes, more than {MAX_EPISODES:,}")
    steps = 0
    for _, name in ids:
        actions = handle[name].get("actions")
        steps += actions.shape[0] if isinstance(actions, h5py.Dataset) and actions.shape else 0
    if steps > MAX_STEPS:
        raise TrajectoryFormatError(f"{path}: {steps:,} steps, more than {MAX_STEPS:,}")
    return [name for _, name in sorted(ids)]


def _dataset(path: Path, group, name: str, where: str, dims: tuple[int, ...], integer: bool = False) -> np.ndarray:
    """``group[name]`` as an array of one of the shapes ``dims`` allows (checked before reading): ``dims`` gives
    the trailing sizes after the step axis (``()`` for one value per step)."""
    import h5py

    node = group.get(name)
    if node is None:
        raise TrajectoryFormatError(f"{path}: {where}/{name} is missing")
    if isinstance(node, h5py.Group):
        raise TrajectoryFormatError(
            f"{path}: {where}/{name} is a group (a dictionary or tuple space): flatten it to one array per step"
        )
    if node.dtype.kind not in "biuf":
        raise TrajectoryFormatError(f"{path}: {where}/{name}: expected numbers, got type {node.dtype}")
    if len(node.shape) < 1 or tuple(node.shape[1:]) not in dims:
        wanted = " or ".join(str(("steps", *d)).replace("'", "") for d in dims)
        raise TrajectoryFormatError(f"{path}: {where}/{name} has shape {tuple(node.shape)}, expected {wanted}")
    values = np.asarray(node[()])
    if values.dtype.kind == "b":
        values = values.astype(np.int64)
    if integer and values.dtype.kind == "f":
        bad = np.flatnonzero(~np.isfinite(values) | (values != np.round(values)) | (np.abs(values) >= 2.0**62))
        if len(bad):
            raise TrajectoryFormatError(f"{path}: {where}/{name} step {bad[0]}: expected an integer")
        values = values.astype(np.int64)
    elif not integer:
        values = values.astype(np.float64)
        flat = values.reshape(len(values), -1) if len(values) else values.reshape(0, 1)
        bad = np.flatnonzero(~np.isfinite(flat).all(axis=1) | (np.abs(np.nan_to_num(flat)) > MAX_ABS_VALUE).any(axis=1))
        if len(bad):
            raise TrajectoryFormatError(
                f"{path}: {where}/{name} step {bad[0]}: not a finite number of magnitude at most {MAX_ABS_VALUE:.0e}"
            )
    return values


def _episode(path: Path, handle, name: str, spec: TrajectorySpec) -> tuple[np.ndarray, np.ndarray, int]:
    group = handle[name]
    if spec.action_dim:
        dims = ((spec.action_dim,), ()) if spec.action_dim == 1 else ((spec.action_dim,),)
        action = _dataset(path, group, "actions", name, dims).reshape(-1, spec.action_dim)
        if not len(action):
            raise TrajectoryFormatError(f"{path}: {name} has no steps")
        low, high = spec.action_bounds
        bad = np.flatnonzero(((action < low) | (action > high)).any(axis=1))
        if len(bad):
            value = action[bad[0]][(action[bad[0]] < low) | (action[bad[0]] > high)][0]
            raise TrajectoryFormatError(
                f"{path}: {name}/actions step {bad[0]}: {quote_value(float(value))} outside [{low:g}, {high:g}]"
            )
    else:
        action = _dataset(path, group, "actions", name, ((), (1,)), integer=True).reshape(-1)
        if not len(action):
            raise TrajectoryFormatError(f"{path}: {name} has no steps")
        bad = np.flatnonzero((action < 0) | (action >= spec.n_actions))
        if len(bad):
            raise TrajectoryFormatError(
                f"{path}: {name}/actions step {bad[0]}: {quote_value(int(action[bad[0]]))} outside "
                f"[0, {spec.n_actions - 1}]"
            )
    steps = len(action)
    obs = _dataset(path, group, "observations", name, ((spec.obs_dim,),))
    if len(obs) not in (steps, steps + 1):
        raise TrajectoryFormatError(
            f"{path}: {name}/observations has {len(obs)} rows for {steps} actions (expected {steps + 1})"
        )
    return obs[:steps], action, _style(path, group, name, steps, spec)


def _style(path: Path, group, name: str, steps: int, spec: TrajectorySpec) -> int:
    if "style" in group.attrs:
        raw = np.asarray(group.attrs["style"]).reshape(-1)
        if raw.size != 1 or raw.dtype.kind not in "biuf":
            raise TrajectoryFormatError(f"{path}: {name} attribute 'style': expected one integer")
        values = raw
        where = f"{name} attribute 'style'"
    else:
        infos = group.get("infos")
        if infos is None or "style" not in infos:
            raise TrajectoryFormatError(
                f"{path}: {name} has no style: give each episode group an integer attribute 'style' or an "
                "infos/style dataset (0 .. styles-1)"
            )
        values = _dataset(path, infos, "style", f"{name}/infos", ((), (1,)), integer=True).reshape(-1)
        where = f"{name}/infos/style"
        if len(values) not in (steps, steps + 1):
            raise TrajectoryFormatError(f"{path}: {where} has {len(values)} values for {steps} steps")
        if (values != values[0]).any():
            raise TrajectoryFormatError(f"{path}: {where} changes within the episode")
    value = float(values[0])
    if not math.isfinite(value) or value != round(value) or not 0 <= value < spec.n_styles:
        raise TrajectoryFormatError(f"{path}: {where}: {quote_value(value)} outside 0..{spec.n_styles - 1}")
    return int(value)


def write_minari(demos: dict[str, np.ndarray], path: str | os.PathLike[str], final_obs: bool = True) -> Path:
    """Write ``obs``, ``action``, ``style``, ``episode`` arrays (rows of an episode in time order) as a Minari
    ``main_data.hdf5``: one ``episode_<id>`` group per episode with ``observations`` (the last row repeated as the
    observation after the final step when ``final_obs``), ``actions``, ``rewards``, ``terminations``,
    ``truncations``, ``infos/style`` and the ``id`` / ``total_steps`` attributes, and the file's
    ``total_episodes`` / ``total_steps``. The file is written beside ``path`` and moved into place."""
    import h5py

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    episode, obs, action = np.asarray(demos["episode"]), np.asarray(demos["obs"]), np.asarray(demos["action"])
    partial = path.with_name(f".{path.name}.partial")
    with h5py.File(partial, "w") as handle:
        ids = np.unique(episode)
        for i, ep in enumerate(ids):
            rows = np.flatnonzero(episode == ep)
            group = handle.create_group(f"episode_{i}")
            steps = len(rows)
            group.create_dataset("observations", data=obs[np.r_[rows, rows[-1:]]] if final_obs else obs[rows])
            group.create_dataset("actions", data=action[rows])
            group.create_dataset("rewards", data=np.zeros(steps))
            group.create_dataset("terminations", data=np.zeros(steps, dtype=bool))
            group.create_dataset("truncations", data=np.r_[np.zeros(steps - 1, dtype=bool), True])
            group.create_group("infos").create_dataset(
                "style", data=np.full(steps + 1, int(np.asarray(demos["style"])[rows[0]]))
            )
            group.attrs.update({"id": i, "total_steps": steps})
        handle.attrs.update({"total_episodes": len(ids), "total_steps": len(episode)})
    os.replace(partial, path)
    return path
