"""TOFU's metrics as open-unlearning computes them (locuslab/open-unlearning, ``src/evals/metrics``).

Per QA, from the mean token NLL of an answer given its question (``avg_loss``):

* probability: exp(-avg_loss) (``*_Q_A_Prob``);
* probability with options (world facts): p(answer) / (p(answer) + sum_k p(perturbed_k) + 1e-10);
* truth ratio: exp(-mean_k avg_loss(perturbed_k)) / (exp(-avg_loss(correct)) + 1e-10), where "correct" is the
  paraphrased answer (forget, retain) or the answer (world facts); aggregated as
  ``closer_to_1_better`` = mean(min(tr, 1 / (tr + 1e-10))) on the forget set and ``true_better`` =
  mean(max(0, 1 - tr)) elsewhere;
* ROUGE-L recall of the greedy generation against the answer (`rouge_score`, ``use_stemmer=True``);
* exact memorisation: the share of answer tokens that are the argmax of their position (teacher forced); we
  also report exact match, 1 when every answer token is the argmax, i.e. greedy decoding reproduces the answer.

Across QAs: ``forget_quality`` = the p-value of `scipy.stats.ks_2samp` between the unlearned model's and the
retain-only model's forget-set truth ratios (undefined without the retain model's values: we raise), and
``model_utility`` = `scipy.stats.hmean` of the utility values (0 if any is 0).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

EPS = 1e-10


def probability(avg_loss: np.ndarray) -> np.ndarray:
    """exp(-mean token NLL) per QA."""
    return np.exp(-np.asarray(avg_loss, dtype=float))


def probability_with_options(correct_loss: np.ndarray, wrong_loss: np.ndarray) -> np.ndarray:
    """p(correct) / (p(correct) + sum of p(wrong) + 1e-10); ``wrong_loss`` is [N, K]."""
    correct, wrong = probability(correct_loss), probability(wrong_loss)
    return correct / (correct + wrong.reshape(len(correct), -1).sum(1) + EPS)


def truth_ratio(correct_loss: np.ndarray, wrong_loss: np.ndarray) -> np.ndarray:
    """P(wrong) / P(correct) per QA, the wrong answers' mean token NLLs averaged first ([N, K] -> [N])."""
    wrong = np.asarray(wrong_loss, dtype=float)
    wrong_mean = wrong.reshape(wrong.shape[0], -1).mean(1)
    return np.exp(-wrong_mean) / (np.exp(-np.asarray(correct_loss, dtype=float)) + EPS)


def closer_to_1_better(tr: np.ndarray) -> float:
    """Forget-set aggregate: mean(min(tr, 1/tr)); 1 when true and false answers are equally likely."""
    tr = np.asarray(tr, dtype=float)
    return float(np.mean(np.minimum(tr, 1.0 / (tr + EPS))))


def true_better(tr: np.ndarray) -> float:
    """Utility aggregate: mean(max(0, 1 - tr)); 1 when the true answer is far more likely than the false ones."""
    return float(np.mean(np.maximum(0.0, 1.0 - np.asarray(tr, dtype=float))))


def forget_quality(unlearned_tr: Sequence[float], retain_tr: Sequence[float]) -> float:
    """KS-test p-value between the two models' forget-set truth ratios (TOFU's forget quality)."""
    from scipy.stats import ks_2samp

    if len(unlearned_tr) == 0 or len(retain_tr) == 0:
        raise ValueError("forget quality needs the truth ratios of both models (the retain model's are missing)")
    return float(ks_2samp(np.asarray(unlearned_tr, dtype=float), np.asarray(retain_tr, dtype=float)).pvalue)


def model_utility(values: Mapping[str, float]) -> float:
    """Harmonic mean of the utility values (scipy.stats.hmean); 0 if any value is 0."""
    from scipy.stats import hmean

    xs = np.asarray(list(values.values()), dtype=float)
    if xs.size == 0 or np.any(~np.isfinite(xs)) or np.any(xs < 0):
        raise ValueError(f"model utility needs finite values >= 0, got {dict(values)}")
    return 0.0 if np.any(xs == 0) else float(hmean(xs))


def rouge_l_recall(generations: Sequence[str], references: Sequence[str]) -> list[float]:
    """ROUGE-L recall of each generation against its reference (rouge_score, Porter stemming)."""
    from rouge_score import rouge_scorer

    if len(generations) != len(references):
        raise ValueError(f"{len(generations)} generations for {len(references)} references")
    scorer = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)
    return [float(scorer.score(ref, gen)["rougeL"].recall) for gen, ref in zip(generations, references)]
