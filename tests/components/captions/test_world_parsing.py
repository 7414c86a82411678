"""The synthetic world (oracle facts, truth of a fact, oracle caption) and the rule decomposer, on hand-built
scenes with known answers."""

from __future__ import annotations

import numpy as np
import pytest

from components.captions.parsing import canonical_sentence, parse_caption, unit_text
from components.captions.simulator import CaptionSpec, SimulatorConfig, simulate_caption, simulate_captions
from components.captions.world import (
    Fact,
    Scene,
    SceneObject,
    fact_sentence,
    make_scenes,
    neighbour_relations,
    oracle_caption,
    oracle_facts,
    scene_tokens,
)

# . cat .        row 0: cat at (0, 1)
# dog . car      row 1: dog (1, 0), car (1, 2)
# . . cup        row 2: cup (2, 2)
SCENE = Scene(
    "img",
    (
        SceneObject("cat", "red", "large", 0, 1),
        SceneObject("dog", "blue", "small", 1, 0),
        SceneObject("car", "white", "medium", 1, 2),
        SceneObject("cup", "green", "small", 2, 2),
    ),
)


def test_oracle_facts_of_a_known_scene() -> None:
    assert neighbour_relations(SCENE) == [Fact("left_of", "dog", "car"), Fact("above", "car", "cup")]
    facts = oracle_facts(SCENE)
    assert len(facts) == 4 * 4 + 2
    assert facts[:4] == [
        Fact("exists", "cat"),
        Fact("colour", "cat", "red"),
        Fact("size", "cat", "large"),
        Fact("position", "cat", "top"),
    ]
    assert Fact("position", "dog", "left") in facts and Fact("position", "cup", "bottom right") in facts


def test_truth_of_facts() -> None:
    assert SCENE.holds(Fact("colour", "cat", "red")) and not SCENE.holds(Fact("colour", "cat", "blue"))
    assert not SCENE.holds(Fact("exists", "bird")) and not SCENE.holds(Fact("colour", "bird", "red"))
    # any column order counts, not only neighbours: the cat (col 1) is left of the car (col 2), above the cup
    assert SCENE.holds(Fact("left_of", "cat", "car")) and SCENE.holds(Fact("above", "cat", "cup"))
    assert not SCENE.holds(Fact("left_of", "car", "dog")) and not SCENE.holds(Fact("above", "dog", "car"))
    assert not SCENE.holds(Fact("left_of", "cat", "cat"))


def test_oracle_caption_and_scene_words() -> None:
    text = oracle_caption(SCENE)
    assert text.startswith("There is a large red cat at the top. There is a small blue dog on the left.")
    assert text.endswith("The dog is to the left of the car. The car is above the cup.")
    assert (
        scene_tokens(SCENE) == "large red cat top ; small blue dog left ; medium white car right ; "
        "small green cup bottom right"
    )


def test_scenes_respect_their_bounds_and_are_reproducible() -> None:
    scenes = make_scenes(50, 3, 3, 8)
    assert all(3 <= len(s.objects) <= 8 for s in scenes)
    assert [s.to_dict() for s in scenes] == [s.to_dict() for s in make_scenes(50, 3, 3, 8)]
    assert Scene.from_dict(scenes[0].to_dict()) == scenes[0]
    with pytest.raises(ValueError, match="categories repeat"):
        Scene("x", (SceneObject("cat", "red", "large", 0, 0), SceneObject("cat", "red", "large", 0, 1)))


def test_every_oracle_fact_sentence_parses_back_to_its_tuple() -> None:
    for scene in make_scenes(20, 0):
        for fact in oracle_facts(scene):
            assert [u.fact for u in parse_caption(fact_sentence(fact))] == [fact]
            assert [u.fact for u in parse_caption(unit_text(fact))] == [fact]  # with identifiers cat_0


@pytest.mark.parametrize(
    ("sentence", "facts"),
    [
        (
            "We see a big crimson kitten in the upper left corner.",
            [
                Fact("exists", "cat"),
                Fact("size", "cat", "large"),
                Fact("colour", "cat", "red"),
                Fact("position", "cat", "top left"),
            ],
        ),
        ("The puppy is lower than the feline.", [Fact("above", "cat", "dog")]),  # inverse relation
        (
            "The dog sits to the right of the cat and is tiny, ivory.",
            [Fact("left_of", "cat", "dog"), Fact("size", "dog", "small"), Fact("colour", "dog", "white")],
        ),
        (
            "A tiny snowy sparow rests at the botom.",  # typos
            [
                Fact("exists", "bird"),
                Fact("size", "bird", "small"),
                Fact("colour", "bird", "white"),
                Fact("position", "bird", "bottom"),
            ],
        ),
        ("One can see an automobile in the middle.", [Fact("exists", "car"), Fact("position", "car", "centre")]),
    ],
)
def test_paraphrases_inverse_relations_and_typos(sentence: str, facts: list[Fact]) -> None:
    assert [u.fact for u in parse_caption(sentence)] == facts
    assert all(u.relevance == 1 for u in parse_caption(sentence))


def test_sentences_outside_the_grammar() -> None:
    filler, odd = parse_caption("The scene feels calm and orderly. The cat is jumping.")
    assert filler.fact is None and filler.relevance == 0 and filler.text == "The scene feels calm and orderly."
    assert odd.fact is None and odd.relevance == 1
    assert canonical_sentence("on the left side of the picture") == "@rel=left_of the picture"
    # a fact stated twice is one unit
    assert len(parse_caption("There is a cat. There is a cat. The cat is red. The feline is red.")) == 2


def test_simulated_captions_state_what_they_claim() -> None:
    rng = np.random.default_rng(0)
    spec = CaptionSpec(coverage=0.6, hallucination=0.25, fillers=2)
    caption = simulate_caption(SCENE, spec, rng)
    assert len(caption.true_facts) == round(0.6 * 18)
    assert all(SCENE.holds(f) for f in caption.true_facts) and not any(SCENE.holds(f) for f in caption.false_facts)
    stated = len(caption.true_facts) + len(caption.extra_facts)
    assert len(caption.false_facts) == round(stated * 0.25 / 0.75)
    parsed = {u.fact for u in parse_caption(caption.caption) if u.fact is not None}
    assert parsed == set(caption.true_facts) | set(caption.false_facts) | set(caption.extra_facts)
    assert sum(u.relevance == 0 for u in parse_caption(caption.caption)) == 2
    assert caption.precision == pytest.approx(stated / (stated + len(caption.false_facts)))
    assert caption.coverage == pytest.approx(len(caption.true_facts) / 18)


def test_a_perfect_caption_and_the_human_score() -> None:
    perfect = simulate_caption(SCENE, CaptionSpec(coverage=1.0, hallucination=0.0), np.random.default_rng(1))
    assert perfect.true_f1 == 1.0 and set(perfect.true_facts) == set(oracle_facts(SCENE))
    captions, human = simulate_captions(make_scenes(200, 1), SimulatorConfig(human_noise=0.0), 5)
    assert np.allclose(human, [c.true_f1 for c in captions])
    ordered = simulate_caption(
        SCENE, CaptionSpec(coverage=1.0, hallucination=0.0, ordered=True), np.random.default_rng(2)
    )
    assert ordered.caption.startswith("There is a large red cat at the top. There is a small blue dog on the left.")
