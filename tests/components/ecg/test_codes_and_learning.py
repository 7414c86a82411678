"""The pretraining targets must carry heartbeat content: entropies by hand, the beat-count reference, content-only
VQ-HBR codes that ignore lead and time, and a short training in which the codes separate two beat shapes and the
masked model learns to predict them better than the most frequent code."""

from __future__ import annotations

import math

import numpy as np
import torch

from components.ecg.codes import code_content, entropy_bits
from components.ecg.models import VQHBR, MaskedConfig, TransformerConfig, VQHBRConfig
from components.ecg.probe import count_features
from components.ecg.tokenizer import Sentences
from components.ecg.train import Schedule, train_masked, train_vqhbr


def test_entropies_by_hand() -> None:
    assert entropy_bits(np.array([[0], [1], [2], [3]])) == 2.0 and entropy_bits(np.zeros((0, 1))) == 0.0
    chans = np.array([[1, 1, 2, 2, 0]])
    times = np.array([[1, 2, 1, 2, 0]])
    # each (lead, time) cell holds one code: nothing is left given lead and time
    follows = code_content(np.array([[0, 1, 2, 3, -1]]), chans, times)
    assert follows == {"h_code_bits": 2.0, "h_code_given_lead_time_bits": 0.0}
    # two codes spread evenly inside one cell: all their bit is left
    chans, times = np.ones((1, 4), int), np.ones((1, 4), int)
    spread = code_content(np.array([[0, 1, 0, 1]]), chans, times)
    assert spread == {"h_code_bits": 1.0, "h_code_given_lead_time_bits": 1.0}


def test_beat_count_features() -> None:
    chans = np.array([[1, 1, 1, 2, 2, 2, 0, 0], [1, 1, 2, 2, 0, 0, 0, 0], [0] * 8])
    assert count_features(chans).tolist() == [[6.0, 3.0], [4.0, 2.0], [0.0, 0.0]]


def _beats(n: int, seed: int) -> tuple[Sentences, np.ndarray]:
    """Sentences of 8 beats over 2 leads; each sentence's beats are narrow or wide (its shape, 0 / 1)."""
    rng = np.random.default_rng(seed)
    t = np.arange(96)
    shape = rng.integers(0, 2, n)
    data = np.zeros((n, 8, 96), np.float32)
    for i in range(n):
        width = 3.0 if shape[i] == 0 else 9.0
        for k in range(8):
            data[i, k] = (1.0 + 0.1 * rng.standard_normal()) * np.exp(-0.5 * ((t - 48) / width) ** 2)
    chans = np.repeat([[1, 1, 1, 1, 2, 2, 2, 2]], n, axis=0).astype(np.int32)
    times = np.tile(np.arange(1, 5), (n, 2)).astype(np.int32)
    return Sentences(data + 0.02 * rng.standard_normal(data.shape).astype(np.float32), chans, times), shape


SMALL = TransformerConfig(dim=32, depth=1, heads=2, mlp=64, max_len=8)


def test_content_only_codes_do_not_read_lead_or_time() -> None:
    torch.manual_seed(0)
    model = VQHBR(VQHBRConfig(encoder=SMALL, num_codes=8, code_dim=8, content_only=True)).eval()
    model.quantizer.initted.fill_(True)
    s, _ = _beats(4, 0)
    data, chans, times = (torch.from_numpy(a) for a in (s.data, s.in_chans, s.in_times))
    codes = model.tokenize(data, chans, times)
    assert torch.equal(codes, model.tokenize(data, torch.where(chans > 0, 3 - chans, 0), (times % 4) + 1))
    sided = VQHBR(VQHBRConfig(encoder=SMALL, num_codes=8, code_dim=8)).eval()
    sided.load_state_dict(model.state_dict())
    moved = sided.encoder(sided.encoder.embed(data), chans, times) - sided.encoder(
        sided.encoder.embed(data), chans, times + 1
    )
    assert moved.abs().max() > 0  # with side inputs the same beats encode differently


def test_codes_learn_the_beat_shape_and_the_masked_model_learns_the_codes() -> None:
    sentences, shape = _beats(96, 1)
    vq, _ = train_vqhbr(
        sentences,
        VQHBRConfig(encoder=SMALL, decoder_depth=1, num_codes=8, code_dim=8, content_only=True),
        Schedule(steps=60, batch=16, lr=3e-3, warmup_steps=5),
        seed=0,
    )
    data, chans, times = (torch.from_numpy(a) for a in (sentences.data, sentences.in_chans, sentences.in_times))
    codes = vq.tokenize(data, chans, times)
    content = code_content(codes.numpy(), sentences.in_chans, sentences.in_times)
    assert content["h_code_given_lead_time_bits"] / content["h_code_bits"] > 0.5  # not explained by lead and time
    # the codes tell a narrow beat from a wide one: the shape explains most of their entropy
    per_token_shape = np.repeat(shape, 8)[:, None]
    joint = entropy_bits(np.hstack([per_token_shape, codes.numpy().reshape(-1, 1)]))
    info = entropy_bits(per_token_shape) + content["h_code_bits"] - joint
    assert info > 0.8 * min(1.0, content["h_code_bits"])
    model, result = train_masked(
        sentences,
        codes,
        MaskedConfig(backbone=SMALL, num_codes=8, mask_ratio=0.5),
        Schedule(steps=60, batch=16, lr=3e-3, warmup_steps=5),
        seed=0,
    )
    majority = float(np.bincount(codes.flatten().numpy(), minlength=8).max() / codes.numel())
    late = [h["masked_accuracy"] for h in result.history[-3:]]
    assert math.isfinite(late[-1]) and np.mean(late) > majority + 0.1
