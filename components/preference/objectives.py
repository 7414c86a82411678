"""Preference and unlearning objectives on sequence scores, with one signature, in one registry.

Every objective is ``fn(batch: PreferenceBatch, cfg: ObjectiveConfig) -> (loss, metrics)``: a scalar loss to
minimise and a ``{name: scalar tensor}`` dict of detached diagnostics (averaged and logged by
`components.training.fit`). A batch carries the per-row scores of one model (and optionally of a frozen
reference model) of up to three kinds of continuation:

- ``chosen``: the answer to move towards (DPO's preferred answer; the template / "I don't know" answer y_e of
  IDK-SFT and FLAT);
- ``rejected``: the answer to move away from (DPO's dispreferred answer; the forget answer y_f of GA, NPO and
  FLAT);
- ``retain``: data whose likelihood must be kept (GradDiff's retain term).

With s = a row's summed token log-probability log p(y | x) = sum_i log p(y_i | x, y_<i) and h = its mean token
*probability* (1/|y|) sum_i p(y_i | x, y_<i):

==============  ============================================================================================
``ga``          sum_rows s(rejected) / sum_rows |y|: the token-weighted mean log-likelihood of the forget
                answers; minimising it is gradient *ascent* on their NLL (TOFU's GA)
``graddiff``    ga + retain_weight * NLL(retain) (GA with a retain-set descent term; needs retain data)
``idk``         NLL(chosen): supervised fine-tuning on the template answers (TOFU's IDK)
``npo``         -(2/beta) mean log sigmoid(-beta (s(rejected) - s_ref(rejected)))  (Zhang et al. 2024)
``dpo``         -mean log sigmoid(beta [(s(chosen) - s_ref(chosen)) - (s(rejected) - s_ref(rejected))])
``flat_<f>``    -mean [ g*(h(chosen)) - f*(g*(h(rejected))) ]  for the f-divergences of `F_DIVERGENCES`
``denoise``     mean_rows e(chosen): the mean reconstruction error of the positive (DreamRec's x0 loss)
``preferdiff``  -(1 - lam) log sigmoid(-beta (e(chosen) - e(rejected))) + lam mean_rows e(chosen)
==============  ============================================================================================

For ``denoise`` and ``preferdiff`` a row's score is a negated per-row error, ``e = -logp / n_tokens`` (a
diffusion model's reconstruction error of the positive target, ``chosen``, and of the negative, ``rejected``).
PreferDiff (arXiv 2410.13117) takes ``beta`` as its gamma and ``sft_weight`` as its lambda. With
``ObjectiveConfig(pairing="sample")`` the log-sigmoid term compares each row's two errors and is averaged over
rows; ``pairing="batch"`` reproduces the official code, which compares the *batch means* of the two errors (one
log-sigmoid per batch).

NLL here is token-weighted over the batch (sum of token NLLs / number of tokens), the convention of a
causal-LM cross-entropy with padding ignored.

FLAT (arXiv 2410.11143) raises g* of the template answer's score and lowers f*∘g* of the forget answer's
score; the derivative of f*∘g* weights each forget example (its "loss adjustment"). The official code computes
h as the sum of token probabilities over the whole padded batch divided by B·L (batch size times padded
length), one number per batch; ``ObjectiveConfig(normalisation="padded")`` reproduces that, the default
``"answer"`` divides each row by its own answer length.

Scores need not come from a language model: any "higher is better" per-row score with a token count works
(e.g. a negated reconstruction error), which is how non-LM papers reuse these losses.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor

LOG2 = math.log(2.0)


class SequenceScores(NamedTuple):
    """One model's scores of B continuations (tensors [B]; with grad when computed with grad).

    A NamedTuple, so `components.training.fit` moves it to the training device with the rest of a batch.

    Attributes:
        logp: sum over the continuation's tokens of log p(y_i | x, y_<i), in nats.
        n_tokens: the number of continuation tokens of each row (float).
        prob_sum: sum over the continuation's tokens of p(y_i | x, y_<i).
        width: the padded sequence length of the batch the rows were scored in (FLAT's official B·L
            normalisation); 0 when the rows were scored in several batches.
    """

    logp: Tensor
    n_tokens: Tensor
    prob_sum: Tensor
    width: int = 0

    @property
    def logp_mean(self) -> Tensor:
        """Mean token log-probability of each row [B]."""
        return self.logp / self.n_tokens.clamp(min=1)

    @property
    def prob_mean(self) -> Tensor:
        """Mean token probability of each row [B] (FLAT's sequence score h)."""
        return self.prob_sum / self.n_tokens.clamp(min=1)

    def select(self, index: Tensor) -> SequenceScores:
        """The rows at ``index`` (the batch width is kept)."""
        return SequenceScores(self.logp[index], self.n_tokens[index], self.prob_sum[index], self.width)

    def detach(self) -> SequenceScores:
        return SequenceScores(self.logp.detach(), self.n_tokens.detach(), self.prob_sum.detach(), self.width)

    @staticmethod
    def cat(parts: list[SequenceScores]) -> SequenceScores:
        """Rows of several batches, in order; the width is kept only if all parts share it."""
        if not parts:
            raise ValueError("SequenceScores.cat needs at least one part")
        widths = {p.width for p in parts}
        return SequenceScores(
            torch.cat([p.logp for p in parts]),
            torch.cat([p.n_tokens for p in parts]),
            torch.cat([p.prob_sum for p in parts]),
            widths.pop() if len(widths) == 1 else 0,
        )


class PreferenceBatch(NamedTuple):
    """The scores an objective reads; each objective names the fields it needs (`ObjectiveSpec.needs`)."""

    chosen: SequenceScores | None = None
    rejected: SequenceScores | None = None
    ref_chosen: SequenceScores | None = None
    ref_rejected: SequenceScores | None = None
    retain: SequenceScores | None = None


Normalisation = Literal["answer", "padded"]
Pairing = Literal["sample", "batch"]


@dataclass(frozen=True)
class ObjectiveConfig:
    """Settings of the objectives.

    Attributes:
        beta: inverse temperature of DPO and NPO (> 0).
        retain_weight: weight of GradDiff's retain NLL (>= 0).
        normalisation: FLAT's h: ``"answer"`` (each row's mean token probability) or ``"padded"`` (the official
            code: the batch's summed token probabilities over B x padded width, one value per batch).
        sft_weight: PreferDiff's lambda, the weight of the positive's own error (0 <= lambda <= 1).
        pairing: PreferDiff's preference term per row (``"sample"``) or on batch means (``"batch"``, official).
    """

    beta: float = 0.1
    retain_weight: float = 1.0
    normalisation: Normalisation = "answer"
    sft_weight: float = 0.5
    pairing: Pairing = "sample"

    def __post_init__(self) -> None:
        if not (isinstance(self.beta, (int, float)) and math.isfinite(self.beta) and self.beta > 0):
            raise ValueError(f"ObjectiveConfig.beta must be a finite number > 0, got {self.beta!r}")
        if not (
            isinstance(self.retain_weight, (int, float))
            and math.isfinite(self.retain_weight)
            and self.retain_weight >= 0
        ):
            raise ValueError(f"ObjectiveConfig.retain_weight must be a finite number >= 0, got {self.retain_weight!r}")
        if self.normalisation not in ("answer", "padded"):
            raise ValueError(f"ObjectiveConfig.normalisation must be 'answer' or 'padded', got {self.normalisation!r}")
        if not (isinstance(self.sft_weight, (int, float)) and 0 <= self.sft_weight <= 1):
            raise ValueError(f"ObjectiveConfig.sft_weight must be a number in [0, 1], got {self.sft_weight!r}")
        if self.pairing not in ("sample", "batch"):
            raise ValueError(f"ObjectiveConfig.pairing must be 'sample' or 'batch', got {self.pairing!r}")


Metrics = dict[str, Tensor]
Objective = Callable[[PreferenceBatch, ObjectiveConfig], tuple[Tensor, Metrics]]


# --------------------------------------------------------------------------------------------------
# f-divergences of FLAT: (g*, f* o g*) as in the paper's table / the official get_contrastive_loss
# --------------------------------------------------------------------------------------------------
F_DIVERGENCES: dict[str, tuple[Callable[[Tensor], Tensor], Callable[[Tensor], Tensor]]] = {
    "kl": (lambda v: v, lambda v: torch.exp(v - 1.0)),
    "tv": (lambda v: 0.5 * torch.tanh(v), lambda v: 0.5 * torch.tanh(v)),
    "js": (lambda v: LOG2 - F.softplus(-v), lambda v: v + F.softplus(-v) - LOG2),
    "pearson": (lambda v: v, lambda v: v * v / 4.0 + v),
}


def _nll(s: SequenceScores) -> Tensor:
    """Token-weighted mean NLL of the rows (sum of token NLLs / number of tokens)."""
    return -s.logp.sum() / s.n_tokens.sum().clamp(min=1)


def _flat_score(s: SequenceScores, normalisation: Normalisation) -> Tensor:
    """h per row [B] (answer normalisation) or one h for the batch [1] (the official B·L normalisation)."""
    if normalisation == "answer":
        return s.prob_mean
    if s.width < 1:
        raise ValueError("the 'padded' normalisation needs scores of one padded batch (SequenceScores.width >= 1)")
    return (s.prob_sum.sum() / (s.prob_sum.shape[0] * s.width)).reshape(1)


def gradient_ascent(batch: PreferenceBatch, cfg: ObjectiveConfig) -> tuple[Tensor, Metrics]:
    loss = -_nll(batch.rejected)
    return loss, {"forget_nll": (-loss).detach()}


def grad_diff(batch: PreferenceBatch, cfg: ObjectiveConfig) -> tuple[Tensor, Metrics]:
    forget_nll, retain_nll = _nll(batch.rejected), _nll(batch.retain)
    return -forget_nll + cfg.retain_weight * retain_nll, {
        "forget_nll": forget_nll.detach(),
        "retain_nll": retain_nll.detach(),
    }


def idk_sft(batch: PreferenceBatch, cfg: ObjectiveConfig) -> tuple[Tensor, Metrics]:
    loss = _nll(batch.chosen)
    return loss, {"template_nll": loss.detach()}


def npo(batch: PreferenceBatch, cfg: ObjectiveConfig) -> tuple[Tensor, Metrics]:
    log_ratio = batch.rejected.logp - batch.ref_rejected.logp
    loss = -(2.0 / cfg.beta) * F.logsigmoid(-cfg.beta * log_ratio).mean()
    return loss, {"forget_log_ratio": log_ratio.mean().detach()}


def dpo(batch: PreferenceBatch, cfg: ObjectiveConfig) -> tuple[Tensor, Metrics]:
    chosen = batch.chosen.logp - batch.ref_chosen.logp
    rejected = batch.rejected.logp - batch.ref_rejected.logp
    margin = cfg.beta * (chosen - rejected)
    loss = -F.logsigmoid(margin).mean()
    return loss, {
        "reward_margin": margin.mean().detach(),
        "reward_accuracy": (margin > 0).float().mean().detach(),
        "chosen_reward": (cfg.beta * chosen).mean().detach(),
        "rejected_reward": (cfg.beta * rejected).mean().detach(),
    }


def flat(divergence: str) -> Objective:
    """FLAT's loss for one f-divergence of `F_DIVERGENCES`."""
    g_star, f_star_g_star = F_DIVERGENCES[divergence]

    def loss_fn(batch: PreferenceBatch, cfg: ObjectiveConfig) -> tuple[Tensor, Metrics]:
        h_template = _flat_score(batch.chosen, cfg.normalisation)
        h_forget = _flat_score(batch.rejected, cfg.normalisation)
        loss = -(g_star(h_template) - f_star_g_star(h_forget)).mean()
        return loss, {"template_prob": h_template.mean().detach(), "forget_prob": h_forget.mean().detach()}

    loss_fn.__name__ = f"flat_{divergence}"
    return loss_fn


def denoise(batch: PreferenceBatch, cfg: ObjectiveConfig) -> tuple[Tensor, Metrics]:
    error = -batch.chosen.logp_mean
    loss = error.mean()
    return loss, {"positive_error": loss.detach()}


def preferdiff(batch: PreferenceBatch, cfg: ObjectiveConfig) -> tuple[Tensor, Metrics]:
    pos, neg = -batch.chosen.logp_mean, -batch.rejected.logp_mean
    gap = pos - neg if cfg.pairing == "sample" else (pos.mean() - neg.mean()).reshape(1)
    preference = -F.logsigmoid(-cfg.beta * gap).mean()
    loss = (1 - cfg.sft_weight) * preference + cfg.sft_weight * pos.mean()
    return loss, {
        "positive_error": pos.mean().detach(),
        "negative_error": neg.mean().detach(),
        "preference_loss": preference.detach(),
        "preference_accuracy": (gap < 0).float().mean().detach(),
    }


@dataclass(frozen=True)
class ObjectiveSpec:
    """A registered objective: the function, the `PreferenceBatch` fields it reads, and one line about it."""

    fn: Objective
    needs: tuple[str, ...]
    description: str
    uses_retain_data: bool = False


OBJECTIVES: dict[str, ObjectiveSpec] = {
    "ga": ObjectiveSpec(gradient_ascent, ("rejected",), "gradient ascent on the forget answers' NLL"),
    "graddiff": ObjectiveSpec(
        grad_diff,
        ("rejected", "retain"),
        "gradient ascent on the forget answers plus NLL descent on retain data",
        uses_retain_data=True,
    ),
    "idk": ObjectiveSpec(idk_sft, ("chosen",), "fine-tuning on template ('I don't know') answers"),
    "npo": ObjectiveSpec(
        npo, ("rejected", "ref_rejected"), "negative preference optimisation against the frozen original model"
    ),
    "dpo": ObjectiveSpec(
        dpo,
        ("chosen", "rejected", "ref_chosen", "ref_rejected"),
        "direct preference optimisation (sigmoid loss) against a frozen reference",
    ),
    **{
        f"flat_{name}": ObjectiveSpec(
            flat(name), ("chosen", "rejected"), f"FLAT with the {name.upper()} f-divergence (template vs forget answer)"
        )
        for name in F_DIVERGENCES
    },
    "denoise": ObjectiveSpec(
        denoise,
        ("chosen",),
        "mean reconstruction error of the positive (a diffusion model's x0 loss; scores are negated per-row errors)",
    ),
    "preferdiff": ObjectiveSpec(
        preferdiff,
        ("chosen", "rejected"),
        "PreferDiff: log-sigmoid preference of the positive's error over the negative's, "
        "plus sft_weight times the positive's error",
    ),
}


def objective_loss(
    name: str, batch: PreferenceBatch, cfg: ObjectiveConfig = ObjectiveConfig()
) -> tuple[Tensor, Metrics]:
    """The registered objective ``name`` on ``batch``: (scalar loss, detached metrics).

    Raises:
        ValueError: unknown name, or a field the objective needs is missing from the batch.
    """
    if name not in OBJECTIVES:
        raise ValueError(f"unknown objective {name!r}; expected one of {sorted(OBJECTIVES)}")
    spec = OBJECTIVES[name]
    missing = [f for f in spec.needs if getattr(batch, f) is None]
    if missing:
        raise ValueError(f"objective {name!r} needs the batch fields {list(spec.needs)}; missing {missing}")
    return spec.fn(batch, cfg)
