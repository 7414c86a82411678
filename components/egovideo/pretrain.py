"""Frame -> caption pre-training: the "base model reads frames" stage that precedes the QA fine-tuning.

MM-Ego fine-tunes LLaVA-OneVision, a model whose projector and LLM were already trained to match frames with
their captions; the tiny QA network starts from scratch. This short pre-training task gives it that capability
before the EgoMemoria-style QA: a sample is ``k`` frames drawn from the synthetic world *without habits* (every
action, object and place uniform at random, so no language prior helps) and a narration of one of them with a
noun left out, as a cloze question::

    frames:   k frames synthesised exactly as the benchmark's (components.egovideo.synthetic)
    question: "c puts the knife in the what"          options: 4 places, one is the frame's
    question: "c picks up the what from the drawer"   options: 4 objects, one is the frame's

Matching a caption to the frame it describes and naming the left-out noun is what LLaVA-style caption
pre-training teaches; no benchmark question template (last / after / how many) is used, no benchmark clip or
narration is read, and the answers are uniform over the options. A cue shared by two of the ``k`` frames (the same
action and noun) leaves its other frames' answers out of the distractors, so every question has one right option.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from torch import Tensor

from components.egovideo.mpp import Vocab
from components.egovideo.qa import N_OPTIONS
from components.egovideo.synthetic import (
    ACTIONS,
    BACKGROUND,
    LOCATIONS,
    OBJECTS,
    PLACE_ACTIONS,
    FrameConfig,
    _code,
    _object_patches,
)

BLANK = "what"
# narration templates with the left-out noun as BLANK; (action, asks for): "object" or "place"
_CLOZE = {
    ("picks up", "object"): "#C C picks up the what from the {loc}",
    ("picks up", "place"): "#C C picks up the {obj} from the what",
    ("puts", "object"): "#C C puts the what in the {loc}",
    ("puts", "place"): "#C C puts the {obj} in the what",
    ("opens", "place"): "#C C opens the what",
    ("closes", "place"): "#C C closes the what",
    ("washes", "object"): "#C C washes the what",
    ("wipes", "object"): "#C C wipes the what",
}
CLOZE_ACTIONS = ("picks up", "puts", "opens", "closes", "washes", "wipes")


def word_codes(cfg: FrameConfig) -> dict[str, np.ndarray]:
    """The frame code of every object and place word (the vectors :func:`synthesize_frames` adds for them):
    what :meth:`components.egovideo.mpp.EgoQAModel.align_codes` aligns the word embeddings with."""
    out = {o: _code("obj", o, cfg.d_feat, cfg.seed) for o in OBJECTS}
    return {**out, **{p: _code("loc", p, cfg.d_feat, cfg.seed) for p in LOCATIONS}}


def caption_texts() -> list[str]:
    """Every word the cloze questions and options use (to build the vocabulary with the QA's words)."""
    return [t.format(obj=o, loc=loc) for t in _CLOZE.values() for o in OBJECTS[:1] for loc in LOCATIONS[:1]] + [
        *OBJECTS,
        *LOCATIONS,
    ]


class CaptionTask:
    """Fresh cloze samples over ``k`` frames; ``draw(step, gen)`` returns a batch for
    :meth:`components.egovideo.mpp.EgoQAModel.option_logits` on all ``k`` frames at full resolution."""

    def __init__(self, vocab: Vocab, cfg: FrameConfig, k: int, batch_size: int, max_question: int = 16):
        if k < 1 or batch_size < 1:
            raise ValueError(f"CaptionTask needs k >= 1 and batch_size >= 1, got {k}, {batch_size}")
        self.vocab, self.cfg, self.k, self.batch_size, self.max_question = vocab, cfg, k, batch_size, max_question
        d = cfg.d_feat
        self.act = torch.tensor(np.stack([_code("act", a, d, cfg.seed) for a in ACTIONS]), dtype=torch.float32)
        self.loc = torch.tensor(np.stack([_code("loc", p, d, cfg.seed) for p in LOCATIONS]), dtype=torch.float32)
        self.background = torch.tensor(_code("act", BACKGROUND, d, cfg.seed), dtype=torch.float32)
        self.obj = torch.tensor(np.stack([_object_patches(o, cfg) for o in OBJECTS]), dtype=torch.float32)
        self.place_word = [vocab.encode(p, 4) for p in LOCATIONS]
        self.object_word = [vocab.encode(o, 4) for o in OBJECTS]

    @staticmethod
    def _cue(action: Tensor, obj: Tensor, loc: Tensor, j: int, kind: str) -> tuple[int, int]:
        """What the question about frame ``j`` names: its action and the noun it gives (-1: none)."""
        a = ACTIONS[int(action[j])]
        if kind == "object":
            return int(action[j]), int(loc[j]) if a in ("picks up", "puts") else -1
        return int(action[j]), int(obj[j]) if a in ("picks up", "puts") else -1

    def _question(self, action: Tensor, obj: Tensor, loc: Tensor, gen: torch.Generator) -> tuple:
        """A cloze question about one of the ``k`` frames (tried in random order, each kind of left-out noun in
        random order) whose cue leaves at least three distractors: (question ids, option ids, answer index)."""
        k = len(action)
        for t in torch.randperm(k, generator=gen).tolist():
            a = ACTIONS[int(action[t])]
            kinds = ["place"] if a in PLACE_ACTIONS else ["object"] if a in ("washes", "wipes") else ["object", "place"]
            if len(kinds) == 2 and int(torch.randint(0, 2, (1,), generator=gen)):
                kinds.reverse()
            for kind in kinds:
                value = obj if kind == "object" else loc
                cue = self._cue(action, obj, loc, t, kind)
                # every frame with the same cue answers it: none of their values may be a distractor
                taken = {int(value[j]) for j in range(k) if self._cue(action, obj, loc, j, kind) == cue}
                pool = [i for i in range(len(OBJECTS if kind == "object" else LOCATIONS)) if i not in taken]
                if len(pool) < N_OPTIONS - 1:
                    continue
                pick = torch.randperm(len(pool), generator=gen)[: N_OPTIONS - 1].tolist()
                choice = [int(value[t]), *(pool[i] for i in pick)]
                order = torch.randperm(N_OPTIONS, generator=gen).tolist()
                words = self.object_word if kind == "object" else self.place_word
                text = _CLOZE[(a, kind)].format(obj=OBJECTS[int(obj[t])], loc=LOCATIONS[int(loc[t])])
                return self.vocab.encode(text, self.max_question), [words[choice[i]] for i in order], order.index(0)
        raise RuntimeError("no frame of the sample has an unambiguous cloze question")

    def draw(self, step: int, gen: torch.Generator) -> dict[str, Tensor]:
        B, k = self.batch_size, self.k
        action = torch.randint(0, len(ACTIONS), (B, k), generator=gen)
        obj = torch.randint(0, len(OBJECTS), (B, k), generator=gen)
        loc = torch.randint(0, len(LOCATIONS), (B, k), generator=gen)
        has_obj = torch.tensor([a not in PLACE_ACTIONS for a in ACTIONS])[action]
        frames = (self.act[action] + self.loc[loc])[:, :, None, :].expand(B, k, self.cfg.patches, -1).clone()
        frames += self.obj[obj] * has_obj[:, :, None, None]
        frames += self.cfg.noise * torch.randn(frames.shape, generator=gen)
        questions, options, answers = [], [], []
        for b in range(B):
            q, opts, answer = self._question(action[b], obj[b], loc[b], gen)
            questions.append(q)
            options.append(opts)
            answers.append(answer)
        return {
            "question": torch.tensor(questions, dtype=torch.long),
            "options": torch.tensor(options, dtype=torch.long),
            "answer": torch.tensor(answers, dtype=torch.long),
            "frames": frames,
        }


def caption_loss() -> Callable:
    """``loss_fn(model, batch)`` for :func:`components.training.fit`: CE of the cloze options given all frames."""
    from torch.nn import functional as F

    def loss_fn(model, batch: dict[str, Tensor]) -> tuple[Tensor, dict[str, Tensor]]:
        B, T = batch["frames"].shape[:2]
        idx = torch.arange(T).expand(B, -1)
        logits = model.option_logits(batch["question"], model.full_tokens(batch["frames"], idx), batch["options"])
        ce = F.cross_entropy(logits, batch["answer"])
        return ce, {"acc": (logits.argmax(1) == batch["answer"]).float().mean()}

    return loss_fn


@torch.no_grad()
def caption_accuracy(model, task: CaptionTask, seed: int, batches: int = 10) -> float:
    """Share of fresh cloze questions (``batches`` draws of ``task``) the model answers: frame reading of the base."""
    was = model.training
    model.eval()
    gen = torch.Generator().manual_seed(seed)
    right = total = 0
    loss_fn = caption_loss()
    for step in range(batches):
        batch = task.draw(step, gen)
        _, extras = loss_fn(model, batch)
        right += float(extras["acc"]) * len(batch["answer"])
        total += len(batch["answer"])
    model.train(was)
    return right / total
