"""MTSAM's dense model: losses on hand values, the SAM-style decoder's channel structure, the multi-task
ToRA forward against the per-task one, the methods' trainable sets and counts, and one training step each."""

import math

import pytest
import torch

from components.models.dense_methods import MethodConfig, build_learners, dense_scores, predict_all
from components.models.multitask_dense import (
    TASKS,
    DenseConfig,
    MultiTaskDense,
    depth_loss,
    normal_loss,
    predict,
    seg_loss,
    weighted_loss,
)
from components.models.pretrained_vit import ViTS14, ViTS14Config
from components.models.sam_decoder import DecoderConfig, MaskDecoder
from components.models.tora import ToraSpec, tora_parameter_count, use_task
from components.training import TrainConfig, fit, random_batches

D = 32
CFG = DenseConfig(n_classes=4, out_size=(12, 12), start=1, decoder=DecoderConfig(dim=16, depth=1, heads=2, mlp_dim=16))


def _encoder() -> ViTS14:
    return ViTS14(ViTS14Config(input_size=28, d_model=D, n_heads=2, n_layers=2, mlp_hidden=64))


def _data(n: int = 6, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    encoder = _encoder()
    with torch.no_grad():
        h = encoder.hidden(torch.rand(n, 3, 28, 28, generator=gen), 1)
    normal = torch.randn(n, 3, 12, 12, generator=gen)
    return (
        encoder,
        h,
        {
            "seg": torch.randint(-1, 4, (n, 12, 12), generator=gen),
            "depth": torch.rand(n, 1, 12, 12, generator=gen) + 0.5,
            "normal": normal / normal.norm(dim=1, keepdim=True),
        },
    )


def test_losses_on_hand_values():
    logits = torch.tensor([[[[2.0, 0.0]], [[0.0, 1.0]]]])  # [1, 2 classes, 1, 2]
    label = torch.tensor([[[0, -1]]])
    assert float(seg_loss(logits, label)) == pytest.approx(math.log(1 + math.exp(-2)))
    depth, pred = torch.tensor([[[[2.0, 0.0, 1.0]]]]), torch.tensor([[[[3.0, 9.0, 0.5]]]])
    assert float(depth_loss(pred, depth)) == pytest.approx(0.75)
    gt = torch.zeros(1, 3, 1, 3)
    gt[0, 0, 0, 0], gt[0, 1, 0, 1] = 1.0, 1.0  # pixel 2 has no normal
    p = torch.zeros(1, 3, 1, 3)
    p[0, 0, 0, 0], p[0, 0, 0, 1], p[0, 2, 0, 2] = 4.0, 1.0, 1.0  # cos 1 and cos 0
    assert float(normal_loss(p, gt)) == pytest.approx(0.5)
    losses = {"seg": torch.tensor(1.0), "depth": torch.tensor(2.0), "normal": torch.tensor(3.0)}
    assert float(weighted_loss(losses)) == pytest.approx((1 + 2 + 4 * 3) / 6)
    assert float(weighted_loss({"depth": torch.tensor(2.0)})) == pytest.approx(2.0)


def test_each_output_channel_is_one_decoder_pass_over_its_own_no_mask_row():
    decoder = MaskDecoder(D, DecoderConfig(dim=16, depth=2, heads=2, mlp_dim=16), torch.Generator().manual_seed(0))
    tokens, rows = torch.randn(2, 9, D), torch.randn(3, 16)
    out = decoder(tokens, rows)
    assert out.shape == (2, 3, 12, 12)
    changed = rows.clone()
    changed[2] += 1.0
    again = decoder(tokens, changed)
    assert torch.equal(out[:, :2], again[:, :2]) and not torch.allclose(out[:, 2], again[:, 2])
    torch.testing.assert_close(decoder(tokens, rows[1:2])[:, 0], out[:, 1], rtol=1e-5, atol=1e-6)


def test_the_multi_task_tora_forward_equals_each_task_through_its_own_row():
    encoder, h, _ = _data()
    learners = build_learners("tora", MultiTaskDense(encoder, CFG, seed=0), MethodConfig(), seed=0)
    model = learners[0].model
    with torch.no_grad():
        for t in model.modules():
            if hasattr(t, "G"):
                t.G.normal_()
    model.eval()
    with torch.no_grad():
        multi = predict(model, h, TASKS)
        for i, task in enumerate(TASKS):
            with use_task(model, i):
                single = model.decode(model.tokens(h), task)
            torch.testing.assert_close(multi[task], single, rtol=1e-5, atol=1e-5)


def test_methods_train_what_they_claim_and_count_it():
    encoder, _, _ = _data()
    base = MultiTaskDense(encoder, CFG, seed=0)
    decoder_numbers = {t: sum(p.numel() for p in base.decoders[t].parameters()) for t in TASKS}
    rows = {t: CFG.channels(t) * CFG.decoder.dim for t in TASKS}
    norms = sum(p.numel() for p in base.tail_norm_parameters())
    cfg = MethodConfig(tora=ToraSpec(ranks=(3, 2, 2), n_tasks=3))
    (dec,) = build_learners("decoders", base, cfg, 0)
    assert dec.trainable() == sum(decoder_numbers.values()) + sum(rows.values()) and dec.adapter_count() == 0
    per_task = build_learners("lora_per_task", base, cfg, 0)
    lora = 3 * cfg.lora.r * (D + D)  # q, k, v of one block
    assert [learner.tasks for learner in per_task] == [("seg",), ("depth",), ("normal",)]
    assert [learner.trainable() for learner in per_task] == [lora + norms + decoder_numbers[t] + rows[t] for t in TASKS]
    (tora,) = build_learners("tora", base, cfg, 0)
    assert tora.adapter_count() == tora_parameter_count(D, 3 * D, (3, 2, 2), 3)
    assert tora.trainable() == tora.adapter_count() + norms + sum(decoder_numbers.values()) + sum(rows.values())
    finetune = build_learners("finetune", base, cfg, 0)
    tail = sum(p.numel() for p in base.blocks.parameters()) + sum(p.numel() for p in base.norm.parameters())
    assert finetune[0].trainable() == tail + decoder_numbers["seg"] + rows["seg"]
    with pytest.raises(ValueError, match="unknown method"):
        build_learners("adapter", base, cfg, 0)


@pytest.mark.parametrize("method", ["decoders", "finetune", "lora_per_task", "lora_shared", "tora"])
def test_one_short_fit_per_method_moves_only_what_it_trains(method):
    encoder, h, target = _data()
    base = MultiTaskDense(encoder, CFG, seed=0)
    learners = build_learners(method, base, MethodConfig(), seed=1)
    batches = random_batches(h, target["seg"], target["depth"], target["normal"], size=3)
    for learner in learners:
        before = {n: p.detach().clone() for n, p in learner.model.named_parameters()}
        result = fit(
            learner.model,
            learner.loss,
            batches,
            TrainConfig(steps=3, progress=False, grad_clip=None),
            parameters=learner.parameters,
        )
        assert math.isfinite(result.final_loss)
        trained = {id(p) for p in learner.parameters}
        for name, p in learner.model.named_parameters():
            if id(p) not in trained:
                assert torch.equal(p, before[name]), f"{method}: {name} changed but is not trained"
        if method == "tora":
            assert "orth_reg" in result.history[-1]
    scores = dense_scores(predict_all(learners, h), target, CFG.n_classes)
    assert set(scores) == {
        "miou",
        "pix_acc",
        "abs_err",
        "rel_err",
        "mean_angle",
        "median_angle",
        "within_11",
        "within_22",
        "within_30",
    }
    assert all(math.isfinite(v) for v in scores.values())


def test_decode_resizes_to_the_label_size():
    encoder = _encoder()
    model = MultiTaskDense(encoder, DenseConfig(n_classes=3, out_size=(9, 7), start=0), seed=0)
    with torch.no_grad():
        out = predict(model, encoder.hidden(torch.rand(2, 3, 28, 28), 0), TASKS)
    assert {t: tuple(v.shape) for t, v in out.items()} == {
        "seg": (2, 3, 9, 7),
        "depth": (2, 1, 9, 7),
        "normal": (2, 3, 9, 7),
    }
