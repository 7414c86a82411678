"""Every registered objective against a value computed by hand from the formula, the registry's contract,
and the direction each loss pushes the scores."""

from __future__ import annotations

import math

import pytest
import torch

from components.preference import (
    F_DIVERGENCES,
    OBJECTIVES,
    ObjectiveConfig,
    PreferenceBatch,
    SequenceScores,
    objective_loss,
)


def scores(logp: list[float], n: list[float], probs: list[float] | None = None, width: int = 0) -> SequenceScores:
    """Scores with grad; prob_sum defaults to n * exp(logp / n) (rows of equal token probabilities)."""
    prob = probs if probs is not None else [k * math.exp(lp / k) for lp, k in zip(logp, n)]
    return SequenceScores(
        torch.tensor(logp, dtype=torch.float32, requires_grad=True),
        torch.tensor(n, dtype=torch.float32),
        torch.tensor(prob, dtype=torch.float32, requires_grad=True),
        width,
    )


def sigmoid(x: float) -> float:
    return 1 / (1 + math.exp(-x))


def test_registry_names_and_needs() -> None:
    assert set(OBJECTIVES) == {
        "ga",
        "graddiff",
        "idk",
        "npo",
        "dpo",
        "flat_kl",
        "flat_tv",
        "flat_js",
        "flat_pearson",
        "denoise",
        "preferdiff",
    }
    assert [n for n, s in OBJECTIVES.items() if s.uses_retain_data] == ["graddiff"]
    with pytest.raises(ValueError, match=r"objective 'npo' needs .*missing \['ref_rejected'\]"):
        objective_loss("npo", PreferenceBatch(rejected=scores([-1.0], [1.0])))
    with pytest.raises(ValueError, match=r"unknown objective 'gls'; expected one of \['denoise', 'dpo', 'flat_js'"):
        objective_loss("gls", PreferenceBatch())
    with pytest.raises(ValueError, match="beta must be"):
        ObjectiveConfig(beta=0)
    with pytest.raises(ValueError, match="normalisation must be"):
        ObjectiveConfig(normalisation="tokens")


def test_ga_graddiff_idk_are_token_weighted_nll() -> None:
    forget, retain = scores([-2.0, -6.0], [1.0, 3.0]), scores([-1.0], [4.0])
    ga, _ = objective_loss("ga", PreferenceBatch(rejected=forget))
    assert float(ga) == pytest.approx(-8.0 / 4.0)  # mean log-prob = -NLL
    gd, m = objective_loss(
        "graddiff", PreferenceBatch(rejected=forget, retain=retain), ObjectiveConfig(retain_weight=0.5)
    )
    assert float(gd) == pytest.approx(-2.0 + 0.5 * 0.25) and float(m["retain_nll"]) == pytest.approx(0.25)
    idk, _ = objective_loss("idk", PreferenceBatch(chosen=retain))
    assert float(idk) == pytest.approx(0.25)
    ga.backward()  # minimising GA lowers the forget log-prob
    assert (forget.logp.grad > 0).all()


def test_npo_known_value_and_limit() -> None:
    beta = 0.5
    forget, ref = scores([-3.0, -1.0], [2.0, 2.0]), scores([-2.0, -2.0], [2.0, 2.0])
    loss, _ = objective_loss("npo", PreferenceBatch(rejected=forget, ref_rejected=ref), ObjectiveConfig(beta=beta))
    ratios = [-1.0, 1.0]
    expected = -(2 / beta) * sum(math.log(sigmoid(-beta * r)) for r in ratios) / 2
    assert float(loss) == pytest.approx(expected)
    # at the reference the loss is (2 / beta) log 2 and pushes the forget log-prob down
    same, _ = objective_loss(
        "npo", PreferenceBatch(rejected=ref, ref_rejected=ref.detach()), ObjectiveConfig(beta=beta)
    )
    assert float(same) == pytest.approx(2 / beta * math.log(2))
    same.backward()
    assert (ref.logp.grad > 0).all()


def test_dpo_known_value() -> None:
    beta = 0.2
    batch = PreferenceBatch(
        chosen=scores([-1.0, -4.0], [1, 2]),
        rejected=scores([-3.0, -2.0], [1, 1]),
        ref_chosen=scores([-2.0, -3.0], [1, 2]),
        ref_rejected=scores([-2.0, -2.5], [1, 1]),
    )
    loss, m = objective_loss("dpo", batch, ObjectiveConfig(beta=beta))
    margins = [beta * ((-1 + 2) - (-3 + 2)), beta * ((-4 + 3) - (-2 + 2.5))]  # 0.4, -0.3
    assert float(loss) == pytest.approx(-sum(math.log(sigmoid(x)) for x in margins) / 2)
    assert float(m["reward_accuracy"]) == 0.5 and float(m["reward_margin"]) == pytest.approx(0.05)


@pytest.mark.parametrize(
    ("name", "g", "fg"),
    [
        ("kl", lambda v: v, lambda v: math.exp(v - 1)),
        ("tv", lambda v: math.tanh(v) / 2, lambda v: math.tanh(v) / 2),
        (
            "js",
            lambda v: math.log(2) - math.log(1 + math.exp(-v)),
            lambda v: v + math.log(1 + math.exp(-v)) - math.log(2),
        ),
        ("pearson", lambda v: v, lambda v: v * v / 4 + v),
    ],
)
def test_flat_matches_the_divergence_table(name, g, fg) -> None:
    template = scores([0, 0], [2, 4], probs=[1.2, 0.8])  # h = 0.6, 0.2
    forget = scores([0, 0], [1, 2], probs=[0.9, 1.0])  # h = 0.9, 0.5
    loss, m = objective_loss(f"flat_{name}", PreferenceBatch(chosen=template, rejected=forget))
    expected = -((g(0.6) - fg(0.9)) + (g(0.2) - fg(0.5))) / 2
    assert float(loss) == pytest.approx(expected, rel=1e-6)
    assert float(m["forget_prob"]) == pytest.approx(0.7)
    loss.backward()  # more template probability and less forget probability lower the loss
    assert (template.prob_sum.grad < 0).all() and (forget.prob_sum.grad > 0).all()


