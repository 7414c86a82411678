"""The rule-based decomposer: a caption of the synthetic world -> canonical atomic fact tuples.

Per sentence (split at ``. ! ?``):

1. words are lower-cased; a word outside the caption language (a typo) is replaced by its closest word of
   the language when difflib's ratio is >= `TYPO_CUTOFF` (words of 4+ letters only);
2. relation phrases become ``@rel=left_of|right_of|above|below`` and position phrases ``@pos=<cell>``
   (``in the upper left corner`` -> ``@pos=top_left``); synonyms become their canonical word;
3. the canonical sentence is matched against the grammar:

   * introduction ``[there is|we see|...] a [ADJ...] CAT [VERB...] [@pos=P | @rel=R the [ADJ...] CAT]``:
     exists(CAT), one attribute per adjective, and the position or relation;
   * description ``the [ADJ...] CAT PRED (and|, PRED)*`` with PRED = ``[VERB...] ADJ... | @pos=P |
     @rel=R the [ADJ...] CAT``: one fact per adjective / position / relation;

   ``right of`` and ``below`` are stated as ``left_of`` / ``above`` with subject and object swapped.
4. A sentence the grammar does not cover becomes one unit without a tuple: relevance 0 when it holds an
   inference cue (``feels``, ``suggests``, ``mood``...: DCScore's "inference or embellishment"), else 1.

Repeated facts of one caption are kept once (the first time they are stated).
"""

from __future__ import annotations

import difflib
import functools
import re
from dataclasses import dataclass

from components.captions.world import (
    CANONICAL,
    CATEGORIES,
    COLOURS,
    FILLERS,
    HORIZONTAL,
    INFERENCE_CUES,
    INVERSE_SURFACES,
    POSITION_NAMES,
    RELATION_SURFACES,
    SIZES,
    VERTICAL,
    Fact,
    fact_sentence,
)

TYPO_CUTOFF = 0.8
_VERB_WORDS = (
    "sits",
    "stands",
    "rests",
    "appears",
    "lies",
    "is",
    "visible",
    "can",
    "be",
    "seen",
    "placed",
    "located",
    "shown",
    "looks",
)
_OPENERS = (
    "there is",
    "there s",
    "we see",
    "we can see",
    "one can see",
    "you can see",
    "i see",
    "the image shows",
    "the picture shows",
    "visible is",
)
_POSITION_WORDS = {w for words in (*VERTICAL.values(), *HORIZONTAL.values()) for w in words}
_FUNCTION_WORDS = {
    "a",
    "an",
    "one",
    "the",
    "and",
    "at",
    "in",
    "on",
    "near",
    "of",
    "to",
    "side",
    "corner",
    "edge",
    "area",
    "part",
    "image",
    "picture",
    "scene",
    "frame",
    "there",
    "s",
    "we",
    "i",
    "you",
    "see",
    "shows",
    "than",
    "left",
    "right",
    "above",
    "over",
    "higher",
    "below",
    "under",
    "beneath",
    "lower",
    "is",
}
KNOWN_WORDS = frozenset(
    {
        *CANONICAL,
        *_VERB_WORDS,
        *_POSITION_WORDS,
        *_FUNCTION_WORDS,
        *INFERENCE_CUES,
        *(w for filler in FILLERS for w in re.findall(r"[a-z]+", filler.lower())),
    }
)
_KNOWN_LIST = sorted(KNOWN_WORDS)

_CAT = "|".join(CATEGORIES)
_ADJ = "|".join((*COLOURS, *SIZES))
_VERB = "|".join(_VERB_WORDS)
_ADJS = rf"(?:(?:{_ADJ}) (?:and )?)*"
_CLAUSE = rf"(?:@pos=(?P<pos>\S+)|@rel=(?P<rel>\S+) the (?:{_ADJS})(?P<obj>{_CAT}))"
INTRO = re.compile(
    rf"^(?:(?:{'|'.join(_OPENERS)}) )?(?:a|an|one) (?P<adj>{_ADJS})(?P<cat>{_CAT})"
    rf"(?: (?:(?:{_VERB}) )*{_CLAUSE})?(?: (?:{_VERB}))*$"
)
DESCRIPTION = re.compile(rf"^the (?P<adj>{_ADJS})(?P<cat>{_CAT}) (?P<rest>.+)$")
PRED_ADJS = re.compile(rf"^(?:(?:{_VERB}) )*(?P<adj>(?:(?:{_ADJ}) ?)+)$")
PRED_CLAUSE = re.compile(rf"^(?:(?:{_VERB}) )*{_CLAUSE}$")
_SPLIT_PREDICATES = re.compile(r" , and | , | and ")
_SENTENCES = re.compile(r"[.!?\n]+")
_WORDS = re.compile(r"[a-z]+|,")


def _phrase_pattern(phrases: tuple[str, ...]) -> str:
    return "|".join(re.escape(p) for p in sorted(phrases, key=len, reverse=True))


