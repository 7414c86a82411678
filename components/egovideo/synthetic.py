"""Synthetic egocentric streams: narrated events, their parse, and per-frame features.

**World.** A person moves objects (20) between places (8) with six actions::

    #C C picks up the knife from the drawer     #C C puts the knife in the fridge
    #C C opens the fridge                        #C C closes the fridge
    #C C washes the cup                          #C C wipes the plate

Habits give the questions a language prior (what a blind model can learn): with probability ``habit``
an object is put back in its *home* place, and the object picked up after ``o`` is ``o``'s habitual
successor. Objects are picked up from where they were last put, so the narrations are consistent.

**Video.** ``T`` feature frames at ``fps`` frames per second; a share ``event_rate`` of the frames carry
one narrated event each (at most one per frame), the others are background frames (no action, the
person still at the last place). A frame is ``P`` patch tokens of ``d_feat`` numbers:

    token_p = code(action) + code(place)                            coarse: the same in every patch
            + (pooled_detail + (1 - pooled_detail) s_p) u(object)    fine: signs s_p sum to zero
            + noise * N(0, I)

so the compressed frame (the mean of its patch tokens) keeps the action and place but only the
attenuated object code ``pooled_detail * u(object)``, while the full-resolution tokens carry the object
clearly. Codes are fixed random vectors seeded from (world seed, kind, word), so any vocabulary works:
the same function synthesises frames for real Ego4D narrations after :func:`parse_narration`.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from components.egovideo.narrations import MIN_CLIP_NARRATIONS, Narration

if TYPE_CHECKING:
    import torch

OBJECTS = (
    "knife",
    "cup",
    "plate",
    "bowl",
    "spoon",
    "fork",
    "pan",
    "pot",
    "kettle",
    "bottle",
    "jar",
    "towel",
    "sponge",
    "apple",
    "bread",
    "phone",
    "keys",
    "scissors",
    "lid",
    "glass",
)
LOCATIONS = ("fridge", "drawer", "cabinet", "oven", "microwave", "cupboard", "box", "dishwasher")
ACTIONS = ("picks up", "puts", "opens", "closes", "washes", "wipes")
PLACE_ACTIONS = frozenset({"opens", "closes"})  # their noun is a place, not an object
BACKGROUND = "none"
BUCKETS = ("short", "medium", "long")

_TEMPLATES = {
    "picks up": "#C C picks up the {obj} from the {loc}",
    "puts": "#C C puts the {obj} in the {loc}",
    "opens": "#C C opens the {loc}",
    "closes": "#C C closes the {loc}",
    "washes": "#C C washes the {obj}",
    "wipes": "#C C wipes the {obj}",
}


@dataclass(frozen=True)
class Event:
    """A narrated event at ``frame`` (feature-frame index within its clip): action, object, place."""

    frame: int
    timestamp_sec: float
    action: str
    obj: str | None
    loc: str | None
    text: str


@dataclass(frozen=True)
class WorldConfig:
    """The synthetic world. ``habit`` in [0, 1] is the strength of the habits (the language prior)."""

    habit: float = 0.5
    event_rate: float = 0.4
    fps: float = 1.0
    action_weights: tuple[float, ...] = (0.3, 0.3, 0.12, 0.12, 0.08, 0.08)

    def __post_init__(self) -> None:
        if not 0 <= self.habit <= 1:
            raise ValueError(f"WorldConfig.habit must be in [0, 1], got {self.habit}")
        if not 0 < self.event_rate <= 1:
            raise ValueError(f"WorldConfig.event_rate must be in (0, 1], got {self.event_rate}")
        if self.fps <= 0:
            raise ValueError(f"WorldConfig.fps must be > 0, got {self.fps}")
        if len(self.action_weights) != len(ACTIONS) or min(self.action_weights) < 0:
            raise ValueError(f"WorldConfig.action_weights needs {len(ACTIONS)} weights >= 0")


@dataclass(frozen=True)
class FrameConfig:
    """Frame features: ``patches`` tokens of ``d_feat`` numbers per frame (see the module docstring)."""

    d_feat: int = 32
    patches: int = 4
    noise: float = 0.15
    pooled_detail: float = 0.25
    seed: int = 0

    def __post_init__(self) -> None:
        if self.d_feat < 4 or self.patches < 2:
            raise ValueError(f"FrameConfig needs d_feat >= 4 and patches >= 2, got {self.d_feat}, {self.patches}")
        if self.noise < 0 or not 0 <= self.pooled_detail <= 1:
            raise ValueError(
                f"FrameConfig needs noise >= 0 and pooled_detail in [0, 1], got {self.noise}, {self.pooled_detail}"
            )


@dataclass(frozen=True)
class World:
    """The habits drawn from a seed: each object's home place and habitual successor."""

    home: dict[str, str]
    successor: dict[str, str]


