"""The synthetic scene-graph world that stands in for DeCapBench's images (the brief's CPU-scale reduction).

A scene ("image") holds 3-8 objects on a 3 x 3 grid, each with a category (10, distinct within a scene, so
the category names the object), a colour (8) and a size (3). Every statement about a scene is a canonical
:class:`Fact` tuple:

======================  ==========================================  ====================================
tuple                   true when                                   oracle sentence
======================  ==========================================  ====================================
(exists, cat, "")       a cat is in the scene                       "There is a cat."
(colour, cat, red)      the cat is red                              "The cat is red."
(size, cat, large)      the cat is large                            "The cat is large."
(position, cat, top)    the cat's cell is named ``top``             "The cat is at the top."
(left_of, cat, dog)     both present and col(cat) < col(dog)        "The cat is to the left of the dog."
(above, cat, dog)       both present and row(cat) < row(dog)        "The cat is above the dog."
======================  ==========================================  ====================================

The *oracle facts* (the human annotation of DeCapBench) are the exists / colour / size / position facts of
every object plus the relations between neighbours: consecutive objects of a row (left of) and of a column
(above). Other true relations (the cat left of a dog two rows down) are correct details the oracle does not
list: DCScore's verifier accepts them and its recall counts them as new ground truth.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

CATEGORIES = ("cat", "dog", "car", "chair", "lamp", "cup", "book", "tree", "ball", "bird")
COLOURS = ("red", "blue", "green", "yellow", "black", "white", "brown", "orange")
SIZES = ("small", "medium", "large")
GRID = 3
# cell (row, col) -> canonical position name; rows top -> bottom, columns left -> right
POSITIONS: dict[tuple[int, int], str] = {
    (0, 0): "top left",
    (0, 1): "top",
    (0, 2): "top right",
    (1, 0): "left",
    (1, 1): "centre",
    (1, 2): "right",
    (2, 0): "bottom left",
    (2, 1): "bottom",
    (2, 2): "bottom right",
}
POSITION_NAMES = tuple(POSITIONS.values())
ATTRIBUTES = ("colour", "size", "position")
RELATIONS = ("left_of", "above")
KINDS = ("exists", *ATTRIBUTES, *RELATIONS)
ATTRIBUTE_VALUES = {"colour": COLOURS, "size": SIZES, "position": POSITION_NAMES}


class Fact(NamedTuple):
    """A canonical atomic fact: ``kind`` in `KINDS`, the subject's category, and the attribute value or the
    related object's category (``""`` for exists)."""

    kind: str
    subject: str
    value: str = ""


@dataclass(frozen=True)
class SceneObject:
    category: str
    colour: str
    size: str
    row: int
    col: int

    @property
    def position(self) -> str:
        return POSITIONS[(self.row, self.col)]


@dataclass(frozen=True)
class Scene:
    """One synthetic image: its name (``img_00012``) and its objects (categories distinct)."""

    name: str
    objects: tuple[SceneObject, ...]

    def __post_init__(self) -> None:
        cats = [o.category for o in self.objects]
        if len(set(cats)) != len(cats):
            raise ValueError(f"scene {self.name}: categories repeat: {cats}")
        cells = [(o.row, o.col) for o in self.objects]
        if len(set(cells)) != len(cells):
            raise ValueError(f"scene {self.name}: two objects share a cell: {cells}")

    def get(self, category: str) -> SceneObject | None:
        return next((o for o in self.objects if o.category == category), None)

    def holds(self, fact: Fact) -> bool:
        """Whether ``fact`` is true of this scene (the verifier's ground truth)."""
        subject = self.get(fact.subject)
        if subject is None:
            return False
        if fact.kind == "exists":
            return True
        if fact.kind in ATTRIBUTES:
            return getattr(subject, fact.kind) == fact.value
        other = self.get(fact.value)
        if other is None or other is subject:
            return False
        if fact.kind == "left_of":
            return subject.col < other.col
        if fact.kind == "above":
            return subject.row < other.row
        raise ValueError(f"unknown fact kind {fact.kind!r}")

    def to_dict(self) -> dict[str, object]:
        return {"name": self.name, "objects": [o.__dict__ for o in self.objects]}

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> Scene:
        return cls(str(data["name"]), tuple(SceneObject(**o) for o in data["objects"]))  # type: ignore[arg-type]


