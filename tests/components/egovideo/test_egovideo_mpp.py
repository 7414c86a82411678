"""Memory Pointer Prompting: top-k selection invariants, shapes, what each method reads, losses, batches."""

from __future__ import annotations

import pytest
import torch

from components.egovideo.mpp import (
    EVAL_METHODS,
    METHODS,
    PAD,
    EgoQAModel,
    MPPConfig,
    QATensors,
    Vocab,
    balanced_bce,
    batch_sampler,
    encode_rows,
    make_batch,
    make_loss,
    predict,
    predict_all,
    topk_frames,
    uniform_frames,
)


def test_topk_frames_against_brute_force() -> None:
    gen = torch.Generator().manual_seed(0)
    scores = torch.randn(6, 40, generator=gen)
    idx = topk_frames(scores, 8)
    assert idx.shape == (6, 8)
    for row in range(6):
        chosen = idx[row].tolist()
        assert chosen == sorted(chosen) and len(set(chosen)) == 8  # time order, distinct
        brute = sorted(sorted(range(40), key=lambda t: -float(scores[row, t]))[:8])
        assert chosen == brute
        assert float(scores[row, chosen].min()) >= float(scores[row].sort(descending=True).values[7])
    # fewer frames than k: every frame, in order
    assert topk_frames(torch.randn(2, 5), 8).tolist() == [[0, 1, 2, 3, 4]] * 2


def test_uniform_frames() -> None:
    assert uniform_frames(32, 8).tolist() == [2, 6, 10, 14, 18, 22, 26, 30]
    assert uniform_frames(5, 8).tolist() == [0, 1, 2, 3, 4]
    idx = uniform_frames(512, 8)
    assert idx.tolist() == sorted(set(idx.tolist())) and int(idx.max()) < 512


def _batch(B: int = 3, T: int = 20, cfg: MPPConfig | None = None) -> dict[str, torch.Tensor]:
    cfg = cfg or MPPConfig(vocab_size=30)
    gen = torch.Generator().manual_seed(1)
    evidence = torch.zeros(B, T)
    evidence[:, 4] = 1.0
    return {
        "question": torch.randint(2, cfg.vocab_size, (B, 16), generator=gen),
        "options": torch.randint(2, cfg.vocab_size, (B, 4, 2), generator=gen),
        "answer": torch.randint(0, 4, (B,), generator=gen),
        "frames": torch.randn(B, T, cfg.patches, cfg.d_feat, generator=gen),
        "evidence": evidence,
    }


def test_methods_read_the_tokens_they_claim() -> None:
    cfg = MPPConfig(vocab_size=30, k=4)
    model = EgoQAModel(cfg, seed=0)
    batch = _batch(cfg=cfg)
    out = predict(model, "mpp", batch)
    assert out.logits.shape == (3, 4) and out.pointer.shape == (3, 20) and out.selected.shape == (3, 4)
    assert torch.equal(out.selected, topk_frames(out.pointer, 4))
    # the answer of MPP depends only on the selected frames: changing the others (keeping the glimpse's
    # ranking) cannot change it
    uni = predict(model, "uniform", batch)
    assert uni.selected[0].tolist() == uniform_frames(20, 4).tolist()
    changed = dict(batch, frames=batch["frames"].clone())
    keep = set(uniform_frames(20, 4).tolist())
    for t in range(20):
        if t not in keep:
            changed["frames"][:, t] += 5.0
    assert torch.allclose(predict(model, "uniform", changed).logits, uni.logits, atol=1e-5)
    assert not torch.allclose(predict(model, "compressed", changed).logits, predict(model, "compressed", batch).logits)
    blind = predict(model, "blind", batch).logits
    assert torch.allclose(predict(model, "blind", changed).logits, blind)  # never looks at frames


def test_pointer_scores_follow_the_definition() -> None:
    cfg = MPPConfig(vocab_size=30)
    model = EgoQAModel(cfg, seed=0).eval()
    batch = _batch(cfg=cfg)
    with torch.no_grad():
        scores = model.pointer_scores(batch["question"], batch["frames"])
        comp = model.compressed_tokens(batch["frames"])
        h, _ = model._run(batch["question"], comp, model.pointer)
        manual = (model.score_proj(h)[:, None, :] * comp).sum(-1) / cfg.d_model**0.5
    assert torch.allclose(scores, manual, atol=1e-5)