def make_world(seed: int) -> World:
    rng = np.random.default_rng(seed)
    home = {o: LOCATIONS[int(rng.integers(len(LOCATIONS)))] for o in OBJECTS}
    order = rng.permutation(len(OBJECTS))
    successor = {OBJECTS[order[i]]: OBJECTS[order[(i + 1) % len(OBJECTS)]] for i in range(len(OBJECTS))}
    return World(home=home, successor=successor)


def narration_text(action: str, obj: str | None, loc: str | None) -> str:
    return _TEMPLATES[action].format(obj=obj, loc=loc)


def generate_stream(n_frames: int, world: World, cfg: WorldConfig, rng: np.random.Generator) -> list[Narration]:
    """One video's narrations: ``round(event_rate * n_frames)`` events on distinct frames, in time order.

    Timestamps are at the centre of their feature frame: ``(frame + 0.5) / fps`` seconds.
    """
    n_events = max(1, round(cfg.event_rate * n_frames))
    frames = np.sort(rng.choice(n_frames, size=n_events, replace=False))
    where = {o: world.home[o] for o in OBJECTS}  # where each object is now
    held: str | None = None
    last_picked: str | None = None
    probs = np.asarray(cfg.action_weights, dtype=float) / sum(cfg.action_weights)
    out = []
    for f in frames:
        action = ACTIONS[int(rng.choice(len(ACTIONS), p=probs))]
        if action == "puts" and held is None:
            action = "picks up"
        if action in ("washes", "wipes") and held is None:
            action = "picks up"
        if action == "picks up" and held is not None:  # hands are full: put the held object away first
            action = "puts"
        obj = loc = None
        if action == "picks up":
            if last_picked is not None and rng.random() < cfg.habit:
                obj = world.successor[last_picked]
            else:
                obj = OBJECTS[int(rng.integers(len(OBJECTS)))]
            loc = where[obj]
            held, last_picked = obj, obj
        elif action == "puts":
            obj = held
            loc = world.home[obj] if rng.random() < cfg.habit else LOCATIONS[int(rng.integers(len(LOCATIONS)))]
            where[obj] = loc
            held = None
        elif action in PLACE_ACTIONS:
            loc = LOCATIONS[int(rng.integers(len(LOCATIONS)))]
        else:
            obj = held
        ts = (float(f) + 0.5) / cfg.fps
        out.append(Narration(timestamp_sec=ts, timestamp_frame=round(ts * 30.0), text=narration_text(action, obj, loc)))
    return out


def generate_videos(
    bucket_frames: Sequence[int], videos_per_bucket: Sequence[int], cfg: WorldConfig, seed: int
) -> tuple[dict[str, list[Narration]], dict[str, tuple[str, int]]]:
    """Narrations of ``videos_per_bucket[b]`` videos of ``bucket_frames[b]`` frames per length bucket ``b``.

    Returns ``(narrations by video uid, {video_uid: (bucket, n_frames)})``; uids are
    ``synth-<bucket>-<index>``. The same ``seed`` gives the same world and the same streams.
    """
    if len(bucket_frames) != len(BUCKETS) or len(videos_per_bucket) != len(BUCKETS):
        raise ValueError(
            f"bucket_frames and videos_per_bucket need one value per bucket {BUCKETS}, got "
            f"{list(bucket_frames)}, {list(videos_per_bucket)}"
        )
    world = make_world(seed)
    narrations, layout = {}, {}
    for b, (bucket, n_frames, n_videos) in enumerate(zip(BUCKETS, bucket_frames, videos_per_bucket)):
        for i in range(n_videos):
            uid = f"synth-{bucket}-{i:04d}"
            rng = np.random.default_rng([seed, b, i])
            narrations[uid] = generate_stream(int(n_frames), world, cfg, rng)
            layout[uid] = (bucket, int(n_frames))
    return narrations, layout


