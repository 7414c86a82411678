"""Shared-prefix prefill in `LocalLM.generate` on the "tiny" model: outputs equal the unshared
computation (greedy and sampled, any batch size and prompt order), the prefix is run once per call,
and prompts without a long common prefix are not shared."""

from __future__ import annotations

import random
from typing import Self

import pytest
import torch

from components.llm import LocalLM, load_lm
from components.llm.lm import MIN_SHARED_PREFIX, _common_prefix_length

SYSTEM = (
    "You are a careful nutrition assistant. Estimate the carbohydrates of a meal in grams. "
    "Example: a banana -> 27 g. Example: two slices of toast -> 26 g. End with 'Answer: <n> g'."
)
USERS = [
    "an apple",
    "a bowl of rice with beans and a glass of milk",
    "x",
    "pasta",
    "two pancakes with maple syrup, a coffee with sugar, and half a grapefruit",
    "toast",
    "a muffin",
    "soup and bread",
    "three dates",
]  # own parts of 1 to 76 bytes


@pytest.fixture(scope="module")
def lm() -> LocalLM:
    return load_lm("tiny", seed=0)


@pytest.fixture(scope="module")
def prompts(lm: LocalLM) -> list[str]:
    return [lm.chat([{"role": "system", "content": SYSTEM}, {"role": "user", "content": u}]) for u in USERS]


class FeedRecorder:
    """Records the [batch, length] shape of input_ids of every forward pass of the model."""

    def __init__(self, lm: LocalLM):
        self.shapes: list[tuple[int, int]] = []
        self._handle = lm.model.register_forward_pre_hook(self._record, with_kwargs=True)

    def _record(self, module, args, kwargs):
        ids = kwargs.get("input_ids", args[0] if args else None)
        self.shapes.append(tuple(ids.shape))

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self._handle.remove()


def prefix_of(lm: LocalLM, prompts: list[str]) -> int:
    return _common_prefix_length([lm._encode(p) for p in prompts])


def test_common_prefix_length_known_answers():
    assert _common_prefix_length([[1, 2, 3, 4], [1, 2, 5], [1, 2, 3]]) == 2
    assert _common_prefix_length([[1, 2], [1, 2, 3]]) == 2
    assert _common_prefix_length([[1, 2], [3, 2]]) == 0
    assert _common_prefix_length([[7, 8, 9]]) == 3
    assert _common_prefix_length([]) == 0


def test_the_shared_length_leaves_every_prompt_an_own_token(lm, prompts):
    rows = [lm._encode(p) for p in prompts]
    common = _common_prefix_length(rows)
    assert common > 100 and lm._shared_prefix_length(rows) == common
    # a prompt that is exactly another prompt's prefix keeps its last token for the batch pass
    rows_with_prefix = rows + [rows[0][:common]]
    assert lm._shared_prefix_length(rows_with_prefix) == common - 1
    assert lm._shared_prefix_length([rows[0]]) == 0  # one prompt: nothing to share
    short = [r[: MIN_SHARED_PREFIX - 1] + [5] for r in rows[:2]] + [rows[0][: MIN_SHARED_PREFIX - 1] + [6]]
    assert lm._shared_prefix_length(short) == 0


@pytest.mark.parametrize("batch_size", [1, 3, 8])
def test_greedy_outputs_equal_the_unshared_computation_in_any_order(lm, prompts, batch_size):
    reference = lm.generate(prompts, max_new_tokens=16, batch_size=batch_size, _share_prefix=False)
    assert len(set(reference)) > 3  # the rows differ, so a mix-up of rows would show
    assert lm.generate(prompts, max_new_tokens=16, batch_size=batch_size) == reference
    order = list(range(len(prompts)))
    for shuffled in (order[::-1], random.Random(batch_size).sample(order, len(order))):
        outputs = lm.generate([prompts[i] for i in shuffled], max_new_tokens=16, batch_size=batch_size)
        assert outputs == [reference[i] for i in shuffled]


def test_greedy_outputs_equal_single_prompt_decoding(lm, prompts):
    alone = [lm.generate([p], max_new_tokens=16, batch_size=1)[0] for p in prompts]  # one prompt: unshared
    assert lm.generate(prompts, max_new_tokens=16, batch_size=4) == alone


def test_a_prompt_equal_to_the_shared_prefix_plus_one_token(lm, prompts):
    common = prefix_of(lm, prompts)
    head = lm.tokenizer.decode(lm._encode(prompts[0])[: common + 1])
    mixed = prompts[:4] + [head]
    assert lm._shared_prefix_length([lm._encode(p) for p in mixed]) == common
    assert lm.generate(mixed, max_new_tokens=12, batch_size=3) == lm.generate(
        mixed, max_new_tokens=12, batch_size=3, _share_prefix=False
    )


@pytest.mark.parametrize("batch_size", [1, 3, 8])
def test_sampled_outputs_are_reproducible_and_equal_with_and_without_sharing(lm, prompts, batch_size):
    kwargs = {"max_new_tokens": 16, "temperature": 1.0, "top_p": 0.9, "seed": 11, "batch_size": batch_size}
    shared = lm.generate(prompts, **kwargs)
    assert lm.generate(prompts, **kwargs) == shared
    assert lm.generate(prompts, **kwargs, _share_prefix=False) == shared
    assert shared != lm.generate(prompts, max_new_tokens=16, batch_size=batch_size)  # really sampled