def make_scenes(n: int, seed: int, min_objects: int = 3, max_objects: int = 8, prefix: str = "img") -> list[Scene]:
    """``n`` random scenes: 3-8 objects (uniform), distinct categories and cells, uniform colours and sizes."""
    if not 1 <= min_objects <= max_objects <= min(len(CATEGORIES), GRID * GRID):
        raise ValueError(
            f"need 1 <= min_objects <= max_objects <= {min(len(CATEGORIES), GRID * GRID)}, "
            f"got {min_objects}, {max_objects}"
        )
    rng = np.random.default_rng(seed)
    scenes = []
    for i in range(n):
        k = int(rng.integers(min_objects, max_objects + 1))
        cats = rng.choice(len(CATEGORIES), size=k, replace=False)
        cells = rng.choice(GRID * GRID, size=k, replace=False)
        objects = tuple(
            SceneObject(
                CATEGORIES[c],
                COLOURS[int(rng.integers(len(COLOURS)))],
                SIZES[int(rng.integers(len(SIZES)))],
                int(cell) // GRID,
                int(cell) % GRID,
            )
            for c, cell in zip(cats, cells)
        )
        scenes.append(Scene(f"{prefix}_{i:05d}", objects))
    return scenes


def neighbour_relations(scene: Scene) -> list[Fact]:
    """left_of between consecutive objects of each row, above between consecutive objects of each column."""
    facts = []
    for line in range(GRID):
        row = sorted((o for o in scene.objects if o.row == line), key=lambda o: o.col)
        facts += [Fact("left_of", a.category, b.category) for a, b in zip(row, row[1:])]
    for line in range(GRID):
        col = sorted((o for o in scene.objects if o.col == line), key=lambda o: o.row)
        facts += [Fact("above", a.category, b.category) for a, b in zip(col, col[1:])]
    return facts


def oracle_facts(scene: Scene) -> list[Fact]:
    """The oracle annotation: per object (in scene order) exists, colour, size, position; then the
    neighbour relations."""
    facts = []
    for o in scene.objects:
        facts += [
            Fact("exists", o.category),
            Fact("colour", o.category, o.colour),
            Fact("size", o.category, o.size),
            Fact("position", o.category, o.position),
        ]
    return facts + neighbour_relations(scene)


def article(word: str) -> str:
    return "an" if word[0] in "aeiou" else "a"


def position_phrase(position: str) -> str:
    """``top left`` -> ``at the top left``; ``centre`` -> ``in the centre``; ``left`` -> ``on the left``."""
    if position == "centre":
        return "in the centre"
    if position in ("left", "right"):
        return f"on the {position}"
    return f"at the {position}"


RELATION_PHRASES = {"left_of": "to the left of", "above": "above"}


def fact_sentence(fact: Fact, name: str | None = None) -> str:
    """The templated atomic sentence of a fact (the oracle facts' wording). ``name`` replaces the subject's
    category (e.g. an identifier such as ``cat_0``)."""
    subject = name or fact.subject
    if fact.kind == "exists":
        return f"There is {article(subject)} {subject}."
    if fact.kind in ("colour", "size"):
        return f"The {subject} is {fact.value}."
    if fact.kind == "position":
        return f"The {subject} is {position_phrase(fact.value)}."
    if fact.kind in RELATION_PHRASES:
        return f"The {subject} is {RELATION_PHRASES[fact.kind]} the {fact.value}."
    raise ValueError(f"unknown fact kind {fact.kind!r}")


def oracle_caption(scene: Scene) -> str:
    """The reference description: one sentence per object, then one per neighbour relation."""
    parts = [
        f"There is {article(o.size)} {o.size} {o.colour} {o.category} {position_phrase(o.position)}."
        for o in scene.objects
    ]
    parts += [fact_sentence(f) for f in neighbour_relations(scene)]
    return " ".join(parts)