# --------------------------------------------------------------------------------------------------
# parsing narration text into events (synthetic and real Ego4D narrations alike)
# --------------------------------------------------------------------------------------------------
_ARTICLE = r"(?:the|a|an|some|his|her|its|their)"
_PREP = r"(?:from|in|into|on|onto|inside|at|to|under)"
_PARSE = re.compile(
    rf"^(?P<verb>[a-z][a-z ]*?)\s+{_ARTICLE}\s+(?P<noun>[a-z][a-z\- ]*?)"
    rf"(?:\s+{_PREP}\s+{_ARTICLE}\s+(?P<place>[a-z][a-z\- ]*?))?\s*[.]?$"
)


# Ego4D phrasings of the same actions, mapped onto the generator's verbs
VERB_ALIASES = {
    "picks": "picks up",
    "takes": "picks up",
    "lifts": "picks up",
    "places": "puts",
    "keeps": "puts",
    "drops": "puts",
    "put": "puts",
    "pick up": "picks up",
    "open": "opens",
    "close": "closes",
}


def parse_narration(text: str) -> tuple[str, str | None, str | None]:
    """``"#C C puts the knife in the fridge"`` -> ``("puts", "knife", "fridge")``.

    The camera wearer's ``#C C`` prefix is dropped; the verb phrase runs to the first article and common
    Ego4D phrasings map onto the generator's verbs (``picks`` -> ``picks up``, ``places`` -> ``puts``, ...);
    for "opens"/"closes" the noun is a place. Narrations without an article noun (``"#C C walks around"``)
    give ``(verb phrase, None, None)``; narrations about other people (``#O``) keep their full text as
    the action.
    """
    clean = " ".join(text.strip().split())
    clean = re.sub(r"^#c\s+c\s+", "", clean, flags=re.IGNORECASE)
    clean = clean.lower().rstrip(".").strip()
    match = _PARSE.match(clean)
    if match is None:
        return clean or BACKGROUND, None, None
    verb, noun, place = match.group("verb"), match.group("noun").strip(), match.group("place")
    verb = VERB_ALIASES.get(verb, verb)
    if verb in PLACE_ACTIONS and place is None:
        return verb, None, noun
    return verb, noun, place.strip() if place else None


def events_of_clip(narrations: Sequence[Narration], start_sec: float, n_frames: int, fps: float) -> list[Event]:
    """The events of the clip ``[start_sec, start_sec + n_frames / fps)``, one per feature frame.

    A narration falls in frame ``floor((timestamp_sec - start_sec) * fps)``; when two share a frame the
    first one is kept (the clip's frames can show one event each).
    """
    end = start_sec + n_frames / fps
    out: list[Event] = []
    used: set[int] = set()
    for n in narrations:
        if not start_sec <= n.timestamp_sec < end:
            continue
        frame = min(n_frames - 1, int(np.floor((n.timestamp_sec - start_sec) * fps)))
        if frame in used:
            continue
        used.add(frame)
        action, obj, loc = parse_narration(n.text)
        out.append(Event(frame=frame, timestamp_sec=n.timestamp_sec, action=action, obj=obj, loc=loc, text=n.text))
    return sorted(out, key=lambda e: e.frame)


# --------------------------------------------------------------------------------------------------
# frame features
# --------------------------------------------------------------------------------------------------
def _code(kind: str, word: str, d: int, seed: int) -> np.ndarray:
    digest = hashlib.sha256(f"{seed}:{kind}:{word}".encode()).digest()
    rng = np.random.default_rng(int.from_bytes(digest[:8], "little"))
    return rng.standard_normal(d) / np.sqrt(d)