_RELATIONS = [(re.compile(rf"\b(?:{_phrase_pattern(RELATION_SURFACES[k])})\b"), f"@rel={k}") for k in RELATION_SURFACES]
_RELATIONS += [(re.compile(rf"\b(?:{_phrase_pattern(INVERSE_SURFACES[k])})\b"), f"@rel={k}~") for k in INVERSE_SURFACES]
_POS_WORD = "|".join(sorted(_POSITION_WORDS))
_POSITION = re.compile(
    rf"\b(?:at|in|on|near) the (?P<words>(?:{_POS_WORD})(?: (?:{_POS_WORD}))?)"
    rf"(?: (?:corner|side|edge|area|part))?(?: of the (?:image|picture|scene|frame))?\b"
)
_V = {w: v for v, words in VERTICAL.items() for w in words}
_H = {w: h for h, words in HORIZONTAL.items() for w in words if h != "centre"}


@dataclass(frozen=True)
class ParsedUnit:
    """One primitive information unit: its canonical tuple (None when the grammar does not cover the
    sentence), its atomic sentence (with identifiers ``cat_0``) and its DCScore relevance."""

    fact: Fact | None
    text: str
    relevance: int

    @property
    def identifier(self) -> str | None:
        return None if self.fact is None else identifier(self.fact.subject)


def identifier(category: str) -> str:
    return f"{category}_0"


def unit_text(fact: Fact) -> str:
    """The atomic sentence of a tuple with identifiers: ``The cat_0 is to the left of the dog_0.``"""
    if fact.kind in ("left_of", "above"):
        return fact_sentence(Fact(fact.kind, fact.subject, identifier(fact.value)), identifier(fact.subject))
    return fact_sentence(fact, identifier(fact.subject))


@functools.lru_cache(maxsize=4096)
def _corrected(word: str) -> str:
    if word in KNOWN_WORDS or word == "," or len(word) < 4:
        return word
    close = difflib.get_close_matches(word, _KNOWN_LIST, n=1, cutoff=TYPO_CUTOFF)
    return close[0] if close else word


def _position_name(words: str) -> str:
    vertical = next((_V[w] for w in words.split() if w in _V), None)
    horizontal = next((_H[w] for w in words.split() if w in _H), None)
    name = " ".join(p for p in (vertical, horizontal) if p) or "centre"
    assert name in POSITION_NAMES, name
    return name.replace(" ", "_")


def canonical_sentence(sentence: str) -> str:
    """Steps 1-2 of the module docstring: typo-corrected words with relation, position and synonym
    canonicalisation, joined by single spaces."""
    words = [_corrected(w) for w in _WORDS.findall(sentence.lower().replace("-", " ").replace("'", " "))]
    text = " ".join(words)
    for pattern, token in _RELATIONS:
        text = pattern.sub(token, text)
    text = _POSITION.sub(lambda m: f"@pos={_position_name(m.group('words'))}", text)
    return " ".join(CANONICAL.get(w, w) for w in text.split())


def _attributes(category: str, adjectives: str) -> list[Fact]:
    return [Fact("colour" if a in COLOURS else "size", category, a) for a in adjectives.split() if a != "and"]


def _clause(category: str, match: re.Match[str]) -> list[Fact]:
    if match.group("pos"):
        return [Fact("position", category, match.group("pos").replace("_", " "))]
    relation, other = match.group("rel"), match.group("obj")
    if relation.endswith("~"):  # right of / below: the other object is the relation's subject
        return [Fact(relation[:-1], other, category)]
    return [Fact(relation, category, other)]


def parse_sentence(canonical: str) -> list[Fact] | None:
    """The facts of one canonical sentence, or None when the grammar does not cover it."""
    intro = INTRO.match(canonical)
    if intro:
        cat = intro.group("cat")
        facts = [Fact("exists", cat), *_attributes(cat, intro.group("adj"))]
        return facts + (_clause(cat, intro) if intro.group("pos") or intro.group("rel") else [])
    described = DESCRIPTION.match(canonical)
    if not described:
        return None
    cat = described.group("cat")
    facts = _attributes(cat, described.group("adj"))
    for predicate in _SPLIT_PREDICATES.split(described.group("rest")):
        adjectives, clause = PRED_ADJS.match(predicate.strip()), PRED_CLAUSE.match(predicate.strip())
        if adjectives:
            facts += _attributes(cat, adjectives.group("adj"))
        elif clause:
            facts += _clause(cat, clause)
        else:
            return None
    return [f for f in facts if f.kind not in ("left_of", "above") or f.subject != f.value] or None


def parse_caption(caption: str) -> list[ParsedUnit]:
    """The caption's primitive information units, in the order stated, each fact once."""
    units: list[ParsedUnit] = []
    seen: set[Fact | str] = set()
    for sentence in _SENTENCES.split(caption):
        if not sentence.strip():
            continue
        canonical = canonical_sentence(sentence)
        facts = parse_sentence(canonical)
        if facts is None:
            text = sentence.strip() + "."
            if text.lower() not in seen:
                seen.add(text.lower())
                relevance = 0 if INFERENCE_CUES & set(canonical.split()) else 1
                units.append(ParsedUnit(None, text, relevance))
            continue
        for fact in facts:
            if fact not in seen:
                seen.add(fact)
                units.append(ParsedUnit(fact, unit_text(fact), 1))
    return units
