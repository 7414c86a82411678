"""Demonstration files of the corridor gridworld: the reader (JSONL or ``.npz``), its checks, and a writer.

A demonstration set is a sequence of steps, each a ``(state, action, style, episode)`` tuple:

* ``state``: the cell ``[row, col]``, two ints in ``0 .. size-1`` (row 0 is the top; 11 x 11 by default);
* ``action``: an int, 0 up, 1 down, 2 left, 3 right, 4 noop (:data:`components.imitation.gridworld.ACTIONS`);
* ``style``: the expert's style id, an int in ``0 .. n_styles-1`` (0 left, 1 centre, 2 right corridor),
  the same on every step of an episode;
* ``episode``: an int >= 0 naming the episode; an episode's steps appear in time order.

**JSONL** (``.jsonl``): one JSON object per line and step, e.g.
``{"episode": 0, "state": [10, 5], "action": 0, "style": 1}`` (other keys are ignored; blank lines skipped).
**NPZ** (``.npz``): integer arrays ``state [N, 2]``, ``action [N]``, ``style [N]``, ``episode [N]`` (rows in
time order within each episode; no pickled objects).

Every style must have at least one episode. Anything else is a ``DemoFormatError`` naming the file, the line
(JSONL, 1-based) or row (NPZ, 0-based) and the field; a message quotes a number it refuses, never the
file's text.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from components.data.npy_files import read_npz
from components.imitation.gridworld import N_ACTIONS, GridConfig
from components.io import quote_value, read_json_lines

FIELDS = ("state", "action", "style", "episode")
MAX_EPISODE = 2**63 - 1  # episodes are int64 arrays


class DemoFormatError(ValueError):
    """A demonstration file that does not match the documented format."""


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_values(where: str, state: Any, action: Any, style: Any, episode: Any, cfg: GridConfig) -> None:
    if not (isinstance(state, list) and len(state) == 2 and all(_int(v) for v in state)):
        raise DemoFormatError(f"{where}: field 'state': expected [row, col], two ints, got {quote_value(state)}")
    for v in state:
        if not 0 <= v < cfg.size:
            raise DemoFormatError(f"{where}: field 'state': coordinate {quote_value(v)} outside 0..{cfg.size - 1}")
    if not (_int(action) and 0 <= action < N_ACTIONS):
        raise DemoFormatError(
            f"{where}: field 'action': expected an int in 0..{N_ACTIONS - 1}, got {quote_value(action)}"
        )
    if not (_int(style) and 0 <= style < cfg.n_styles):
        raise DemoFormatError(
            f"{where}: field 'style': expected an int in 0..{cfg.n_styles - 1}, got {quote_value(style)}"
        )
    if not (_int(episode) and 0 <= episode <= MAX_EPISODE):
        raise DemoFormatError(f"{where}: field 'episode': expected an int in 0..2**63-1, got {quote_value(episode)}")


def _read_jsonl(path: Path, cfg: GridConfig) -> dict[str, np.ndarray]:
    rows: list[tuple[int, int, int, int, int]] = []
    for number, obj in read_json_lines(path, lambda problem: DemoFormatError(f"{path}: {problem}")):
        where = f"{path}: line {number}"
        for key in FIELDS:
            if key not in obj:
                raise DemoFormatError(f"{where}: field {key!r} is missing")
        _check_values(where, obj["state"], obj["action"], obj["style"], obj["episode"], cfg)
        rows.append((obj["state"][0], obj["state"][1], obj["action"], obj["style"], obj["episode"], number))
    if not rows:
        raise DemoFormatError(f"{path}: no demonstration steps")
    a = np.asarray(rows, dtype=np.int64)
    return {"state": a[:, :2], "action": a[:, 2], "style": a[:, 3], "episode": a[:, 4], "where": a[:, 5]}


def _read_npz(path: Path, cfg: GridConfig) -> dict[str, np.ndarray]:
    try:  # headers first (no pickle, nothing beyond memory), then every member to its CRC
        arrays = read_npz(path, FIELDS, noun="field")
    except ValueError as err:
        raise DemoFormatError(f"{path}: {err}") from None
    for key, value in arrays.items():
        if value.dtype.kind not in "iu":
            raise DemoFormatError(f"{path}: field {key!r}: expected an integer array, got dtype {value.dtype}")
        if value.dtype.kind == "u" and value.size and int(value.max()) > MAX_EPISODE:  # would wrap in int64
            raise DemoFormatError(
                f"{path}: row {int(np.argmax(value.reshape(len(value), -1).max(1)))}: field "
                f"{key!r}: a value beyond 2**63-1"
            )
    n = len(arrays["action"])
    if arrays["state"].shape != (n, 2):
        raise DemoFormatError(f"{path}: field 'state': expected shape [{n}, 2], got {list(arrays['state'].shape)}")
    for key in ("action", "style", "episode"):
        if arrays[key].shape != (n,):
            raise DemoFormatError(f"{path}: field {key!r}: expected shape [{n}], got {list(arrays[key].shape)}")
    if n == 0:
        raise DemoFormatError(f"{path}: no demonstration steps")
    state, action, style, episode = (arrays[k].astype(np.int64) for k in FIELDS)
    bad = np.flatnonzero(
        (state < 0).any(1)
        | (state >= cfg.size).any(1)
        | (action < 0)
        | (action >= N_ACTIONS)
        | (style < 0)
        | (style >= cfg.n_styles)
        | (episode < 0)
    )
    if len(bad):
        row = int(bad[0])
        _check_values(
            f"{path}: row {row}",
            [int(v) for v in state[row]],
            int(action[row]),
            int(style[row]),
            int(episode[row]),
            cfg,
        )
    return {"state": state, "action": action, "style": style, "episode": episode, "where": np.arange(n)}


def read_demonstrations(path: str | os.PathLike[str], cfg: GridConfig | None = None) -> dict[str, np.ndarray]:
    """Read and check a demonstration file; returns int64 arrays ``state [N, 2]``, ``action``, ``style``,
    ``episode`` and ``t`` (each step's index within its episode), in file order."""
    cfg = cfg or GridConfig()
    path = Path(path)
    if not path.is_file():
        raise DemoFormatError(f"{path}: no such file")
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        demos = _read_jsonl(path, cfg)
    elif suffix == ".npz":
        demos = _read_npz(path, cfg)
    else:
        raise DemoFormatError(f"{path}: expected a .jsonl or .npz file")
    where = demos.pop("where")
    episode, style = demos["episode"], demos["style"]
    first_style: dict[int, tuple[int, int]] = {}
    unit = "line" if suffix == ".jsonl" else "row"
    for i, (e, s) in enumerate(zip(episode.tolist(), style.tolist())):
        if e not in first_style:
            first_style[e] = (s, i)
        elif first_style[e][0] != s:
            raise DemoFormatError(
                f"{path}: {unit} {where[i]}: field 'style': episode "
                f"{e} has style {s} here but style {first_style[e][0]} earlier"
            )
    missing = sorted(set(range(cfg.n_styles)) - set(style.tolist()))
    if missing:
        raise DemoFormatError(
            f"{path}: field 'style': no episode of style {missing[0]} (every style 0..{cfg.n_styles - 1} needs one)"
        )
    t = np.zeros(len(episode), dtype=np.int64)
    seen: dict[int, int] = {}
    for i, e in enumerate(episode.tolist()):
        t[i] = seen.get(e, 0)
        seen[e] = t[i] + 1
    return {**demos, "t": t}


def check_demonstrations(path: Path) -> int:
    """The ``DataFile`` check of ``data.demos_path``: reads the file as :func:`read_demonstrations` does;
    returns its number of episodes."""
    return len(np.unique(read_demonstrations(path)["episode"]))


def write_demonstrations(demos: dict[str, np.ndarray], path: str | os.PathLike[str]) -> Path:
    """Write ``state``, ``action``, ``style``, ``episode`` arrays in the format :func:`read_demonstrations` reads
    (by the suffix: ``.jsonl`` or ``.npz``)."""
    path = Path(path)
    if path.suffix.lower() == ".npz":
        np.savez(path, **{k: np.asarray(demos[k], dtype=np.int64) for k in FIELDS})
    else:
        lines = [
            json.dumps({"episode": int(e), "state": [int(r), int(c)], "action": int(a), "style": int(s)})
            for (r, c), a, s, e in zip(demos["state"], demos["action"], demos["style"], demos["episode"])
        ]
        path.write_text("\n".join(lines) + "\n")
    return path