def reading_order(scene: Scene) -> list[SceneObject]:
    """The scene's objects by row, then column."""
    return sorted(scene.objects, key=lambda o: (o.row, o.col))


def scene_tokens(scene: Scene) -> str:
    """The scene as the captioner's input words, objects in reading order, each as its size, colour,
    category and position words: ``large red cat top left ; small blue dog centre``."""
    return " ; ".join(f"{o.size} {o.colour} {o.category} {o.position}" for o in reading_order(scene))


def scene_vocabulary() -> list[str]:
    """Every word `scene_tokens` can write."""
    positions = dict.fromkeys(w for p in POSITION_NAMES for w in p.split())
    return [*CATEGORIES, *COLOURS, *SIZES, *positions, ";"]


def facts_of(scenes: Sequence[Scene]) -> dict[str, list[Fact]]:
    return {s.name: oracle_facts(s) for s in scenes}


# --------------------------------------------------------------------------------------------------
# the caption language: canonical words and their paraphrases (first entry = the canonical word)
# --------------------------------------------------------------------------------------------------
SYNONYMS: dict[str, tuple[str, ...]] = {
    "cat": ("cat", "kitten", "feline"),
    "dog": ("dog", "puppy", "hound"),
    "car": ("car", "automobile", "sedan"),
    "chair": ("chair", "stool", "seat"),
    "lamp": ("lamp", "lantern"),
    "cup": ("cup", "mug"),
    "book": ("book", "novel", "volume"),
    "tree": ("tree", "sapling"),
    "ball": ("ball", "sphere"),
    "bird": ("bird", "sparrow"),
    "red": ("red", "crimson", "scarlet"),
    "blue": ("blue", "navy", "azure"),
    "green": ("green", "emerald", "olive"),
    "yellow": ("yellow", "golden", "amber"),
    "black": ("black", "ebony", "jet"),
    "white": ("white", "ivory", "snowy"),
    "brown": ("brown", "chocolate", "tan"),
    "orange": ("orange", "tangerine", "copper"),
    "small": ("small", "little", "tiny"),
    "medium": ("medium", "midsize", "moderate"),
    "large": ("large", "big", "huge"),
}
# position words: vertical and horizontal parts of a cell's name
VERTICAL = {"top": ("top", "upper"), "bottom": ("bottom", "lower")}
HORIZONTAL = {"left": ("left",), "right": ("right",), "centre": ("centre", "center", "middle")}
# relation phrases; the "inverse" ones state the relation with subject and object swapped
RELATION_SURFACES = {
    "left_of": ("to the left of", "left of", "on the left side of"),
    "above": ("above", "over", "higher than"),
}
INVERSE_SURFACES = {
    "left_of": ("to the right of", "right of", "on the right side of"),
    "above": ("below", "under", "beneath", "lower than"),
}
# sentences that describe no image content (DCScore relevance 0): embellishment and inference
FILLERS = (
    "The scene feels calm and orderly.",
    "Overall, the arrangement suggests a playful mood.",
    "The picture evokes a sense of everyday life.",
    "It seems like a quiet afternoon at home.",
    "The composition feels balanced and inviting.",
    "Perhaps someone has just tidied up.",
    "The atmosphere is cheerful and relaxed.",
    "Everything seems to be in harmony.",
)
INFERENCE_CUES = frozenset(
    {
        "feel",
        "feels",
        "feeling",
        "suggest",
        "suggests",
        "evoke",
        "evokes",
        "mood",
        "atmosphere",
        "seem",
        "seems",
        "likely",
        "perhaps",
        "probably",
        "overall",
        "sense",
        "cozy",
        "peaceful",
        "calm",
        "charming",
        "inviting",
        "playful",
        "story",
        "composition",
        "harmony",
        "balanced",
        "lively",
        "cheerful",
        "serene",
        "relaxed",
    }
)
CANONICAL = {surface: word for word, surfaces in SYNONYMS.items() for surface in surfaces}
