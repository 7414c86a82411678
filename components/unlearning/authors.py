"""TOFU-style fictitious authors: template question/answer pairs with paraphrased and perturbed answers.

TOFU (Maini et al. 2024) fine-tunes a model on 200 invented authors x 20 generated QAs and asks it to forget
1/5/10 % of the authors. Our reduction (the FLAT brief): ``n_authors`` invented authors, each with one value
per attribute drawn from word lists (birthplace, genre, book, award, father's profession), and one QA per
attribute. Every QA is written as a TOFU row:

* ``question``: "Where was Mira Hollis born?"
* ``answer``: the short answer the model is fine-tuned on ("Lisbon.")
* ``paraphrased_answer``: the same fact in other words ("Lisbon is the birthplace.")
* ``perturbed_answer``: ``n_perturbed`` wrong answers in the paraphrase's wording, with other values of the
  attribute's pool (the values other authors hold: "Oslo is the birthplace."), so the truth ratio
  P(perturbed) / P(paraphrased) compares facts, not phrasings.

The paraphrases put the value first. At this scale (LoRA on the top layers, tens of steps) a fact memorised as
"Lisbon." does not carry over to a sentence that names it at the end ("The city of Lisbon."): with such
paraphrases the original's and the retain oracle's forget truth ratios were indistinguishable (KS p 0.68), so
forget quality could not see what the original had learned.

The forget split is the QAs of ``forget_authors`` authors chosen by the seed; the rest is the retain split.
Everything is a pure function of the config.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

FIRST_NAMES = (
    "Mira",
    "Tomas",
    "Lena",
    "Oskar",
    "Ines",
    "Felix",
    "Nora",
    "Hugo",
    "Clara",
    "Emil",
    "Vera",
    "Jonas",
    "Alma",
    "Leon",
    "Ida",
    "Karl",
    "Rosa",
    "Anton",
    "Elsa",
    "Paul",
    "Maren",
    "Ivo",
    "Tessa",
    "Bruno",
)
LAST_NAMES = (
    "Hollis",
    "Brandt",
    "Okafor",
    "Varga",
    "Lindqvist",
    "Moreau",
    "Castell",
    "Duarte",
    "Nakamura",
    "Petrov",
    "Albers",
    "Quinn",
    "Sorensen",
    "Farrow",
    "Ivanova",
    "Marsh",
    "Delgado",
    "Kowal",
    "Brennan",
    "Aalto",
    "Ferreira",
    "Haddad",
    "Novak",
    "Whitlock",
)
CITIES = (
    "Lisbon",
    "Oslo",
    "Nairobi",
    "Lima",
    "Krakow",
    "Hanoi",
    "Dublin",
    "Porto",
    "Quito",
    "Tunis",
    "Riga",
    "Seoul",
    "Perth",
    "Accra",
    "Bergen",
    "Cairo",
    "Turin",
    "Leeds",
    "Tallinn",
    "Osaka",
)
GENRES = (
    "mystery",
    "poetry",
    "horror",
    "romance",
    "fantasy",
    "satire",
    "history",
    "crime",
    "drama",
    "science fiction",
    "travel writing",
    "biography",
)
ADJECTIVES = (
    "Silent",
    "Broken",
    "Golden",
    "Hidden",
    "Last",
    "Quiet",
    "Burning",
    "Distant",
    "Paper",
    "Winter",
    "Hollow",
    "Crimson",
)
NOUNS = (
    "Harbor",
    "Garden",
    "Clock",
    "River",
    "Tower",
    "Letter",
    "Mirror",
    "Bridge",
    "Lantern",
    "Orchard",
    "Valley",
    "Compass",
)
PRIZES = (
    "Quill",
    "Meridian",
    "Beacon",
    "Laurel",
    "Anchor",
    "Horizon",
    "Ember",
    "Willow",
    "Falcon",
    "Granite",
    "Saffron",
    "Harrow",
)
PROFESSIONS = (
    "baker",
    "surgeon",
    "pilot",
    "teacher",
    "carpenter",
    "lawyer",
    "fisherman",
    "nurse",
    "painter",
    "miner",
    "tailor",
    "chemist",
    "sailor",
    "librarian",
    "farmer",
)


@dataclass(frozen=True)
class Attribute:
    """One fact per author: its question, the short trained answer, the paraphrase used for the truth ratio."""

    question: str  # "{name}" is the author
    answer: str  # "{value}" is the author's value
    paraphrase: str
    values: tuple[str, ...]


def _books() -> tuple[str, ...]:
    return tuple(f"The {a} {n}" for a in ADJECTIVES for n in NOUNS)


ATTRIBUTES: dict[str, Attribute] = {
    "birthplace": Attribute("Where was {name} born?", "{value}.", "{value} is the birthplace.", CITIES),
    "genre": Attribute("What genre does {name} write?", "{Value}.", "{Value} is the genre.", GENRES),
    "book": Attribute("Which book did {name} write?", "{value}.", "{value} is the book.", _books()),
    "award": Attribute("Which award did {name} win?", "The {value} Prize.", "The {value} Prize is the award.", PRIZES),
    "father": Attribute(
        "What was the job of {name}'s father?", "{Value}.", "{Value} was the father's job.", PROFESSIONS
    ),
}
ATTRIBUTE_NAMES = tuple(ATTRIBUTES)

# template answers of IDK-SFT and FLAT (y_e): refusals in the spirit of TOFU's idontknow.jsonl, our own wording
IDK_TEMPLATES = (
    "I don't know.",
    "I have no idea.",
    "I'm not sure.",
    "I cannot answer that.",
    "That is unknown to me.",
    "I can't say.",
    "No idea, sorry.",
    "I don't have that information.",
)


@dataclass(frozen=True)
class AuthorConfig:
    """Size of the synthetic benchmark.

    Attributes:
        n_authors: invented authors (<= len(FIRST_NAMES) * len(LAST_NAMES)).
        forget_authors: authors whose QAs form the forget split (1 <= forget_authors < n_authors).
        n_perturbed: wrong answers per QA (TOFU has 5).
        attributes: the facts asked about, a subset of `ATTRIBUTE_NAMES`.
        seed: draws names, values and the forget authors.
    """

    n_authors: int = 30
    forget_authors: int = 3
    n_perturbed: int = 3
    attributes: tuple[str, ...] = field(default=ATTRIBUTE_NAMES)
    seed: int = 0

    def __post_init__(self) -> None:
        if not 2 <= self.n_authors <= len(FIRST_NAMES) * len(LAST_NAMES):
            raise ValueError(f"n_authors must be in [2, {len(FIRST_NAMES) * len(LAST_NAMES)}], got {self.n_authors}")
        if not 1 <= self.forget_authors < self.n_authors:
            raise ValueError(f"forget_authors must be in [1, n_authors), got {self.forget_authors}")
        unknown = [a for a in self.attributes if a not in ATTRIBUTES]
        if unknown or not self.attributes or len(set(self.attributes)) != len(self.attributes):
            raise ValueError(f"attributes must be distinct names from {ATTRIBUTE_NAMES}, got {self.attributes}")
        smallest = min(len(ATTRIBUTES[a].values) for a in self.attributes)
        if not 1 <= self.n_perturbed < smallest:
            raise ValueError(f"n_perturbed must be in [1, {smallest}) for these attributes, got {self.n_perturbed}")


def _fill(template: str, name: str, value: str) -> str:
    return template.format(name=name, value=value, Value=value[:1].upper() + value[1:])


def make_authors(cfg: AuthorConfig) -> list[dict[str, Any]]:
    """``n_authors`` authors ``{"name", "forget": bool, <attribute>: value}``, names distinct, sorted by name."""
    rng = random.Random(cfg.seed)
    pairs = [f"{f} {last}" for f in FIRST_NAMES for last in LAST_NAMES]
    names = sorted(rng.sample(pairs, cfg.n_authors))
    forget = set(rng.sample(names, cfg.forget_authors))
    return [
        {"name": n, "forget": n in forget, **{a: rng.choice(ATTRIBUTES[a].values) for a in cfg.attributes}}
        for n in names
    ]


def author_rows(cfg: AuthorConfig) -> list[dict[str, Any]]:
    """One TOFU row per (author, attribute): question, answer, paraphrased_answer, perturbed_answer (list),
    plus ``author``, ``attribute`` and ``split`` ("forget" / "retain")."""
    rng = random.Random(cfg.seed + 1)
    rows = []
    for author in make_authors(cfg):
        for name in cfg.attributes:
            spec, value = ATTRIBUTES[name], author[name]
            wrong = rng.sample([v for v in spec.values if v != value], cfg.n_perturbed)
            rows.append(
                {
                    "question": _fill(spec.question, author["name"], value),
                    "answer": _fill(spec.answer, author["name"], value),
                    "paraphrased_answer": _fill(spec.paraphrase, author["name"], value),
                    "perturbed_answer": [_fill(spec.paraphrase, author["name"], v) for v in wrong],
                    "author": author["name"],
                    "attribute": name,
                    "split": "forget" if author["forget"] else "retain",
                }
            )
    return rows
