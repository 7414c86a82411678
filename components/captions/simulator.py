"""Candidate captions of a scene with controlled quality, and the "human" score known by construction.

A caption states a set of facts and renders them as sentences:

* **true facts**: ``round(coverage * N)`` of the scene's N oracle facts (an attribute or a relation brings
  the exists fact of the objects it mentions, so every mentioned object is introduced), plus *extra* true
  details the oracle does not list (relations between non-neighbours, each with probability
  ``extra_rate``);
* **hallucinated facts**: ``round(n_true * h / (1 - h))`` false facts, so that a share ``h`` of the stated
  facts is false: a wrong colour / size / position of a mentioned object, a phantom object (a category absent
  from the scene), or a false relation between mentioned objects;
* **filler**: ``fillers`` sentences of inference or embellishment (DCScore relevance 0);
* **wording**: each sentence takes a paraphrased template and each word a synonym with probability
  ``paraphrase``; a word of 5+ letters gets a typo with probability ``typo_rate``.

The human score, by ``human`` (``SimulatorConfig``):

* ``"f1"``: the F1 of the true precision (correct stated facts / stated facts) and the coverage (oracle facts
  stated / N), plus Gaussian noise of std ``human_noise``, clipped to [0, 1]. It has DCScore's own form (an F1 of
  precision and recall), so a judge that recovers the facts reproduces it up to the noise;
* ``"raters"``: ``raters`` simulated annotators, each rating the caption on a 1-5 scale,
  ``clip(round(1 + 4 q + N(0, rater_noise)), 1, 5)`` with the latent quality ``q = coverage x
  precision ** hallucination_weight`` (a false statement costs a rater more than an omission: weight 2 makes a
  caption with a quarter of its facts false lose 44 % of its quality, one that leaves a quarter out lose 25 %); the
  score is the mean rating mapped to [0, 1], ``(mean - 1) / 4``. Not an F1 and with ordinal rater noise, so the
  score's ceiling for any metric is the raters' own agreement, not the simulator's facts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from components.captions.world import (
    ATTRIBUTE_VALUES,
    ATTRIBUTES,
    CATEGORIES,
    FILLERS,
    HORIZONTAL,
    INVERSE_SURFACES,
    RELATION_SURFACES,
    SYNONYMS,
    VERTICAL,
    Fact,
    Scene,
    article,
    fact_sentence,
    oracle_caption,
    oracle_facts,
    position_phrase,
    reading_order,
)


@dataclass(frozen=True)
class CaptionSpec:
    """The quality knobs of one caption."""

    coverage: float
    hallucination: float
    fillers: int = 0
    paraphrase: float = 0.0
    typo_rate: float = 0.0
    extra_rate: float = 0.0
    ordered: bool = False  # objects (and relations) in reading order instead of a random order

    def __post_init__(self) -> None:
        if not 0 <= self.coverage <= 1 or not 0 <= self.hallucination < 1:
            raise ValueError(
                f"coverage must be in [0, 1] and hallucination in [0, 1), got {self.coverage}, {self.hallucination}"
            )
        for name in ("paraphrase", "typo_rate", "extra_rate"):
            if not 0 <= getattr(self, name) <= 1:
                raise ValueError(f"{name} must be in [0, 1], got {getattr(self, name)}")
        if self.fillers < 0:
            raise ValueError(f"fillers must be >= 0, got {self.fillers}")


@dataclass(frozen=True)
class SimulatedCaption:
    """A caption with the truth about it."""

    scene: str
    caption: str
    true_facts: tuple[Fact, ...]  # oracle facts stated
    extra_facts: tuple[Fact, ...]  # true details the oracle does not list
    false_facts: tuple[Fact, ...]
    fillers: int
    n_oracle: int
    spec: CaptionSpec

    @property
    def precision(self) -> float:
        correct = len(self.true_facts) + len(self.extra_facts)
        stated = correct + len(self.false_facts)
        return correct / stated if stated else 0.0

    @property
    def coverage(self) -> float:
        return len(self.true_facts) / self.n_oracle if self.n_oracle else 0.0

    @property
    def true_f1(self) -> float:
        return f1(self.precision, self.coverage)

    @property
    def words(self) -> int:
        return len(self.caption.split())

    def to_row(self) -> dict[str, object]:
        return {
            "scene": self.scene,
            "caption": self.caption,
            "n_oracle": self.n_oracle,
            "n_true": len(self.true_facts),
            "n_extra": len(self.extra_facts),
            "n_false": len(self.false_facts),
            "fillers": self.fillers,
            "precision_true": self.precision,
            "coverage_true": self.coverage,
            "f1_true": self.true_f1,
            "words": self.words,
            **{f"spec_{k}": v for k, v in asdict(self.spec).items()},
        }


def f1(precision: float, recall: float) -> float:
    """2PR / (P + R), 0 when both are 0."""
    return 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0


# --------------------------------------------------------------------------------------------------
# which facts a caption states
# --------------------------------------------------------------------------------------------------
def _objects_of(fact: Fact) -> list[str]:
    return [fact.subject, fact.value] if fact.kind in ("left_of", "above") else [fact.subject]


def choose_true_facts(scene: Scene, coverage: float, rng: np.random.Generator) -> list[Fact]:
    """``round(coverage * N)`` oracle facts (at least 1), each with the exists facts of the objects it
    mentions; facts are visited in a random order and skipped when their exists facts would overshoot."""
    oracle = oracle_facts(scene)
    target = max(1, round(coverage * len(oracle)))
    chosen: dict[Fact, None] = {}
    for i in rng.permutation(len(oracle)):
        fact = oracle[int(i)]
        needed = [f for f in (*(Fact("exists", o) for o in _objects_of(fact)), fact) if f not in chosen]
        needed = list(dict.fromkeys(needed))
        if needed and len(chosen) + len(needed) <= target:
            chosen.update(dict.fromkeys(needed))
        if len(chosen) == target:
            break
    return list(chosen)


def extra_facts(
    scene: Scene, mentioned: Sequence[str], stated: set[Fact], rate: float, rng: np.random.Generator
) -> list[Fact]:
    """True relations between mentioned objects that the oracle does not list, each with probability ``rate``."""
    oracle = set(oracle_facts(scene))
    out = []
    for a in mentioned:
        for b in mentioned:
            for kind in ("left_of", "above"):
                fact = Fact(kind, a, b)
                if a != b and scene.holds(fact) and fact not in oracle and fact not in stated and rng.random() < rate:
                    out.append(fact)
    return out


def false_facts(scene: Scene, mentioned: list[str], stated: set[Fact], n: int, rng: np.random.Generator) -> list[Fact]:
    """``n`` false facts (fewer if none is left): wrong attributes of mentioned objects (half of the draws),
    phantom objects and false relations (a quarter each). A phantom, once introduced, counts as mentioned."""
    out: list[Fact] = []
    said = {(f.kind, f.subject) for f in stated}
    objects = list(mentioned)
    absent = [c for c in CATEGORIES if scene.get(c) is None]
    tries = 0
    while len(out) < n and tries < 50 * (n + 1):
        tries += 1
        kind = rng.choice(["attribute", "attribute", "phantom", "relation"])
        if kind == "phantom":
            free = [c for c in absent if c not in objects]
            if not free:
                continue
            phantom = free[int(rng.integers(len(free)))]
            objects.append(phantom)
            out.append(Fact("exists", phantom))
        elif kind == "attribute" and objects:
            subject = objects[int(rng.integers(len(objects)))]
            attribute = ATTRIBUTES[int(rng.integers(len(ATTRIBUTES)))]
            if (attribute, subject) in said:
                continue
            values = [v for v in ATTRIBUTE_VALUES[attribute] if not scene.holds(Fact(attribute, subject, v))]
            said.add((attribute, subject))
            out.append(Fact(attribute, subject, values[int(rng.integers(len(values)))]))
        elif kind == "relation" and len(objects) >= 2:
            a, b = (objects[int(i)] for i in rng.choice(len(objects), size=2, replace=False))
            fact = Fact(("left_of", "above")[int(rng.integers(2))], a, b)
            if not scene.holds(fact) and fact not in out and Fact(fact.kind, b, a) not in stated:
                out.append(fact)
    return out


# --------------------------------------------------------------------------------------------------
# rendering
# --------------------------------------------------------------------------------------------------
def _word(canonical: str, rng: np.random.Generator, p: float) -> str:
    options = SYNONYMS.get(canonical, (canonical,))
    return options[int(rng.integers(1, len(options)))] if len(options) > 1 and rng.random() < p else options[0]


def _position(position: str, rng: np.random.Generator, p: float) -> str:
    if rng.random() >= p:
        return position_phrase(position)
    parts = position.split()
    vertical = next((v for v in parts if v in VERTICAL), None)
    horizontal = next((h for h in parts if h in HORIZONTAL), None)
    if position == "centre":
        return ["in the middle", "in the center", "at the centre of the image"][int(rng.integers(3))]
    if vertical is None:
        return [f"on the {horizontal} side", f"at the {horizontal} edge", f"near the {horizontal}"][
            int(rng.integers(3))
        ]
    v = VERTICAL[vertical][int(rng.integers(len(VERTICAL[vertical])))]
    if horizontal is None:
        return [f"at the {v}", f"near the {v} edge", f"at the {v} part of the picture"][int(rng.integers(3))]
    return [f"in the {v} {horizontal} corner", f"at the {v} {horizontal}"][int(rng.integers(2))]


def _typos(text: str, rate: float, rng: np.random.Generator) -> str:
    if rate <= 0:
        return text
    words = text.split(" ")
    for i, word in enumerate(words):
        core = word.rstrip(".,")
        if len(core) >= 5 and core.isalpha() and rng.random() < rate:
            j = int(rng.integers(1, len(core) - 2))
            core = core[:j] + core[j + 1 :] if rng.random() < 0.5 else core[:j] + core[j + 1] + core[j] + core[j + 2 :]
            words[i] = core + word[len(word.rstrip(".,")) :]
    return " ".join(words)


def _object_sentences(category: str, attributes: dict[str, str], rng: np.random.Generator, p: float) -> list[str]:
    noun = _word(category, rng, p)
    adjectives = " ".join(_word(attributes[k], rng, p) for k in ("size", "colour") if k in attributes)
    np_text = f"{adjectives} {noun}".strip()
    where = _position(attributes["position"], rng, p) if "position" in attributes else ""
    variant = int(rng.integers(1, 5)) if rng.random() < p else 0
    if variant == 4 and (adjectives or where):  # introduce, then describe
        predicates = [w for w in (_word(attributes[k], rng, p) for k in ("size", "colour") if k in attributes)]
        predicates += [where] if where else []
        return [f"There is {article(noun)} {noun}.", f"The {noun} is {' and '.join(predicates)}."]
    if variant == 2:
        verb = ["sits", "rests", "stands", "appears"][int(rng.integers(4))]
        body = (
            f"{article(np_text).capitalize()} {np_text} {verb} {where}"
            if where
            else f"{article(np_text).capitalize()} {np_text} is visible"
        )
        return [body.strip() + "."]
    opener = {0: "There is", 1: "We see", 3: "One can see"}.get(variant, "There is")
    return [f"{opener} {article(np_text)} {np_text}{' ' + where if where else ''}."]


def _relation_sentence(fact: Fact, rng: np.random.Generator, p: float) -> str:
    a, b = _word(fact.subject, rng, p), _word(fact.value, rng, p)
    if rng.random() < p:
        if rng.random() < 0.5:
            surfaces = INVERSE_SURFACES[fact.kind]
            return f"The {b} is {surfaces[int(rng.integers(len(surfaces)))]} the {a}."
        surfaces = RELATION_SURFACES[fact.kind]
        return f"The {a} is {surfaces[int(rng.integers(1, len(surfaces)))]} the {b}."
    return f"The {a} is {RELATION_SURFACES[fact.kind][0]} the {b}."


def render(
    facts: Sequence[Fact],
    fillers: int,
    rng: np.random.Generator,
    paraphrase: float = 0.0,
    typo_rate: float = 0.0,
    order: Sequence[str] | None = None,
) -> str:
    """The caption of a fact set: one introduction per mentioned object carrying its stated attributes, then
    the relations, with filler sentences at random places. Objects and relations (by subject) come in a random
    order, or in ``order`` (categories; objects it does not name come last)."""
    objects = list(dict.fromkeys(f.subject for f in facts if f.kind == "exists"))
    attributes: dict[str, dict[str, str]] = {o: {} for o in objects}
    for f in facts:
        if f.kind in ATTRIBUTES:
            attributes.setdefault(f.subject, {})[f.kind] = f.value
    relations = [f for f in facts if f.kind in ("left_of", "above")]
    if order is None:
        objects = [objects[int(i)] for i in rng.permutation(len(objects))]
        relations = [relations[int(i)] for i in rng.permutation(len(relations))]
    else:
        rank = {c: i for i, c in enumerate(order)}
        objects = sorted(objects, key=lambda o: rank.get(o, len(rank)))
        relations = sorted(relations, key=lambda f: (rank.get(f.subject, len(rank)), rank.get(f.value, len(rank))))
    sentences: list[str] = []
    for obj in objects:
        sentences += _object_sentences(obj, attributes[obj], rng, paraphrase)
    sentences += [_relation_sentence(f, rng, paraphrase) for f in relations]
    for filler in rng.choice(len(FILLERS), size=min(fillers, len(FILLERS)), replace=False):
        sentences.insert(int(rng.integers(len(sentences) + 1)), FILLERS[int(filler)])
    return _typos(" ".join(sentences), typo_rate, rng)


def simulate_caption(scene: Scene, spec: CaptionSpec, rng: np.random.Generator) -> SimulatedCaption:
    """One caption of ``scene`` with the quality ``spec`` (see the module docstring)."""
    true = choose_true_facts(scene, spec.coverage, rng)
    mentioned = [f.subject for f in true if f.kind == "exists"]
    extras = extra_facts(scene, mentioned, set(true), spec.extra_rate, rng)
    n_false = round((len(true) + len(extras)) * spec.hallucination / (1 - spec.hallucination))
    false = false_facts(scene, mentioned, set(true) | set(extras), n_false, rng)
    # attribute facts of one object are rendered together; a false attribute never contradicts a true one
    # (false_facts skips (kind, object) pairs already stated)
    order = [*true, *extras, *false]
    reading = [o.category for o in reading_order(scene)] if spec.ordered else None
    caption = render(order, spec.fillers, rng, spec.paraphrase, spec.typo_rate, reading)
    return SimulatedCaption(
        scene.name, caption, tuple(true), tuple(extras), tuple(false), spec.fillers, len(oracle_facts(scene)), spec
    )


@dataclass(frozen=True)
class SimulatorConfig:
    """How a set of candidate captions is drawn: coverage and hallucination uniform in their ranges, filler
    count uniform in 0..max_fillers, the other knobs fixed."""

    coverage: tuple[float, float] = (0.2, 1.0)
    hallucination: tuple[float, float] = (0.0, 0.5)
    max_fillers: int = 3
    paraphrase: float = 0.5
    typo_rate: float = 0.02
    extra_rate: float = 0.05
    human_noise: float = 0.05
    human: str = "f1"  # "f1" or "raters" (module docstring)
    raters: int = 3
    rater_noise: float = 0.3
    hallucination_weight: float = 2.0

    def __post_init__(self) -> None:
        if self.human not in ("f1", "raters"):
            raise ValueError(f"human must be 'f1' or 'raters', got {self.human!r}")
        if self.raters < 1 or self.rater_noise < 0 or self.hallucination_weight < 0:
            raise ValueError(f"need raters >= 1, rater_noise >= 0 and hallucination_weight >= 0, got {self}")


def rater_scores(captions: Sequence[SimulatedCaption], cfg: SimulatorConfig, rng: np.random.Generator) -> np.ndarray:
    """Every caption's 1-5 ratings by ``cfg.raters`` simulated annotators, [n_captions, raters] (module docstring)."""
    quality = np.array([c.coverage * c.precision**cfg.hallucination_weight for c in captions])
    noise = rng.normal(0.0, cfg.rater_noise, size=(len(captions), cfg.raters))
    return np.clip(np.round(1 + 4 * quality[:, None] + noise), 1, 5)


