"""A verifier: a small causal transformer with a scalar value per token, trained on token labels.

The model is `components.llm.ValueHeadModel` on a backbone from `components.llm.load_lm`: ``"tiny"`` (a
randomly initialised 2-layer Llama, hidden 64, over byte tokens; every weight trains) or ``"smollm2"``
(SmolLM2-135M-Instruct with LoRA adapters on the attention projections of its top layers; only the adapters
and the value head train, and only they are saved). A row is the bos token, optionally the
question and its delimiter, then the solution with every line ending in ``"\\n"`` (the step delimiter), so the
value of a prefix that ends at a step end is read at its delimiter token. Training minimises, OVM / TVM style, the
mean over solution tokens of (sigmoid(v_t) - label_t)^2 through the one training loop (`components.training.fit`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from components.llm import ValueHeadModel, load_lm
from components.training import TrainConfig, TrainResult, fit


def verifier_text(question: str, solution: str) -> tuple[str, str]:
    """(prompt, continuation): ``question + "\\n"`` and the solution with a trailing delimiter."""
    return question.rstrip("\n") + "\n", solution if solution.endswith("\n") else solution + "\n"


@dataclass(frozen=True)
class Encoded:
    """Token rows: ids (question then solution), the number of question tokens, per line the index of its
    delimiter token."""

    ids: list[list[int]]
    prompts: list[int]
    line_ends: list[list[int]]


BACKBONES = {"tiny": "tiny", "smollm2": "smollm2-135m"}
LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj")


class Verifier:
    """A value-head model with its tokenizer; `encode` turns (question, solution) pairs into token rows.

    Args:
        backbone: a key of `BACKBONES`.
        seed: seed of the tiny model's weights, of the LoRA initialisation and of the value head.
        cache_dir: where the SmolLM2 fp32 cache lives (see `components.llm.load_lm`); unused by "tiny".
        lora_r, lora_layers: LoRA rank and the number of top decoder layers adapted ("smollm2" only).
        name_or_path: with backbone "smollm2", the user's own causal LM in its place (a checkpoint folder or a
            cached Hugging Face id, loaded offline by `components.llm.load_lm`), adapted the same way.
        root: where a relative ``name_or_path`` is taken from.
    """

    def __init__(
        self,
        backbone: str = "tiny",
        seed: int = 0,
        *,
        cache_dir: Path | None = None,
        lora_r: int = 8,
        lora_layers: int = 2,
        name_or_path: str | None = None,
        root: Path | None = None,
    ) -> None:
        if backbone not in BACKBONES:
            raise ValueError(f"unknown verifier backbone {backbone!r}; expected one of {sorted(BACKBONES)}")
        if name_or_path is not None and backbone == "tiny":
            raise ValueError("name_or_path replaces the pretrained backbone: use it with backbone 'smollm2'")
        lm = load_lm(name_or_path or BACKBONES[backbone], cache_dir=cache_dir, seed=seed, log=lambda _: None, root=root)
        self.lora = backbone != "tiny"
        if self.lora:
            total = int(lm.model.config.num_hidden_layers)
            lm = lm.with_lora(
                r=lora_r,
                alpha=2.0 * lora_r,
                target_modules=LORA_TARGETS,
                layers=range(max(0, total - lora_layers), total),
            )
        self.backbone = backbone
        self.tokenizer = lm.tokenizer
        self.pad = int(self.tokenizer.pad_token_id)
        self.bos = int(self.tokenizer.bos_token_id)
        self.model = ValueHeadModel(lm.model, seed=seed)
        self._newline = self._ids("\n")
        if len(self._newline) != 1:
            raise ValueError(f"backbone {backbone!r}: the newline is not a single token")

    def _ids(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def _table(self, texts: set[str]) -> dict[str, list[int]]:
        """Token ids of distinct texts, tokenised in one batch call."""
        ordered = sorted(texts)
        if not ordered:
            return {}
        return dict(zip(ordered, map(list, self.tokenizer(ordered, add_special_tokens=False)["input_ids"])))

    def encode(self, pairs: Sequence[tuple[str, str]], with_question: bool = True) -> Encoded:
        """Token rows of (question, solution) pairs: the bos token, the question and its delimiter (when
        ``with_question``), then the solution's lines, each followed by the newline token. The question and
        each line are tokenised apart and joined, so rows of one question share its token prefix exactly
        and every line ends on the newline token (no merge across a step boundary)."""
        split = [verifier_text(q, s) for q, s in pairs]
        table = self._table({p for p, _ in split} if with_question else set())
        table.update(self._table({line for _, body in split for line in body.split("\n")[:-1]}))
        ids, prompts, ends = [], [], []
        for prompt, body in split:
            row = [self.bos] + (table[prompt] if with_question else [])
            prompts.append(len(row))
            line_ends = []
            for line in body.split("\n")[:-1]:
                row += table[line] + self._newline
                line_ends.append(len(row) - 1)
            ids.append(row)
            ends.append(line_ends)
        return Encoded(ids, prompts, ends)

    TIED = "backbone.lm_head.weight"  # tied to the token embeddings: stored once

    def _saved(self, name: str) -> bool:
        if self.lora:  # the frozen pretrained weights come from the package, not from the saved file
            return "lora_" in name or name.startswith("head.")
        return name != self.TIED

    def state(self) -> dict[str, Tensor]:
        """The model's tensors to save: all but the tied output embedding (tiny), or the LoRA adapters and the
        value head (a pretrained backbone)."""
        return {k: v for k, v in self.model.state_dict().items() if self._saved(k)}

    def load_state(self, tensors: dict[str, Tensor]) -> None:
        """Load tensors written from `state` (every tensor `state` writes must be there, nothing else)."""
        expected = {k for k in self.model.state_dict() if self._saved(k)}
        missing, unexpected = sorted(expected - set(tensors)), sorted(set(tensors) - expected)
        if missing or unexpected:
            raise ValueError(
                f"verifier weights do not match the {self.backbone} verifier: missing {missing[:5]}, "
                f"unexpected {unexpected[:5]}"
            )
        self.model.load_state_dict(tensors, strict=False)

    def _pad(self, rows: Sequence[Sequence[int]]) -> tuple[Tensor, Tensor, Tensor]:
        width = max(len(r) for r in rows)
        ids = torch.full((len(rows), width), self.pad, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for b, row in enumerate(rows):
            ids[b, width - len(row) :] = torch.tensor(row, dtype=torch.long)
            mask[b, width - len(row) :] = 1
        return ids, mask, (mask.cumsum(-1) - 1).clamp(min=0)

    def train(
        self,
        encoded: Encoded,
        labels: Sequence[np.ndarray],
        cfg: TrainConfig,
        batch_size: int,
        callback: Callable[[int, dict[str, float]], None] | None = None,
    ) -> TrainResult:
        """Fit the value head (and the backbone) to ``labels`` (one array per row, over its solution tokens)."""
        ids, mask, positions = self._pad(encoded.ids)
        width = ids.shape[1]
        target = torch.zeros_like(ids, dtype=torch.float32)
        weight = torch.zeros_like(ids, dtype=torch.float32)
        for b, (row, p, lab) in enumerate(zip(encoded.ids, encoded.prompts, labels)):
            if len(lab) != len(row) - p:
                raise ValueError(f"row {b}: {len(lab)} labels for {len(row) - p} solution tokens")
            target[b, width - len(lab) :] = torch.as_tensor(lab, dtype=torch.float32)
            weight[b, width - len(lab) :] = 1.0
        n = ids.shape[0]

        def batches(step: int, generator: torch.Generator) -> tuple[Tensor, ...]:
            pick = torch.randint(0, n, (min(batch_size, n),), generator=generator)
            keep = int(mask[pick].sum(1).max())  # drop columns that are padding in every row
            return tuple(t[pick][:, width - keep :] for t in (ids, mask, positions, target, weight))

        def loss_fn(model: ValueHeadModel, batch: tuple[Tensor, ...]) -> tuple[Tensor, dict[str, Tensor]]:
            b_ids, b_mask, b_pos, b_target, b_weight = batch
            value = torch.sigmoid(model(b_ids, b_mask, b_pos))
            loss = ((value - b_target) ** 2 * b_weight).sum() / b_weight.sum()
            return loss, {}

        return fit(self.model, loss_fn, batches, cfg, callback=callback)

    @torch.inference_mode()
    def values_at(
        self, rows: Sequence[Sequence[int]], positions: Sequence[Sequence[int]], batch_size: int = 256
    ) -> list[np.ndarray]:
        """sigmoid(v_t) at the given token positions of each row (one causal pass per row)."""
        self.model.eval()
        out: list[np.ndarray] = [np.empty(0)] * len(rows)
        order = sorted(range(len(rows)), key=lambda i: len(rows[i]))
        for start in range(0, len(order), batch_size):
            chunk = order[start : start + batch_size]
            ids, mask, pos = self._pad([rows[i] for i in chunk])
            values = torch.sigmoid(self.model(ids, mask, pos)).numpy()
            width = ids.shape[1]
            for b, i in enumerate(chunk):
                offset = width - len(rows[i])
                out[i] = values[b, [offset + t for t in positions[i]]].astype(np.float64)
        return out

    def last_values(self, rows: Sequence[Sequence[int]], batch_size: int = 256) -> np.ndarray:
        """sigmoid(v) at the last token of each row."""
        return np.array([v[0] for v in self.values_at(rows, [[len(r) - 1] for r in rows], batch_size)])