def test_stop_strings_work_with_sharing(lm, prompts):
    full = lm.generate(prompts, max_new_tokens=20, _share_prefix=False)
    stop = next(text[4:6] for text in full if len(text) >= 6)
    expected = [text[: text.find(stop)] if stop in text else text for text in full]
    assert lm.generate(prompts, max_new_tokens=20, stop=[stop]) == expected


def test_the_prefix_is_processed_once_per_call(lm, prompts):
    rows = [lm._encode(p) for p in prompts]
    shared = lm._shared_prefix_length(rows)
    own = sorted((len(r) - shared for r in rows), reverse=True)  # generate's longest-first batching
    with FeedRecorder(lm) as recorder:
        lm.generate(prompts, max_new_tokens=4, batch_size=3)
    assert recorder.shapes[0] == (1, shared)
    prefills = [shape for shape in recorder.shapes[1:] if shape[1] > 1]
    assert prefills == [(3, own[0]), (3, own[3]), (3, own[6])]  # each batch feeds only its own parts
    assert all(length <= max(own) for _, length in recorder.shapes[1:])
    fed = sum(b * length for b, length in recorder.shapes if length > 1)
    assert fed == shared + 3 * (own[0] + own[3] + own[6])
    with FeedRecorder(lm) as recorder:
        lm.generate(prompts, max_new_tokens=4, batch_size=3, _share_prefix=False)
    full = sorted((len(r) for r in rows), reverse=True)
    assert [shape for shape in recorder.shapes if shape[1] > 1] == [(3, full[0]), (3, full[3]), (3, full[6])]


def test_the_cached_prefix_is_not_changed_by_a_batch(lm, prompts):
    rows = [lm._encode(p) for p in prompts]
    shared, cache = lm._prefill_prefix(rows)
    before = [(layer.keys.clone(), layer.values.clone()) for layer in cache.layers]
    lm._generate_batch(rows[:3], 8, 0.0, 1.0, None, [], (shared, cache))
    assert cache.get_seq_length() == shared
    for (keys, values), layer in zip(before, cache.layers):
        assert layer.keys.shape[0] == 1
        assert torch.equal(keys, layer.keys) and torch.equal(values, layer.values)


def test_no_sharing_without_a_long_common_prefix(lm, prompts):
    unrelated = ["The capital of France is", "Once upon a time, in a land far away, there lived", "2 + 2 ="]
    assert prefix_of(lm, unrelated) == 0
    with FeedRecorder(lm) as recorder:
        lm.generate(unrelated, max_new_tokens=4, batch_size=8)
    widths = sorted(len(lm._encode(p)) for p in unrelated)
    assert recorder.shapes[0] == (3, widths[-1])  # one full prefill of the padded batch
    # a common prefix shorter than MIN_SHARED_PREFIX tokens is not shared either
    near = ["<|im_start|>user\nabc", "<|im_start|>user\nxyz"]
    assert 0 < prefix_of(lm, near) < MIN_SHARED_PREFIX
    with FeedRecorder(lm) as recorder:
        lm.generate(near, max_new_tokens=4)
    assert recorder.shapes[0] == (2, len(lm._encode(near[0])))
    # a single prompt is not split either
    with FeedRecorder(lm) as recorder:
        lm.generate(prompts[:1], max_new_tokens=4)
    assert recorder.shapes[0] == (1, len(lm._encode(prompts[0])))


def test_token_logprobs_with_a_shared_prefix_equal_the_unshared_values(lm, prompts):
    continuations = [" Answer: 12 g", "", " 30 g", "A", " Answer: about 95 g in total", " 9 g", " 40", " g", " 5"]
    rows = [lm._split(p, c) for p, c in zip(prompts, continuations)]
    scored = [(r, n) for r, n in rows if n > 0]
    shared = lm._shared_prefix_length([r for r, _ in scored], keep=[n + 1 for _, n in scored])
    assert shared == prefix_of(lm, prompts)  # the own parts are long enough: the whole system turn is shared
    reference = lm.token_logprobs(prompts, continuations, batch_size=3, _share_prefix=False)
    for batch_size in (1, 3, 8):
        with FeedRecorder(lm) as recorder:
            values = lm.token_logprobs(prompts, continuations, batch_size=batch_size)
        assert recorder.shapes[0] == (1, shared) and all(length < shared for _, length in recorder.shapes[1:])
        for got, want, (_, n) in zip(values, reference, rows):
            assert got.shape == want.shape == (n,)
            torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    # summed values follow
    assert lm.logprobs(prompts, continuations) == pytest.approx([float(t.sum()) for t in reference], abs=1e-4)


def test_token_logprobs_keep_the_last_prompt_token_out_of_the_shared_prefix(lm, prompts):
    # every row scores a continuation of the same prompt: the shared prefix stops before its last token
    prompt = prompts[0]
    continuations = [" 12 g", " 30 g", "x"]
    rows = [lm._split(prompt, c) for c in continuations]
    shared = lm._shared_prefix_length([r for r, _ in rows], keep=[n + 1 for _, n in rows])
    assert shared == len(lm._encode(prompt)) - 1
    reference = lm.token_logprobs([prompt] * 3, continuations, _share_prefix=False)
    for got, want in zip(lm.token_logprobs([prompt] * 3, continuations), reference):
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