def test_balanced_bce_known_answer() -> None:
    scores = torch.tensor([[0.0, 0.0, 0.0, 0.0]])
    evidence = torch.tensor([[1.0, 0.0, 0.0, 0.0]])
    assert float(balanced_bce(scores, evidence)) == pytest.approx(torch.log(torch.tensor(2.0)).item())
    confident = torch.tensor([[10.0, -10.0, -10.0, -10.0]])
    assert float(balanced_bce(confident, evidence)) < 1e-4


def test_losses_and_gradients() -> None:
    cfg = MPPConfig(vocab_size=30, k=4)
    model = EgoQAModel(cfg, seed=0)
    batch = _batch(cfg=cfg)
    for method in METHODS:
        model.zero_grad()
        loss, extras = make_loss(method, 1.0, 0.5, seed=0)(model, batch)
        loss.backward()
        assert loss.ndim == 0 and ("pointer_bce" in extras) == (method == "mpp")
        assert (model.pointer.grad is not None and model.pointer.grad.abs().sum() > 0) == (method == "mpp")
    with pytest.raises(ValueError, match="unknown method"):
        make_loss("random", 1.0, 0.0, 0)


def test_teacher_forcing_reads_the_evidence() -> None:
    cfg = MPPConfig(vocab_size=30, k=2)
    model = EgoQAModel(cfg, seed=0)
    batch = _batch(cfg=cfg)
    out = METHODS["mpp"](model, batch, 1.0, torch.Generator().manual_seed(0))
    assert all(4 in row for row in out.selected.tolist())


def test_oracle_reads_the_evidence_frames_with_the_mpp_answer_pass() -> None:
    """The oracle row: the MPP network's answer pass on the evidence frames (topped up by the pointer)."""
    cfg = MPPConfig(vocab_size=30, k=3)
    model = EgoQAModel(cfg, seed=0)
    batch = _batch(cfg=cfg)
    batch["evidence"][0, [1, 17]] = 1.0  # row 0: three evidence frames, k = 3
    oracle, mpp = predict(model, "oracle", batch), predict(model, "mpp", batch)
    assert oracle.selected[0].tolist() == [1, 4, 17] and all(4 in row for row in oracle.selected.tolist())
    assert torch.equal(oracle.pointer, mpp.pointer)  # the same glimpse; only the frames read differ
    top = mpp.pointer[1].argsort(descending=True).tolist()
    assert set(oracle.selected[1].tolist()) == {4, *[t for t in top if t != 4][:2]}
    same = {**batch, "evidence": torch.zeros_like(batch["evidence"])}
    same["evidence"][torch.arange(3)[:, None], mpp.selected] = 1.0  # evidence = the pointer's own top-k
    assert torch.allclose(predict(model, "oracle", same).logits, mpp.logits)
    assert "oracle" in EVAL_METHODS and "oracle" not in METHODS  # evaluated, never trained
    with pytest.raises(ValueError, match="unknown method"):
        make_loss("oracle", 1.0, 0.0, 0)


def test_vocab_and_batches() -> None:
    rows = [
        {
            "question": "Where did I last put the cup?",
            "options": ["box", "oven", "fridge", "bin"],
            "answer_idx": 2,
            "clip_id": "a",
            "evidence_frames": [3],
        },
        {
            "question": "How many times did I open the box?",
            "options": ["1", "2", "3", "4"],
            "answer_idx": 0,
            "clip_id": "b",
            "evidence_frames": [0, 5],
        },
    ]
    vocab = Vocab.build([r["question"] for r in rows] + [o for r in rows for o in r["options"]])
    assert vocab.tokens[:2] == ("<pad>", "<unk>")
    ids = vocab.encode("Where did I put the spaceship?", 8)
    assert ids[5] == 1 and ids[6:] == [PAD, PAD]
    frames = [torch.randn(8, 4, 32), torch.randn(8, 4, 32), torch.randn(16, 4, 32)]
    data = encode_rows(rows, vocab, {"a": 0, "b": 1})
    assert isinstance(data, QATensors) and data.options.shape == (2, 4, 4)
    batch = make_batch(data, frames, [0, 1])
    assert batch["frames"].shape == (2, 8, 4, 32)
    assert batch["evidence"].tolist()[1] == [1, 0, 0, 0, 0, 1, 0, 0]
    with pytest.raises(KeyError, match="without frames"):
        encode_rows(rows, vocab, {"a": 0})
    mixed = encode_rows(rows, vocab, {"a": 0, "b": 2})
    with pytest.raises(ValueError, match="one length"):
        make_batch(mixed, frames, [0, 1])
    draw = batch_sampler(mixed, frames, batch_size=4)
    for step in range(5):
        b = draw(step, torch.Generator().manual_seed(step))
        assert b["frames"].shape[1] in (8, 16)