def simulate_captions(
    scenes: Sequence[Scene], cfg: SimulatorConfig, seed: int
) -> tuple[list[SimulatedCaption], np.ndarray]:
    """One caption per scene and the human scores: ``clip(true F1 + N(0, human_noise), 0, 1)`` (``human="f1"``)
    or the mean of the simulated raters' 1-5 ratings mapped to [0, 1] (``"raters"``)."""
    rng = np.random.default_rng(seed)
    captions = []
    for scene in scenes:
        spec = CaptionSpec(
            coverage=float(rng.uniform(*cfg.coverage)),
            hallucination=float(rng.uniform(*cfg.hallucination)),
            fillers=int(rng.integers(cfg.max_fillers + 1)),
            paraphrase=cfg.paraphrase,
            typo_rate=cfg.typo_rate,
            extra_rate=cfg.extra_rate,
        )
        captions.append(simulate_caption(scene, spec, rng))
    if cfg.human == "raters":
        return captions, (rater_scores(captions, cfg, rng).mean(axis=1) - 1) / 4
    truth = np.array([c.true_f1 for c in captions])
    human = np.clip(truth + rng.normal(0.0, cfg.human_noise, size=len(captions)), 0.0, 1.0)
    return captions, human


def benchmark_rows(
    scenes: Sequence[Scene], captions: Sequence[SimulatedCaption], human: Sequence[float], seed: int
) -> tuple[list[dict[str, object]], list[dict[str, object]]]:
    """The scenes as DeCapBench oracle rows and their captions as candidate rows (the official fields first,
    then the seed, the human score and the truth about the caption)."""
    oracle, candidates = [], []
    for scene, caption, score in zip(scenes, captions, human):
        reference = oracle_caption(scene)
        oracle.append(
            {
                "image_name": scene.name,
                "oracle_caption": reference,
                "oracle_facts": [fact_sentence(f) for f in oracle_facts(scene)],
            }
        )
        candidates.append(
            {
                "image_path": scene.name,
                "caption": caption.caption,
                "oracle_caption": reference,
                "human_score": float(score),
                "seed": seed,
                **caption.to_row(),
            }
        )
    return oracle, candidates
