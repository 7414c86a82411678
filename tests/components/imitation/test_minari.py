"""Minari datasets (``main_data.hdf5``): read into the arrays the Parquet reader returns, and each malformation
named by file, episode and dataset."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

h5py = pytest.importorskip("h5py")

from components.imitation.minari import read_minari, write_minari  # noqa: E402
from components.imitation.trajectories import (  # noqa: E402
    TrajectoryFormatError,
    TrajectorySpec,
    read_trajectories,
    write_trajectories,
)

SPEC = TrajectorySpec(obs_dim=3, action_dim=2, n_styles=2, action_bounds=(-1.0, 1.0))
DISCRETE = TrajectorySpec(obs_dim=3, action_dim=0, n_styles=2, n_actions=4)


def test_a_minari_dataset_reads_as_its_parquet_twin(tmp_path: Path, demos) -> None:
    demos = demos()
    parquet = read_trajectories(write_trajectories(demos, tmp_path / "d.parquet"), SPEC)
    for final_obs in (True, False):
        minari = read_trajectories(write_minari(demos, tmp_path / f"main_data_{final_obs}.hdf5", final_obs), SPEC)
        for key in ("obs", "action", "style", "episode", "t"):
            assert np.array_equal(minari[key], parquet[key]), (final_obs, key)


def test_episodes_are_taken_in_id_order_and_style_from_the_attribute(tmp_path: Path, demos) -> None:
    path = write_minari(demos(n_traj=12, length=2), tmp_path / "main_data.hdf5")
    with h5py.File(path, "r+") as handle:  # the style as a group attribute in place of infos/style
        for name in handle:
            handle[name].attrs["style"] = int(handle[name]["infos/style"][0])
            del handle[name]["infos"]
    back = read_minari(path, SPEC)
    # episode_10 and episode_11 come after episode_9 (numeric, not lexical, order)
    assert np.array_equal(back["style"], np.repeat(np.arange(12) % 2, 2))
    assert np.array_equal(back["episode"], np.repeat(np.arange(12), 2))


def test_episodes_in_an_additional_file_are_reached_through_external_links(tmp_path: Path, demos) -> None:
    demos = demos()
    extra = write_minari({k: v[10:] for k, v in demos.items()}, tmp_path / "additional_data_0.hdf5")
    main = write_minari({k: v[:10] for k, v in demos.items()}, tmp_path / "main_data.hdf5")
    with h5py.File(main, "r+") as handle:
        for i in range(2):
            handle[f"episode_{i + 2}"] = h5py.ExternalLink(extra.name, f"episode_{i}")
    back = read_minari(main, SPEC)
    assert np.array_equal(back["obs"], demos["obs"]) and np.array_equal(back["episode"], demos["episode"])


def test_discrete_actions(tmp_path: Path, demos) -> None:
    demos = {**demos(), "action": np.arange(20) % 4}
    assert np.array_equal(read_minari(write_minari(demos, tmp_path / "m.hdf5"), DISCRETE)["action"], demos["action"])


def _edit(change: Callable[[h5py.File], object]) -> Callable[[Path, dict], Path]:
    def make(tmp_path: Path, demos: dict) -> Path:
        path = write_minari(demos, tmp_path / "main_data.hdf5")
        with h5py.File(path, "r+") as handle:
            change(handle)
        return path

    return make


def _replace(dataset: str, value: Callable[[np.ndarray], np.ndarray]) -> Callable[[h5py.File], None]:
    def change(handle: h5py.File) -> None:
        old = handle[dataset][()]
        del handle[dataset]
        handle[dataset] = value(old)

    return change


def _dict_observations(handle: h5py.File) -> None:
    del handle["episode_1/observations"]
    handle.create_group("episode_1/observations").create_dataset("position", data=np.zeros((6, 3)))


def _style_changes(handle: h5py.File) -> None:
    style = handle["episode_2/infos/style"]
    style[3] = 1 - style[0]


def _no_style(handle: h5py.File) -> None:
    del handle["episode_3/infos"]


def _only_style_zero(handle: h5py.File) -> None:
    for name in handle:
        handle[f"{name}/infos/style"][...] = 0


def _empty_episode(handle: h5py.File) -> None:
    for key in ("actions", "observations"):
        old = handle[f"episode_0/{key}"][()]
        del handle[f"episode_0/{key}"]
        handle[f"episode_0/{key}"] = old[:0]


def _no_episodes(handle: h5py.File) -> None:
    for name in list(handle):
        del handle[name]
    handle.create_dataset("observations", data=np.zeros((3, 3)))


def _broken_link(handle: h5py.File) -> None:
    handle["episode_9"] = h5py.ExternalLink("missing.hdf5", "episode_0")


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda tmp, _: (tmp / "x.hdf5").write_bytes(b"not hdf5 at all") and tmp / "x.hdf5", "not a readable HDF5"),
        (_edit(_no_episodes), "no episode_<id> groups"),
        (_edit(_dict_observations), "episode_1/observations is a group"),
        (_edit(_replace("episode_0/observations", lambda o: o[:, :2])), r"episode_0/observations has shape \(6, 2\)"),
        (_edit(_replace("episode_1/observations", lambda o: o[:3])), "episode_1/observations has 3 rows for 5"),
        (_edit(_replace("episode_2/actions", lambda a: a * 3)), "episode_2/actions step 0: .* outside"),
        (_edit(_replace("episode_0/actions", lambda a: np.where(a > 0, np.nan, a))), "episode_0/actions step"),
        (_edit(_replace("episode_0/actions", lambda a: a.astype("S8"))), "expected numbers"),
        (_edit(_style_changes), "episode_2/infos/style changes within the episode"),
        (_edit(_no_style), "episode_3 has no style"),
        (_edit(_only_style_zero), "no episode of style 1"),
        (_edit(_replace("episode_1/infos/style", lambda s: s + 5)), "outside 0..1"),
        (_edit(_empty_episode), "episode_0 has no steps"),
        (_edit(_broken_link), "episode_9 is a link to a file or group that cannot be read"),
    ],
)
def test_malformed_datasets_are_refused_by_name(tmp_path: Path, demos, make, message: str) -> None:
    with pytest.raises(TrajectoryFormatError, match=message):
        read_trajectories(make(tmp_path, demos()), SPEC)