def test_pointer_learns_to_find_the_evidence() -> None:
    """On a toy task (evidence = the frames whose pooled feature matches the question word) the pointer's
    top-k recall rises well above chance within a few hundred steps."""
    from components.training import TrainConfig, fit

    cfg = MPPConfig(vocab_size=12, d_feat=8, patches=2, d_model=32, n_layers=1, n_heads=2, d_ff=64, k=2)
    codes = torch.randn(10, cfg.d_feat)
    gen = torch.Generator().manual_seed(0)

    def draw(step: int, g: torch.Generator) -> dict[str, torch.Tensor]:
        B, T = 16, 12
        word = torch.randint(0, 10, (B,), generator=g)
        content = torch.randint(0, 10, (B, T), generator=g)
        content[torch.arange(B), torch.randint(0, T, (B,), generator=g)] = word
        frames = codes[content][:, :, None, :].expand(B, T, cfg.patches, cfg.d_feat) + 0.1 * torch.randn(
            B, T, cfg.patches, cfg.d_feat, generator=g
        )
        question = torch.full((B, 4), PAD)
        question[:, 0] = word + 2
        return {
            "question": question,
            "options": torch.randint(2, 12, (B, 4, 1), generator=g),
            "answer": torch.zeros(B, dtype=torch.long),
            "frames": frames.contiguous(),
            "evidence": (content == word[:, None]).float(),
        }

    model = EgoQAModel(cfg, max_question=4, seed=0)
    fit(model, make_loss("mpp", 1.0, 0.0, 0), draw, TrainConfig(steps=150, lr=3e-3, progress=False, device="cpu"))
    batch = draw(0, gen)
    out = predict(model, "mpp", batch)
    hits = batch["evidence"].gather(1, out.selected).sum(1) > 0
    assert hits.float().mean() > 0.8  # random 2 of 12 frames would hit about 2/12 + (repeats)


def test_predict_all_answers_every_question_and_scores_the_pointer() -> None:
    rows = [
        {
            "question": f"Where did I last put the cup {i}?",
            "options": ["box", "oven", "fridge", "bin"],
            "answer_idx": i % 4,
            "clip_id": "ab"[i % 2],
            "evidence_frames": [i % 8],
        }
        for i in range(10)
    ]
    vocab = Vocab.build([r["question"] for r in rows] + [o for r in rows for o in r["options"]])
    frames = [torch.randn(8, 4, 32), torch.randn(16, 4, 32)]
    data = encode_rows(rows, vocab, {"a": 0, "b": 1})
    model = EgoQAModel(MPPConfig(vocab_size=len(vocab.tokens), k=3), seed=0)
    choice, pointer = predict_all(model, "mpp", data, frames, batch=3)
    assert choice.shape == (10,) and set(choice.tolist()) <= {0, 1, 2, 3}
    assert sorted(r["q"] for r in pointer) == list(range(10))
    for r in pointer:  # the records agree with a direct pass over the same question
        i = r["q"]
        out = predict(model, "mpp", make_batch(data, frames, [i]))
        assert int(out.logits.argmax(1)) == choice[i]
        assert r["recall"] == float(rows[i]["evidence_frames"][0] in out.selected[0].tolist())
        assert r["scores"].shape == (frames[i % 2].shape[0],)
    choice_u, none = predict_all(model, "uniform", data, frames)
    assert none == [] and choice_u.shape == (10,)
