"""`LocalLM.generate(drop_finished=True)` on the "tiny" model: rows that end leave the batch, the
outputs equal those of the full batch (greedy and sampled, with and without a shared prefix)."""

from __future__ import annotations

import pytest

from components.llm import LocalLM, load_lm
from components.llm.lm import repeats_itself

SYSTEM = "Estimate the carbohydrates of a meal in grams, then stop."
USERS = ["an apple", "a bowl of rice with beans", "x", "pasta with tomato sauce", "toast", "three dates"]


@pytest.fixture(scope="module")
def lm() -> LocalLM:
    return load_lm("tiny", seed=0)


@pytest.fixture(scope="module")
def prompts(lm: LocalLM) -> list[str]:
    return [lm.chat([{"role": "system", "content": SYSTEM}, {"role": "user", "content": u}]) for u in USERS]


@pytest.fixture(scope="module")
def stop(lm: LocalLM, prompts: list[str]) -> list[str]:
    """Stop strings that end the rows of a greedy call at different steps (some rows never stop)."""
    free = lm.generate(prompts, max_new_tokens=24, batch_size=len(prompts))
    return sorted({free[0][3], free[1][8]})


def batch_sizes_fed(lm: LocalLM, call) -> list[int]:
    sizes: list[int] = []
    handle = lm.model.register_forward_pre_hook(
        lambda module, args, kwargs: sizes.append(kwargs["input_ids"].shape[0]), with_kwargs=True
    )
    try:
        call()
    finally:
        handle.remove()
    return sizes


@pytest.mark.parametrize("share", [True, False])
@pytest.mark.parametrize("temperature", [0.0, 0.9])
def test_dropping_finished_rows_keeps_every_output(lm, prompts, stop, share, temperature):
    kwargs = dict(max_new_tokens=24, batch_size=4, stop=stop, temperature=temperature, seed=3, _share_prefix=share)
    full = lm.generate(prompts, **kwargs)
    lengths = {len(t) for t in full}
    assert len(lengths) > 2  # rows end at different steps, so rows do get dropped
    assert lm.generate(prompts, drop_finished=True, **kwargs) == full


def test_finished_rows_are_not_fed_again(lm, prompts, stop):
    kwargs = dict(max_new_tokens=24, batch_size=len(prompts), stop=stop, _share_prefix=False)
    kept = batch_sizes_fed(lm, lambda: lm.generate(prompts, **kwargs))
    dropped = batch_sizes_fed(lm, lambda: lm.generate(prompts, drop_finished=True, **kwargs))
    assert set(kept) == {len(prompts)}
    assert dropped[0] == len(prompts) and dropped == sorted(dropped, reverse=True) and dropped[-1] < len(prompts)
    assert sum(dropped) < sum(kept)


def test_repeats_itself_known_answers():
    assert repeats_itself([1, 2, 3, 1, 2], 2) and repeats_itself([5, 5], 1)
    assert not repeats_itself([1, 2, 3, 2, 1], 2) and not repeats_itself([1, 2], 2) and not repeats_itself([1, 1], 0)
    assert repeats_itself([1, 2, 1, 2, 1], 3)  # overlapping runs count
    assert not repeats_itself([7, 1, 2, 3, 1, 2], 3)


def test_a_row_in_a_loop_ends_early(lm, prompts):
    free = lm.generate(prompts, max_new_tokens=48, batch_size=3)
    cut = lm.generate(prompts, max_new_tokens=48, batch_size=3, stop_repeats=3, drop_finished=True)
    assert all(f.startswith(c) for f, c in zip(free, cut))
    shorter = [c for f, c in zip(free, cut) if len(c) < len(f)]
    assert shorter  # the random model does fall into loops
    for text in shorter:  # (byte tokenizer: text and tokens agree)
        assert repeats_itself(lm._encode(text), 3)
    with pytest.raises(ValueError, match="stop_repeats"):
        lm.generate(prompts, max_new_tokens=4, stop_repeats=-1)