def test_flat_padded_normalisation_is_the_official_batch_mean() -> None:
    template = scores([0, 0], [2, 4], probs=[1.2, 0.8], width=10)
    forget = scores([0, 0], [1, 2], probs=[0.9, 1.0], width=5)
    loss, _ = objective_loss(
        "flat_kl", PreferenceBatch(chosen=template, rejected=forget), ObjectiveConfig(normalisation="padded")
    )
    h_template, h_forget = 2.0 / (2 * 10), 1.9 / (2 * 5)
    assert float(loss) == pytest.approx(-(h_template - math.exp(h_forget - 1)))
    with pytest.raises(ValueError, match="one padded batch"):
        objective_loss(
            "flat_kl",
            PreferenceBatch(chosen=scores([0], [1]), rejected=scores([0], [1])),
            ObjectiveConfig(normalisation="padded"),
        )


def test_the_js_pair_is_the_conjugate_composition() -> None:
    """f*(t) = -log(2 - e^t) for Jensen-Shannon: f*(g*(v)) of the table equals it at t = g*(v)."""
    g, fg = F_DIVERGENCES["js"]
    v = torch.linspace(-3, 3, 13)
    assert torch.allclose(fg(v), -torch.log(2 - torch.exp(g(v))), atol=1e-6)


def test_sequence_scores_helpers() -> None:
    s = SequenceScores(torch.tensor([-2.0, -3.0]), torch.tensor([2.0, 3.0]), torch.tensor([1.0, 0.6]), 7)
    assert s.logp_mean.tolist() == [-1.0, -1.0] and s.prob_mean.tolist() == pytest.approx([0.5, 0.2])
    picked = s.select(torch.tensor([1]))
    assert picked.logp.tolist() == [-3.0] and picked.width == 7
    both = SequenceScores.cat([s, picked])
    assert both.logp.tolist() == [-2.0, -3.0, -3.0] and both.width == 7
    assert SequenceScores.cat([s, SequenceScores(*picked[:3], 4)]).width == 0


def _errors(values: list[float]) -> SequenceScores:
    """Negated per-row errors as one-token scores (the diffusion recommender's convention)."""
    e = torch.tensor(values, requires_grad=True)
    return SequenceScores(-e, torch.ones(len(values)), torch.zeros(len(values)))


def softplus(x: float) -> float:
    return math.log1p(math.exp(x))


def test_preferdiff_per_sample_and_official_batch_mean_pairing_by_hand() -> None:
    batch = PreferenceBatch(chosen=_errors([0.2, 0.6]), rejected=_errors([0.4, 0.4]))
    # per row: gaps -0.2, +0.2; -log sigmoid(-5 gap) = softplus(5 gap)
    loss, m = objective_loss("preferdiff", batch, ObjectiveConfig(beta=5.0, sft_weight=0.4, pairing="sample"))
    expected = 0.6 * (softplus(-1.0) + softplus(1.0)) / 2 + 0.4 * 0.4
    assert float(loss) == pytest.approx(expected, rel=1e-6)
    assert float(m["preference_accuracy"]) == 0.5 and float(m["negative_error"]) == pytest.approx(0.4)
    # the official code compares batch means: 0.4 - 0.4 = 0 -> log 2
    loss, _ = objective_loss("preferdiff", batch, ObjectiveConfig(beta=5.0, sft_weight=0.4, pairing="batch"))
    assert float(loss) == pytest.approx(0.6 * math.log(2) + 0.4 * 0.4, rel=1e-6)
    # lambda = 1 is the plain denoising loss
    loss, _ = objective_loss("preferdiff", batch, ObjectiveConfig(beta=5.0, sft_weight=1.0))
    assert float(loss) == pytest.approx(float(objective_loss("denoise", batch)[0]))


def test_preferdiff_pushes_the_positive_error_down_and_the_negative_up() -> None:
    # gradient descent lowers the positive's error (d loss / d e+ > 0) and raises the negative's
    pos, neg = torch.tensor([0.3, 0.5], requires_grad=True), torch.tensor([0.3, 0.5], requires_grad=True)
    b = PreferenceBatch(
        chosen=SequenceScores(-pos, torch.ones(2), torch.zeros(2)),
        rejected=SequenceScores(-neg, torch.ones(2), torch.zeros(2)),
    )
    objective_loss("preferdiff", b, ObjectiveConfig(beta=5.0, sft_weight=0.0))[0].backward()
    assert (pos.grad > 0).all() and (neg.grad < 0).all()


def test_denoise_is_the_mean_error_and_config_checks() -> None:
    loss, m = objective_loss("denoise", PreferenceBatch(chosen=_errors([0.1, 0.3])))
    assert float(loss) == pytest.approx(0.2) and float(m["positive_error"]) == pytest.approx(0.2)
    with pytest.raises(ValueError, match="sft_weight"):
        ObjectiveConfig(sft_weight=1.5)
    with pytest.raises(ValueError, match="pairing"):
        ObjectiveConfig(pairing="rows")  # type: ignore[arg-type]
