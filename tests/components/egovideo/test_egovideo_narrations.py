"""Ego4D narration reader: malformed input names file, video and field; gaps of the release are skipped and
counted; the data-file check; the generator round-trips."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from components.egovideo.narrations import (
    Narration,
    NarrationFormatError,
    check_narration_file,
    read_narrations,
    write_narrations,
)
from components.egovideo.synthetic import BUCKETS, WorldConfig, generate_videos


def _video(*items: dict, pass_name: str = "narration_pass_1") -> dict:
    return {pass_name: {"narrations": list(items), "summaries": []}, "status": "complete"}


GOOD = {"timestamp_sec": 1.5, "timestamp_frame": 45, "narration_text": "#C C picks up a knife"}


def _write(tmp_path: Path, data: object, name: str = "narration.json") -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def test_reads_the_official_shape_in_time_order(tmp_path: Path) -> None:
    late = {**GOOD, "timestamp_sec": 9.0, "narration_text": "#C C opens the fridge"}
    data = {
        "v1": {
            "narration_pass_1": {
                "narrations": [late, GOOD],
                "summaries": [{"start_sec": 0.0, "end_sec": 10.0, "summary_text": "#Summary C cooks"}],
            },
            "narration_pass_2": {"narrations": [GOOD]},
            "status": "complete",
        }
    }
    out = read_narrations(_write(tmp_path, data))
    assert list(out.videos) == ["v1"]
    assert [n.text for n in out.videos["v1"]] == ["#C C picks up a knife", "#C C opens the fridge"]
    assert out.videos["v1"][0] == Narration(1.5, 45, "#C C picks up a knife")
    assert len(read_narrations(_write(tmp_path, data), narration_pass=2).videos["v1"]) == 1


def test_redacted_videos_are_listed_not_read(tmp_path: Path) -> None:
    out = read_narrations(_write(tmp_path, {"v1": _video(GOOD), "v2": {"status": "redacted"}}))
    assert list(out.videos) == ["v1"] and out.skipped == ("v2",)


@pytest.mark.parametrize(
    "data, message",
    [
        ("{not json", "not valid JSON"),
        ([1, 2], "expected an object keyed by video_uid"),
        ({}, "no videos in the file"),
        ({"v9": {"status": "complete"}}, "video v9: missing 'narration_pass_1' / 'narration_pass_2'"),
        (
            {"v9": {"narration_pass_1": {"text": []}}},
            "video v9.narration_pass_1: expected an object with a 'narrations'",
        ),
        (
            {"v9": _video({"narration_text": "#C C x"})},
            "video v9.narration_pass_1.narrations[0]: missing 'timestamp_sec'",
        ),
        ({"v9": _video({"timestamp_sec": 1.0})}, "narrations[0]: missing 'narration_text'"),
        ({"v9": _video(GOOD, {**GOOD, "timestamp_sec": "3.0"})}, "narrations[1].timestamp_sec: expected a number"),
        ({"v9": _video({**GOOD, "timestamp_sec": True})}, "timestamp_sec: expected a number"),
        ({"v9": _video({**GOOD, "timestamp_sec": -0.5})}, "narrations[0].timestamp_sec: negative timestamp"),
        ({"v9": _video({**GOOD, "timestamp_frame": 1.5})}, "timestamp_frame: expected an int >= 0"),
        ({"v9": _video({**GOOD, "narration_text": 7})}, "narrations[0].narration_text: expected a string, got int"),
        ({"v9": _video()}, "no video has narrations in 'narration_pass_1'"),
        ({"v9": _video(GOOD, pass_name="narration_pass_2")}, "no video has narrations in 'narration_pass_1'"),
        ({"v9": _video({**GOOD, "narration_text": "  "})}, "no video has narrations in 'narration_pass_1'"),
        ({"v9": {"narration_pass_1": {"narrations": [GOOD], "summaries": {}}}}, "summaries: expected a list"),
        ({"v9": {"status": "redacted"}}, "every video is redacted"),
    ],
)
def test_malformed_files_raise_naming_the_place(tmp_path: Path, data: object, message: str) -> None:
    path = _write(tmp_path, data)
    with pytest.raises(NarrationFormatError) as err:
        read_narrations(path)
    assert message in str(err.value)
    assert str(path) in str(err.value)


def test_gaps_of_the_release_are_skipped_and_counted(tmp_path: Path) -> None:
    """A video without the chosen pass, with an empty pass, with only empty texts in it, and empty texts
    are not fatal: they are skipped and counted per reason."""
    data = {
        "v1": _video(GOOD, {**GOOD, "timestamp_sec": 2.0, "narration_text": ""}),
        "v2": _video(GOOD, pass_name="narration_pass_2"),
        "v3": _video({**GOOD, "narration_text": " "}),
        "v4": {"status": "redacted"},
        "v5": _video(),
        "v6": {
            "narration_pass_1": {"narrations": [GOOD]},
            "narration_pass_2": {"narrations": [{**GOOD, "narration_text": ""}, GOOD]},
        },
    }
    out = read_narrations(_write(tmp_path, data))
    assert list(out.videos) == ["v1", "v6"] and len(out.videos["v1"]) == 1
    assert out.without_pass == ("v2",) and out.empty_pass == ("v3", "v5") and out.skipped == ("v4",)
    assert out.empty_texts == 2  # v1 and v3; v6's empty text is in the other pass
    assert out.counts() == {
        "videos": 2,
        "narrations": 2,
        "skipped/redacted_videos": 1,
        "skipped/videos_without_pass": 1,
        "skipped/videos_with_empty_pass": 2,
        "skipped/empty_texts": 2,
    }
    second = read_narrations(_write(tmp_path, data), narration_pass=2)
    assert list(second.videos) == ["v2", "v6"] and second.empty_texts == 1
    assert second.without_pass == ("v1", "v3", "v5")


def test_nothing_usable_names_the_file_and_the_counts(tmp_path: Path) -> None:
    data = {
        "v1": _video(GOOD, pass_name="narration_pass_2"),
        "v2": _video({**GOOD, "narration_text": ""}),
        "v3": {"status": "redacted"},
        "v4": _video(),
    }
    path = _write(tmp_path, data)
    with pytest.raises(NarrationFormatError) as err:
        read_narrations(path)
    assert str(err.value) == (
        f"{path}: no video has narrations in 'narration_pass_1' (narration_pass=1); of 4 "
        f"videos, 1 are redacted, 1 lack 'narration_pass_1' and 2 have no narration text in "
        f"it (1 empty texts)"
    )


def test_non_utf8_file_names_the_file_and_offset(tmp_path: Path) -> None:
    path = tmp_path / "narration.json"
    raw = json.dumps({"v1": _video({**GOOD, "narration_text": "#C C picks a CAFE cup"})}).encode("ascii")
    path.write_bytes(raw.replace(b"CAFE", "caf\u00e9".encode("latin-1")))  # latin-1 bytes, not UTF-8
    offset = raw.index(b"CAFE") + 3  # the byte of the latin-1 e-acute
    with pytest.raises(NarrationFormatError, match=re.escape(f"{path}: not UTF-8 text (byte {offset})")):
        read_narrations(path)
    path.write_bytes(b"\xef\xbb\xbf" + raw.replace(b"CAFE", "caf\u00e9".encode("utf-8")))  # BOM + UTF-8
    assert read_narrations(path).videos["v1"][0].text == "#C C picks a caf\u00e9 cup"


def test_messages_quote_at_most_the_offending_field(tmp_path: Path) -> None:
    secret = "SECRET-" + "x" * 200
    data = {
        "v1": {
            "narration_pass_1": {"narrations": [{**GOOD, "narration_text": secret}, {**GOOD, "timestamp_sec": secret}]}
        }
    }
    with pytest.raises(NarrationFormatError) as err:
        read_narrations(_write(tmp_path, data))
    text = str(err.value)
    assert "video v1.narration_pass_1.narrations[1].timestamp_sec: expected a number" in text
    assert secret not in text and len(text) < len(str(tmp_path)) + 160  # the value is cut short
    broken = _write(tmp_path, f'{{"v1": {{"narration_pass_1": {{"narrations": [{{"narration_text": "{secret}"')
    with pytest.raises(NarrationFormatError, match="not valid JSON") as err:
        read_narrations(broken)
    assert "SECRET" not in str(err.value)


def test_data_file_check(tmp_path: Path) -> None:
    """The check of data.narrations_path: the shape, and one video long enough to cut a clip from."""
    four = [{**GOOD, "timestamp_sec": float(t)} for t in range(4)]
    mixed = {"v1": _video(*four[:3]), "v2": _video(*four, pass_name="narration_pass_2"), "v3": {"status": "redacted"}}
    counts = check_narration_file(_write(tmp_path, mixed))
    assert counts == {"videos": 2, "redacted": 1, "empty_texts": 0, "narration_pass_1": 3, "narration_pass_2": 4}
    with pytest.raises(
        NarrationFormatError,
        match="no video long enough: the most narrations of any video in one pass is 3, a clip needs at least 4",
    ):
        check_narration_file(_write(tmp_path, {"v1": _video(*four[:3])}))
    with pytest.raises(NarrationFormatError, match=r"video v1.narration_pass_1.narrations\[0\]: missing 'timestamp_s"):
        check_narration_file(_write(tmp_path, {"v1": _video({"narration_text": "#C C x"})}))


def test_missing_file_and_bad_pass(tmp_path: Path) -> None:
    with pytest.raises(NarrationFormatError, match="narration file not found"):
        read_narrations(tmp_path / "nope.json")
    with pytest.raises(ValueError, match="narration_pass must be 1 or 2"):
        read_narrations(_write(tmp_path, {"v1": _video(GOOD)}), narration_pass=3)


def test_generator_writer_reader_round_trip(tmp_path: Path) -> None:
    streams, layout = generate_videos([16, 32, 64], [3, 2, 1], WorldConfig(), seed=4)
    path = write_narrations(streams, tmp_path / "narration.json")
    raw = json.loads(path.read_text())
    first = raw["synth-short-0000"]["narration_pass_1"]["narrations"][0]
    assert set(first) >= {"timestamp_sec", "timestamp_frame", "narration_text"}
    assert first["narration_text"].startswith("#C C ")
    back = read_narrations(path)
    assert back.videos == streams
    assert sorted(layout) == sorted(streams)
    assert [layout[u][0] for u in sorted(layout)].count(BUCKETS[0]) == 3
    for uid, (_, n_frames) in layout.items():  # timestamps inside the video, strictly increasing
        ts = [n.timestamp_sec for n in back.videos[uid]]
        assert ts == sorted(set(ts)) and 0 <= ts[0] and ts[-1] < n_frames