def _object_patches(obj: str, cfg: FrameConfig) -> np.ndarray:
    """``[P, d]``: patch ``p`` holds ``(pooled_detail + (1 - pooled_detail) * s_p) * u(obj)`` with signs
    ``s_p`` summing to zero, so the mean over patches keeps exactly ``pooled_detail * u(obj)``."""
    half = cfg.patches // 2
    signs = np.array([1.0] * half + [-1.0] * (cfg.patches - half))
    signs[signs < 0] *= half / (cfg.patches - half)  # zero sum also for an odd patch count
    coef = cfg.pooled_detail + (1.0 - cfg.pooled_detail) * signs
    return coef[:, None] * _code("obj", obj, cfg.d_feat, cfg.seed)[None, :]


def synthesize_frames(events: Sequence[Event], n_frames: int, cfg: FrameConfig, seed: int) -> torch.Tensor:
    """Frame features ``[n_frames, patches, d_feat]`` (float32) of a clip with these events.

    Background frames carry the ``none`` action and the place of the last event that named one.
    ``seed`` draws the noise (one per clip); the codes depend only on ``cfg.seed`` and the words.
    """
    import torch  # here only: the rest of the module is numpy, and parameter validation imports it (via qa)

    d, P = cfg.d_feat, cfg.patches
    at = {e.frame: e for e in events}
    rng = np.random.default_rng(seed)
    out = np.zeros((n_frames, P, d), dtype=np.float64)
    place = BACKGROUND
    cache: dict[tuple[str, str], np.ndarray] = {}

    def code(kind: str, word: str) -> np.ndarray:
        if (kind, word) not in cache:
            cache[(kind, word)] = _object_patches(word, cfg) if kind == "objp" else _code(kind, word, d, cfg.seed)
        return cache[(kind, word)]

    for t in range(n_frames):
        event = at.get(t)
        action = BACKGROUND
        obj = None
        if event is not None:
            action, obj = event.action, event.obj
            if event.loc is not None:
                place = event.loc
        tokens = np.broadcast_to(code("act", action) + code("loc", place), (P, d)).copy()
        if obj is not None:
            tokens += code("objp", obj)
        out[t] = tokens
    out += cfg.noise * rng.standard_normal(out.shape)
    return torch.from_numpy(out.astype(np.float32))


def cut_clips(
    narrations: dict[str, list[Narration]], bucket_seconds: Sequence[float], min_events: int = MIN_CLIP_NARRATIONS
) -> list[tuple[str, str, float]]:
    """Clips of a real narrated video: ``(video_uid, bucket, start_sec)`` for each bucket length that fits.

    A clip starts at the video's first narration (rounded down to a second) and is kept when the
    narrations reach at least its middle and it holds ``min_events`` narrations.
    """
    clips = []
    for uid, items in narrations.items():
        start = float(np.floor(items[0].timestamp_sec))
        for bucket, length in zip(BUCKETS, bucket_seconds):
            inside = [n for n in items if start <= n.timestamp_sec < start + length]
            if items[-1].timestamp_sec >= start + length / 2 and len(inside) >= min_events:
                clips.append((uid, bucket, start))
    return clips


@dataclass(frozen=True)
class ClipSpec:
    """Where a clip lies: its id, its video, its length bucket, its start and its number of feature frames."""

    clip_id: str
    video_uid: str
    bucket: str
    start_sec: float
    n_frames: int


def select_clips(
    narrations: dict[str, list[Narration]], bucket_frames: Sequence[int], videos_per_bucket: Sequence[int], fps: float
) -> list[ClipSpec]:
    """Clips of real narrated videos: :func:`cut_clips` at ``bucket_frames / fps`` seconds, the first
    ``videos_per_bucket[b]`` per bucket (in file order), ids ``<video_uid>@<bucket>``; sorted by id."""
    seconds = [n / fps for n in bucket_frames]
    taken: dict[str, int] = {b: 0 for b in BUCKETS}
    out = []
    for uid, bucket, start in cut_clips(narrations, seconds):
        b = BUCKETS.index(bucket)
        if taken[bucket] >= videos_per_bucket[b]:
            continue
        taken[bucket] += 1
        out.append(ClipSpec(f"{uid}@{bucket}", uid, bucket, start, int(bucket_frames[b])))
    return sorted(out, key=lambda c: c.clip_id)
