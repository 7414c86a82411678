"""Ego4D narrations: the reader of the official ``narration.json`` and a writer of the same shape.

The official file (Ego4D v1/v2 ``annotations/narration.json``) is one JSON object keyed by video uid::

    {"<video_uid>": {
        "narration_pass_1": {"narrations": [{"timestamp_sec": 12.3, "timestamp_frame": 369,
                                              "narration_text": "#C C picks up a knife", ...}, ...],
                             "summaries": [{"start_sec": .., "end_sec": .., "summary_text": ..}, ...]},
        "narration_pass_2": {...},
        "status": "complete"}, ...}

Two annotators narrated each video independently (pass 1 and pass 2); a pipeline uses one pass. Not
every video of the release carries both passes, and a few narrations have an empty text, so these are
skipped and counted rather than refused: videos whose ``status`` starts with ``redacted`` and that carry
no pass (``skipped``), videos without the chosen pass (``without_pass``), videos whose chosen pass has no
narration with a text (``empty_pass``) and empty narration texts of the chosen pass (``empty_texts``);
:meth:`NarrationSet.counts` gives them by reason. Everything else that does not match the shape (a wrong type, a missing
field, a negative timestamp) is an error that names the file, the video and the field; a message
quotes a number it refuses, never the file's text (:func:`components.io.quote_value`). The file is read
as UTF-8 (a byte-order mark is allowed); other bytes are an error naming the file and the offset.

The whole file is parsed at once (the v2 release is about 1 GB of JSON).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from components.io import JsonLimitError, atomic_path, parse_json, quote_value

PASSES = ("narration_pass_1", "narration_pass_2")
MIN_CLIP_NARRATIONS = 4  # a clip is cut only where it holds at least this many narrations


class NarrationFormatError(ValueError):
    """The narration file does not have the Ego4D shape; the message names file, video and field."""


@dataclass(frozen=True)
class Narration:
    """One narrated moment: time in seconds from the video start, the frame at 30 fps, and the text."""

    timestamp_sec: float
    timestamp_frame: int | None
    text: str


@dataclass(frozen=True)
class NarrationSet:
    """The narrations of one pass, by video uid (time-ordered), and what was skipped, by reason."""

    videos: dict[str, list[Narration]]
    narration_pass: int
    skipped: tuple[str, ...] = field(default_factory=tuple)  # redacted, no pass at all
    without_pass: tuple[str, ...] = field(default_factory=tuple)  # the chosen pass is missing
    empty_pass: tuple[str, ...] = field(default_factory=tuple)  # the chosen pass has no narration text
    empty_texts: int = 0  # chosen-pass narrations with an empty text

    def counts(self) -> dict[str, int]:
        """Videos and narrations read, and the videos / narrations skipped per reason."""
        return {
            "videos": len(self.videos),
            "narrations": sum(len(v) for v in self.videos.values()),
            "skipped/redacted_videos": len(self.skipped),
            "skipped/videos_without_pass": len(self.without_pass),
            "skipped/videos_with_empty_pass": len(self.empty_pass),
            "skipped/empty_texts": self.empty_texts,
        }


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _check_narration(item: Any, where: str) -> Narration | None:
    """One narration item, or None when its text is empty (skipped and counted by the caller)."""
    if not isinstance(item, Mapping):
        raise NarrationFormatError(f"{where}: expected an object, got {type(item).__name__}")
    if "timestamp_sec" not in item:
        raise NarrationFormatError(f"{where}: missing 'timestamp_sec'")
    ts = item["timestamp_sec"]
    if not _number(ts):
        raise NarrationFormatError(f"{where}.timestamp_sec: expected a number, got {quote_value(ts)}")
    if ts < 0:
        raise NarrationFormatError(f"{where}.timestamp_sec: negative timestamp {quote_value(ts)}")
    frame = item.get("timestamp_frame")
    if frame is not None and (not isinstance(frame, int) or isinstance(frame, bool) or frame < 0):
        raise NarrationFormatError(f"{where}.timestamp_frame: expected an int >= 0, got {quote_value(frame)}")
    if "narration_text" not in item:
        raise NarrationFormatError(f"{where}: missing 'narration_text'")
    text = item["narration_text"]
    if not isinstance(text, str):
        raise NarrationFormatError(f"{where}.narration_text: expected a string, got {type(text).__name__}")
    if not text.strip():
        return None
    return Narration(timestamp_sec=float(ts), timestamp_frame=frame, text=text.strip())


def _parse(p: Path) -> tuple[dict[str, dict[str, list[Narration]]], list[str], Counter[str]]:
    """Every video's passes (validated, time-ordered), the redacted videos skipped, the empty texts
    dropped per pass."""
    if not p.is_file():
        raise NarrationFormatError(f"{p}: narration file not found")
    try:
        data = parse_json(p.read_text(encoding="utf-8-sig"))  # a BOM is allowed, as in CSV
    except json.JSONDecodeError as err:
        raise NarrationFormatError(f"{p}: not valid JSON ({err})") from None
    except JsonLimitError as err:
        raise NarrationFormatError(f"{p}: {err}") from None
    except UnicodeDecodeError as err:
        raise NarrationFormatError(f"{p}: not UTF-8 text (byte {err.start})") from None
    if not isinstance(data, Mapping):
        raise NarrationFormatError(f"{p}: expected an object keyed by video_uid, got {type(data).__name__}")
    if not data:
        raise NarrationFormatError(f"{p}: no videos in the file")
    videos: dict[str, dict[str, list[Narration]]] = {}
    skipped: list[str] = []
    empty: Counter[str] = Counter()
    for uid, entry in data.items():
        where = f"{p}: video {uid}"
        if not isinstance(entry, Mapping):
            raise NarrationFormatError(f"{where}: expected an object, got {type(entry).__name__}")
        present = [name for name in PASSES if name in entry]
        if not present:
            if str(entry.get("status", "")).startswith("redacted"):
                skipped.append(str(uid))
                continue
            raise NarrationFormatError(f"{where}: missing 'narration_pass_1' / 'narration_pass_2'")
        parsed: dict[str, list[Narration]] = {}
        for name in present:
            block = entry[name]
            if not isinstance(block, Mapping) or not isinstance(block.get("narrations"), list):
                raise NarrationFormatError(f"{where}.{name}: expected an object with a 'narrations' list")
            summaries = block.get("summaries", [])
            if not isinstance(summaries, list):
                raise NarrationFormatError(f"{where}.{name}.summaries: expected a list, got {type(summaries).__name__}")
            items = [
                _check_narration(item, f"{where}.{name}.narrations[{i}]") for i, item in enumerate(block["narrations"])
            ]
            empty[name] += sum(n is None for n in items)
            parsed[name] = sorted((n for n in items if n is not None), key=lambda n: n.timestamp_sec)
        videos[str(uid)] = parsed
    if not videos:
        raise NarrationFormatError(f"{p}: every video is redacted; no narrations to read")
    return videos, skipped, empty


def read_narrations(path: str | Path, narration_pass: int = 1) -> NarrationSet:
    """Read and validate an Ego4D ``narration.json``; return pass ``narration_pass`` (1 or 2) of every video.

    Both passes (where present) and ``summaries`` are validated. Redacted videos, videos without the
    chosen pass or without narrations in it, and empty narration texts are skipped and counted (see the
    module and :meth:`NarrationSet.counts`).

    Raises:
        NarrationFormatError: not JSON, not an object keyed by video uid, no videos, a video without
            ``narration_pass_*`` that is not redacted, a pass without a ``narrations`` list, a narration
            without ``timestamp_sec`` / ``narration_text``, non-numeric or negative timestamps, a text
            that is not a string, not UTF-8, or no video with narrations in the chosen pass (the message
            gives the skip counts).
    """
    p = Path(path)
    if narration_pass not in (1, 2):
        raise ValueError(f"narration_pass must be 1 or 2, got {narration_pass!r}")
    parsed, skipped, empty = _parse(p)
    key = PASSES[narration_pass - 1]
    out = NarrationSet(
        videos={uid: passes[key] for uid, passes in parsed.items() if passes.get(key)},
        narration_pass=narration_pass,
        skipped=tuple(skipped),
        without_pass=tuple(uid for uid, passes in parsed.items() if key not in passes),
        empty_pass=tuple(uid for uid, passes in parsed.items() if key in passes and not passes[key]),
        empty_texts=empty[key],
    )
    if not out.videos:
        raise NarrationFormatError(
            f"{p}: no video has narrations in '{key}' (narration_pass={narration_pass}); of "
            f"{len(parsed) + len(skipped)} videos, {len(skipped)} are redacted, {len(out.without_pass)} lack "
            f"'{key}' and {len(out.empty_pass)} have no narration text in it ({out.empty_texts} empty texts)"
        )
    return out


def check_narration_file(path: str | Path, min_narrations: int = MIN_CLIP_NARRATIONS) -> dict[str, int]:
    """The data-file check of a ``narration.json``: the Ego4D shape, and at least one video with
    ``min_narrations`` narrations in one pass (no clip can be cut from a file without one).

    Returns counts (videos, redacted, narrations per pass); raises :class:`NarrationFormatError`.
    """
    p = Path(path)
    parsed, skipped, empty = _parse(p)
    longest = max(len(items) for passes in parsed.values() for items in passes.values())
    if longest < min_narrations:
        raise NarrationFormatError(
            f"{p}: no video long enough: the most narrations of any video in one pass is "
            f"{longest}, a clip needs at least {min_narrations}"
        )
    counts = {"videos": len(parsed), "redacted": len(skipped), "empty_texts": sum(empty.values())}
    for name in PASSES:
        counts[name] = sum(len(passes.get(name, ())) for passes in parsed.values())
    return counts


def write_narrations(
    videos: Mapping[str, Sequence[Narration]], path: str | Path, *, video_fps: float = 30.0, narration_pass: int = 1
) -> Path:
    """Write ``{video_uid: narrations}`` in the official shape (one pass, empty summaries), atomically.

    ``timestamp_frame`` is filled from ``timestamp_sec * video_fps`` where a narration has none.
    """
    key = PASSES[narration_pass - 1]
    out = {}
    for uid, items in videos.items():
        rows = [
            {
                "timestamp_sec": n.timestamp_sec,
                "timestamp_frame": n.timestamp_frame
                if n.timestamp_frame is not None
                else round(n.timestamp_sec * video_fps),
                "narration_text": n.text,
                "annotation_uid": f"{uid}-{key}-{i:05d}",
            }
            for i, n in enumerate(items)
        ]
        out[uid] = {key: {"narrations": rows, "summaries": []}, "status": "complete"}
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    return Path(path)
