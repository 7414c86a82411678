"""Our DPO loss against trl's DPOTrainer (loss_type "sigmoid") on the same model, reference and rows."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from components.llm import PairTokens, frozen_copy, load_lm, sequence_scores
from components.preference import ObjectiveConfig, PreferenceBatch, objective_loss

trl = pytest.importorskip("trl", reason="trl is the reference implementation (installed with the dev extra)")


def _left_padded(batch: dict[str, torch.Tensor], pad: int) -> PairTokens:
    """trl's right-padded [chosen; rejected] rows as our left-padded table (completion = continuation)."""
    rows = [
        (ids[mask.bool()], done[mask.bool()].bool())
        for ids, mask, done in zip(batch["input_ids"], batch["attention_mask"], batch["completion_mask"])
    ]
    width = max(len(ids) for ids, _ in rows)
    ids = torch.stack([torch.cat([torch.full((width - len(r),), pad), r]) for r, _ in rows])
    target = torch.stack([torch.cat([torch.zeros(width - len(t), dtype=torch.bool), t]) for _, t in rows])
    mask = (torch.arange(width)[None, :] >= width - torch.tensor([len(r) for r, _ in rows])[:, None]).long()
    return PairTokens(ids, mask, (mask.cumsum(1) - 1).clamp(min=0), target)


def test_dpo_equals_trl_sigmoid_loss(tmp_path: Path) -> None:
    from datasets import Dataset
    from trl import DPOConfig, DPOTrainer

    lm = load_lm("tiny", seed=0)
    reference = frozen_copy(lm.model)
    with torch.no_grad():  # a policy that has moved away from its reference
        noise = torch.Generator().manual_seed(1)
        for p in lm.model.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=noise))
    data = Dataset.from_dict(
        {
            "prompt": ["Q: 1+1=", "The capital is", "Colour of the sky:"],
            "chosen": [" 2", " Paris!", " blue"],
            "rejected": [" 3", " Rome, of course", " a deep green"],
        }
    )
    beta = 0.3
    args = DPOConfig(
        output_dir=str(tmp_path),
        beta=beta,
        loss_type=["sigmoid"],
        report_to=[],
        use_cpu=True,
        bf16=False,
        per_device_train_batch_size=3,
        save_strategy="no",
    )
    trainer = DPOTrainer(
        model=lm.model, ref_model=reference, args=args, train_dataset=data, processing_class=lm.tokenizer
    )
    batch = next(iter(trainer.get_train_dataloader()))
    expected = float(trainer._compute_loss(trainer.model, batch, return_outputs=False))

    tokens = _left_padded(batch, lm.tokenizer.pad_token_id)
    policy, ref = sequence_scores(lm.model, tokens), sequence_scores(reference, tokens)
    chosen, rejected = torch.arange(3), torch.arange(3, 6)
    loss, metrics = objective_loss(
        "dpo",
        PreferenceBatch(
            chosen=policy.select(chosen),
            rejected=policy.select(rejected),
            ref_chosen=ref.select(chosen),
            ref_rejected=ref.select(rejected),
        ),
        ObjectiveConfig(beta=beta),
    )
    assert abs(float(loss) - 0.6931) > 1e-3  # not the value every untrained pair gives
    assert float(loss) == pytest.approx(expected, abs=1e-5)
