"""STAR's invariants measured on a network and a buffer minibatch (what a report shows as checks).

For one call of :func:`components.continual.star.star_term` with the given config:

* ``norm_ratio[l] = ||delta_l|| / (gamma ||theta_l||)`` per perturbed weight (1 for one ascent step, <= 1 for
  several), and ``max_norm_error = max_l |norm_ratio[l] - 1|`` (one step) or the largest excess over 1;
* ``biases_untouched``: the perturbation covers exactly the weights with more than one dimension, and no
  bias or other 1-D parameter;
* ``bit_exact``: every tensor of the state dict is bit-for-bit the same after the term was computed and
  backpropagated;
* ``grad_nonzero``: with ``mask >= 2`` samples, every weight's gradient from the term is non-zero; and
  ``skips_below_two``: with the labels changed so that exactly one sample is still classified correctly, the
  term is skipped (no loss, no perturbation);
* ``grad_rel_diff``: the largest relative difference between the term's gradient and the gradient computed
  the official way (``delta`` added into a copy's weights in place, the KL backpropagated there).
"""

from __future__ import annotations

import copy
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from components.continual.star import StarConfig, masked_kl, perturbed_names, star_term

__all__ = ["measure_invariants"]


def measure_invariants(
    model: nn.Module, x: torch.Tensor, y: torch.Tensor, cfg: StarConfig, seed: int = 0
) -> dict[str, Any]:
    """The invariants of one STAR call on ``model`` and the minibatch ``(x, y)`` (see the module docstring).
    ``model`` is left as it was (its gradients are cleared)."""
    model.zero_grad(set_to_none=True)
    before = {k: v.detach().clone() for k, v in model.state_dict().items()}
    params = dict(model.named_parameters())
    term = star_term(model, x, y, cfg, torch.Generator().manual_seed(seed))
    mask = int(term.mask.sum())
    out: dict[str, Any] = {
        "mask": mask,
        "batch": int(x.shape[0]),
        "gamma": cfg.gamma,
        "steps": cfg.steps,
        "init": cfg.init,
    }
    if term.loss is None:
        return {**out, "applied": False}
    term.loss.backward()
    ratios = {name: float(d.norm() / (cfg.gamma * params[name].detach().norm())) for name, d in term.delta.items()}
    errors = [abs(r - 1.0) if cfg.steps == 1 else max(r - 1.0, 0.0) for r in ratios.values()]
    grads = {name: float(p.grad.norm()) if p.grad is not None else 0.0 for name, p in params.items()}
    one_d = sorted(name for name, p in params.items() if p.dim() <= 1)
    untouched = sorted(term.delta) == sorted(perturbed_names(model)) and not set(one_d) & set(term.delta)
    out.update(
        applied=True,
        kl=term.kl,
        norm_ratio=ratios,
        max_norm_error=max(errors),
        perturbed=sorted(term.delta),
        unperturbed=one_d,
        biases_untouched=untouched,
        bit_exact=all(torch.equal(v, before[k]) for k, v in model.state_dict().items()),
        grad_norms=grads,
        grad_nonzero=all(grads[name] > 0 for name in perturbed_names(model)),
    )

    shifted = copy.deepcopy(model)
    shifted.zero_grad(set_to_none=True)
    with torch.no_grad():
        p0 = F.softmax(model(x), dim=1)
        for name, p in shifted.named_parameters():
            if name in term.delta:
                p.add_(term.delta[name])
    (cfg.lam * masked_kl(F.log_softmax(shifted(x), dim=1), p0, term.mask)).backward()
    out["grad_rel_diff"] = max(
        float((p.grad - q.grad).norm() / (q.grad.norm() + 1e-30))
        for (_, p), (_, q) in zip(model.named_parameters(), shifted.named_parameters())
    )
    model.zero_grad(set_to_none=True)

    with torch.no_grad():
        predicted = model(x).argmax(1)
    one_right = (predicted + 1) % p0.shape[1]
    one_right[0] = predicted[0]
    skipped = star_term(model, x, one_right, cfg, torch.Generator().manual_seed(seed))
    out["skips_below_two"] = skipped.loss is None and not skipped.delta and int(skipped.mask.sum()) == 1
    return out
