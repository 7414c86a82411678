"""flat's model wiring (one paper's helpers, kept out of ``pipeline.py`` so that it reads like the method):
SmolLM2-135M with LoRA on the top layers over a frozen trunk memoised once per process, the TOFU evaluator on
that model, the tokenised QA pairs, the metadata and evaluation files written beside each adapter, and the probe
that draws an unlearning run's curve (forget probability, forget and retain exact match)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from components.io import save_json
from components.unlearning.evaluate import EvalConfig, TofuEvaluator, qa_continuation, qa_prompt, summary
from pipelines.flat.params import FlatParams, ModelParams


@functools.lru_cache(maxsize=1)
def _session(lm_name: str, precision: str, cache_dir: Path | None, root: Path | None, lora: tuple[Any, ...]) -> Any:
    from components.llm import load_lm
    from components.unlearning.training import AdapterSession

    layers, r, alpha, targets = lora
    return AdapterSession(
        load_lm(lm_name, cache_dir=cache_dir, seed=0, precision=precision, root=root),
        lora_layers=layers,
        r=r,
        alpha=alpha,
        target_modules=targets,
    )


def open_session(
    p: FlatParams, qa: dict[str, Any], cache_dir: Path | None, root: Path | None = None
) -> tuple[Any, TofuEvaluator]:
    """The adapter session of ``p.model`` (one per process) and a TOFU evaluator of the benchmark ``qa`` on its
    model, primed with the base model's answers. ``root``: where a relative ``model.name_or_path`` is taken from."""
    m = p.model
    lora = (m.lora_layers, m.lora_r, m.lora_alpha, tuple(m.target_modules))
    session = _session(m.lm_used, m.precision, cache_dir, root, lora)
    evaluator = TofuEvaluator(
        session.lm,
        qa["forget"],
        [r for r in qa["retain"] if r["evaluated"]],
        qa["world_facts"],
        qa["passages"],
        EvalConfig(batch_size=p.eval.batch_size, max_new_tokens=p.eval.max_new_tokens),
    )
    evaluator.prime(session.model)
    return session, evaluator


def qa_pairs(session: Any, rows: list[dict[str, Any]], answers: list[str] | None = None) -> Any:
    """The (prompt, answer) token pairs of ``rows``, with their own answers or the given ``answers``."""
    answers = answers if answers is not None else [r["answer"] for r in rows]
    return session.lm.tokenize_pairs([qa_prompt(r["question"]) for r in rows], [qa_continuation(a) for a in answers])


def adapter_meta(m: ModelParams, role: str) -> dict[str, str]:
    """The metadata stored with an adapter's tensors: enough to rebuild the model they belong to."""
    return {
        "base_model": m.lm_used,
        "precision": m.precision,
        "role": role,
        "lora_layers": f"top {m.lora_layers}",
        "lora_r": str(m.lora_r),
        "lora_alpha": str(m.lora_alpha),
        "target_modules": ",".join(m.target_modules),
        "load": "LocalLM.with_lora(...) with these settings, then copy these tensors into its parameters",
    }


def save_eval(tofu_eval: dict[str, Any], folder: Path) -> None:
    """``TOFU_EVAL.json`` and its ``TOFU_SUMMARY.json`` in ``folder``."""
    save_json(tofu_eval, folder / "TOFU_EVAL.json")
    save_json(summary(tofu_eval), folder / "TOFU_SUMMARY.json")


@dataclass
class CurveProbe:
    """An unlearning run's curve: the forget QAs' mean answer probability and exact match, and the evaluated
    retain QAs' exact match, read from ``tokens`` (the forget pairs first, ``n_forget`` of them), each point
    logged under the method and seed."""

    session: Any
    tokens: Any
    n_forget: int
    batch_size: int
    method: str
    log_metrics: Callable[..., None]

    def values(self) -> tuple[float, float, float]:
        """(forget probability, forget exact match, retain exact match) of the session's model now."""
        from components.llm import scores_and_greedy_hits

        scores, hits = scores_and_greedy_hits(self.session.model, self.tokens, self.batch_size)
        exact = (hits == scores.n_tokens).float().numpy()
        prob = np.exp(scores.logp_mean.numpy())
        n = self.n_forget
        return float(prob[:n].mean()), float(exact[:n].mean()), float(exact[n:].mean())

    def point(
        self, step: int, loss: float, forget_prob: float, forget_em: float, retain_em: float, seed: int
    ) -> dict[str, Any]:
        """Log one point of the curve and return it as a table row."""
        self.log_metrics(
            {
                f"unlearn/{self.method}/seed{seed}/forget_prob": forget_prob,
                f"unlearn/{self.method}/seed{seed}/forget_em": forget_em,
                f"unlearn/{self.method}/seed{seed}/retain_em": retain_em,
            },
            step=step,
        )
        return {
            "method": self.method,
            "seed": seed,
            "step": step,
            "loss": loss,
            "forget_prob": forget_prob,
            "forget_em": forget_em,
            "retain_em": retain_em,
        }
