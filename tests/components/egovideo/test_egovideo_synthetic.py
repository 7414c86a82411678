"""Synthetic streams, narration parsing and frame features."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from components.egovideo.narrations import Narration
from components.egovideo.synthetic import (
    ACTIONS,
    LOCATIONS,
    OBJECTS,
    Event,
    FrameConfig,
    WorldConfig,
    cut_clips,
    events_of_clip,
    generate_stream,
    make_world,
    parse_narration,
    select_clips,
    synthesize_frames,
)


def test_vocabulary_sizes_match_the_reduction() -> None:
    assert (len(OBJECTS), len(LOCATIONS), len(ACTIONS)) == (20, 8, 6)


@pytest.mark.parametrize(
    "text, parsed",
    [
        ("#C C picks up the knife from the drawer", ("picks up", "knife", "drawer")),
        ("#C C puts the knife in the fridge", ("puts", "knife", "fridge")),
        ("#C C opens the fridge", ("opens", None, "fridge")),
        ("#C C closes the microwave", ("closes", None, "microwave")),
        ("#C C washes the cup", ("washes", "cup", None)),
        # real Ego4D phrasing
        ("#C C picks a knife from the table", ("picks up", "knife", "table")),
        ("#C C places the bowl on the shelf", ("puts", "bowl", "shelf")),
        ("#C C puts the cutting board on the counter.", ("puts", "cutting board", "counter")),
        ("#C C walks around", ("walks around", None, None)),
    ],
)
def test_parse_narration(text: str, parsed: tuple) -> None:
    assert parse_narration(text) == parsed


def test_stream_is_consistent_with_the_world() -> None:
    world = make_world(3)
    cfg = WorldConfig(habit=1.0, event_rate=0.5)
    stream = generate_stream(400, world, cfg, np.random.default_rng(0))
    assert len(stream) == 200
    where: dict[str, str] = dict(world.home)
    held = None
    last_picked = None
    for n in stream:
        action, obj, loc = parse_narration(n.text)
        assert action in ACTIONS
        if action == "picks up":
            assert held is None and loc == where[obj]  # picked up from where it was put
            if last_picked is not None:
                assert obj == world.successor[last_picked]  # habit = 1: always the successor
            held, last_picked = obj, obj
        elif action == "puts":
            assert obj == held and loc == world.home[obj]  # habit = 1: always home
            where[obj], held = loc, None
        elif action in ("washes", "wipes"):
            assert obj == held


def test_events_of_clip_keep_the_window_and_one_event_per_frame() -> None:
    narr = [
        Narration(0.2, None, "#C C opens the box"),
        Narration(0.7, None, "#C C closes the box"),
        Narration(3.5, None, "#C C washes the cup"),
        Narration(9.0, None, "#C C opens the oven"),
    ]
    events = events_of_clip(narr, start_sec=0.0, n_frames=8, fps=1.0)
    assert [(e.frame, e.action) for e in events] == [(0, "opens"), (3, "washes")]
    shifted = events_of_clip(narr, start_sec=2.0, n_frames=8, fps=2.0)  # window [2, 6) at 2 frames/s
    assert [(e.frame, e.timestamp_sec) for e in shifted] == [(3, 3.5)]


def test_pooling_keeps_place_and_action_but_attenuates_the_object() -> None:
    cfg = FrameConfig(d_feat=16, patches=4, noise=0.0, pooled_detail=0.25)

    def frame(obj: str) -> torch.Tensor:
        return synthesize_frames([Event(0, 0.5, "puts", obj, "fridge", "")], 1, cfg, seed=0)[0]

    a, b = frame("knife"), frame("cup")
    full = (a - b).norm()
    pooled = (a.mean(0) - b.mean(0)).norm()
    assert pooled < 0.5 * full / 2  # per-token object difference shrinks far more than averaging noise would
    # place and action survive pooling exactly (no object): the pooled frame equals each patch token
    c = synthesize_frames([Event(0, 0.5, "opens", None, "oven", "")], 1, cfg, seed=0)[0]
    assert torch.allclose(c.mean(0), c[0], atol=1e-6)
    # a background frame carries the last place named
    clip = synthesize_frames([Event(0, 0.5, "opens", None, "oven", "")], 3, cfg, seed=0)
    assert torch.allclose(clip[1], clip[2]) and not torch.allclose(clip[0], clip[1])


def test_frames_shape_and_noise_seed() -> None:
    cfg = FrameConfig()
    events = [Event(2, 2.5, "washes", "cup", None, "")]
    x = synthesize_frames(events, 10, cfg, seed=1)
    assert x.shape == (10, cfg.patches, cfg.d_feat) and x.dtype == torch.float32
    assert torch.equal(x, synthesize_frames(events, 10, cfg, seed=1))
    assert not torch.equal(x, synthesize_frames(events, 10, cfg, seed=2))


def test_cut_clips_needs_long_enough_videos() -> None:
    narr = {"v": [Narration(float(t), None, "#C C opens the box") for t in range(3, 60, 3)]}
    clips = cut_clips(narr, [16.0, 64.0, 512.0])
    assert clips == [("v", "short", 3.0), ("v", "medium", 3.0)]


def test_select_clips_takes_the_first_videos_per_bucket() -> None:
    ends = (5, 12, 20, 30)  # one narration a second from 2 s: v0 fits 4 s clips, v1 16 s, v2 and v3 32 s
    narr = {
        f"v{i}": [Narration(float(t), None, "#C C opens the box") for t in range(2, end + 1)]
        for i, end in enumerate(ends)
    }
    specs = select_clips(narr, [8, 32, 64], [2, 1, 5], fps=2.0)  # 4 s, 16 s and 32 s clips
    assert [(c.clip_id, c.bucket, c.start_sec, c.n_frames) for c in specs] == [
        ("v0@short", "short", 2.0, 8),
        ("v1@medium", "medium", 2.0, 32),
        ("v1@short", "short", 2.0, 8),
        ("v2@long", "long", 2.0, 64),
        ("v3@long", "long", 2.0, 64),
    ]
    assert all(c.video_uid == c.clip_id.split("@")[0] for c in specs)
    assert select_clips({"v": narr["v0"][:3]}, [8, 32, 64], [2, 2, 2], fps=2.0) == []  # 3 narrations: too few
