"""Style-conditioned behavioural cloning, plain and PMI-weighted, as same-signature trainers on the one loop.

A policy ``pi_theta(a | s, z)`` is an MLP over ``[state features; one-hot z]``: logits over discrete actions, or
for continuous actions (``action_dim > 0``) the mean of a Gaussian with a learned state-independent
log-std. Conditional BC maximises
``E_D[log pi(a | s, z)]``. BC-PMI maximises ``E_D[w(s, a, z) log pi(a | s, z)]`` with

    w = exp(PMI(s, a; z)) = p(z | s, a) / p(z),  normalised to mean 1 over the batch, clipped to [0, w_max],
    then mixed: (1 - alpha) + alpha * w        (alpha = 0 is conditional BC)

computed from a precomputed PMI per sample and never differentiated. Both trainers share the signature of
:data:`TRAINERS` and train through :func:`components.training.fit`.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor, nn

from components.io import load_tensors, safetensors_metadata
from components.training import TrainConfig, TrainResult, fit, random_batches


@dataclass(frozen=True)
class PolicyConfig:
    """Shape of :class:`StylePolicy`: ``out = W2 relu(W1 [s; onehot(z)] + b1) + b2``, ``n_actions`` logits, or
    with ``action_dim > 0`` the ``action_dim`` means of a Gaussian (plus a learned ``log_std [action_dim]``)."""

    state_dim: int = 2
    n_styles: int = 3
    n_actions: int = 5
    hidden: int = 64
    action_dim: int = 0

    def __post_init__(self) -> None:
        for name in ("state_dim", "n_styles", "n_actions", "hidden"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ValueError(f"PolicyConfig.{name} must be an int >= 1, got {getattr(self, name)!r}")
        if not isinstance(self.action_dim, int) or self.action_dim < 0:
            raise ValueError(f"PolicyConfig.action_dim must be an int >= 0, got {self.action_dim!r}")

    @property
    def continuous(self) -> bool:
        return self.action_dim > 0


class StylePolicy(nn.Module):
    """``forward(states [B, state_dim] float, styles [B] long) -> logits [B, n_actions]`` (or Gaussian means
    ``[B, action_dim]``, with the parameter ``log_std [action_dim]``, for continuous actions)."""

    def __init__(self, cfg: PolicyConfig, seed: int | None = None) -> None:
        super().__init__()
        self.cfg = cfg
        generator_state = torch.random.get_rng_state()
        if seed is not None:
            torch.manual_seed(seed)
        out = cfg.action_dim if cfg.continuous else cfg.n_actions
        self.net = nn.Sequential(
            nn.Linear(cfg.state_dim + cfg.n_styles, cfg.hidden), nn.ReLU(), nn.Linear(cfg.hidden, out)
        )
        if cfg.continuous:
            self.log_std = nn.Parameter(torch.full((cfg.action_dim,), -1.0))
        torch.random.set_rng_state(generator_state)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> StylePolicy:
        """A policy written by ``components.io.save_model`` (its config from the file's metadata)."""
        config = json.loads(safetensors_metadata(path)["model.config"])
        policy = cls(PolicyConfig(**config))
        policy.load_state_dict(load_tensors(path))
        return policy.eval()

    def forward(self, states: Tensor, styles: Tensor) -> Tensor:
        onehot = nn.functional.one_hot(styles.long(), self.cfg.n_styles).to(states.dtype)
        return self.net(torch.cat([states, onehot], dim=-1))


@dataclass(frozen=True)
class BCConfig:
    """Training settings shared by both trainers; ``alpha`` and ``max_weight`` only matter to BC-PMI."""

    steps: int = 2000
    batch_size: int = 256
    lr: float = 1e-3
    hidden: int = 64
    alpha: float = 1.0
    max_weight: float = 10.0

    def __post_init__(self) -> None:
        if not 0.0 <= self.alpha <= 1.0:
            raise ValueError(f"BCConfig.alpha must be in [0, 1], got {self.alpha!r}")
        if not self.max_weight >= 1.0:
            raise ValueError(f"BCConfig.max_weight must be >= 1, got {self.max_weight!r}")


@dataclass(frozen=True)
class Demonstrations:
    """Training tuples: ``states [N, d]`` float features, ``actions [N]`` (long, discrete) or ``[N, d_a]``
    (float, continuous), ``styles [N]``, ``pmi [N]`` (PMI of each tuple's own style; zeros when unknown)."""

    states: Tensor
    actions: Tensor
    styles: Tensor
    pmi: Tensor


def pmi_weights(pmi: Tensor, alpha: float = 1.0, max_weight: float = 10.0) -> Tensor:
    """BC-PMI's per-sample weights of one batch (detached): ``exp(pmi)`` scaled to mean 1, clipped to
    ``[0, max_weight]``, then ``(1 - alpha) + alpha * w``."""
    with torch.no_grad():
        w = torch.exp(pmi - pmi.max())  # the scale cancels in the normalisation
        w = (w / w.mean()).clamp(0.0, max_weight)
        return (1.0 - alpha) + alpha * w


def action_nll(policy: StylePolicy, states: Tensor, actions: Tensor, styles: Tensor) -> Tensor:
    """``-log pi(a | s, z)`` per sample ``[B]``: cross-entropy of the logits, or the Gaussian NLL (summed over
    action dimensions) of continuous actions."""
    out = policy(states, styles)
    if not policy.cfg.continuous:
        return nn.functional.cross_entropy(out, actions, reduction="none")
    log_std = policy.log_std.expand_as(out)
    return (0.5 * ((actions - out) / log_std.exp()) ** 2 + log_std + 0.5 * math.log(2 * math.pi)).sum(1)


def _weighted_nll(weigh: Callable[[Tensor], Tensor]) -> Callable[[nn.Module, tuple[Tensor, ...]], tuple[Tensor, dict]]:
    def loss(model: nn.Module, batch: tuple[Tensor, ...]) -> tuple[Tensor, dict[str, Tensor]]:
        states, actions, styles, pmi = batch
        nll = action_nll(model, states, actions, styles)
        w = weigh(pmi)
        return (w * nll).mean(), {"nll": nll.mean().detach(), "max_weight": w.max()}

    return loss


def _train(
    weigh: Callable[[Tensor], Tensor],
    data: Demonstrations,
    cfg: BCConfig,
    *,
    seed: int,
    desc: str,
    callback: Callable[[int, dict[str, float]], None] | None,
    progress: bool,
    n_styles: int | None = None,
) -> tuple[StylePolicy, TrainResult]:
    action_dim = int(data.actions.shape[1]) if data.actions.is_floating_point() else 0
    policy = StylePolicy(
        PolicyConfig(
            state_dim=data.states.shape[1],
            n_styles=n_styles or int(data.styles.max()) + 1,
            hidden=cfg.hidden,
            action_dim=action_dim,
        ),
        seed=seed,
    )
    result = fit(
        policy,
        _weighted_nll(weigh),
        random_batches(data.states, data.actions, data.styles, data.pmi, size=cfg.batch_size),
        TrainConfig(
            steps=cfg.steps,
            lr=cfg.lr,
            seed=seed,
            device="cpu",
            log_every=max(10, cfg.steps // 20),
            progress=progress,
            desc=desc,
        ),
        callback=callback,
    )
    return policy.eval(), result


def conditional_bc(
    data: Demonstrations,
    cfg: BCConfig,
    *,
    seed: int,
    desc: str = "bc",
    callback: Callable[[int, dict[str, float]], None] | None = None,
    progress: bool = False,
    n_styles: int | None = None,
) -> tuple[StylePolicy, TrainResult]:
    """Vanilla style-conditioned BC: every tuple weighs 1 (``n_styles``: default, the largest style + 1)."""
    return _train(
        torch.ones_like, data, cfg, seed=seed, desc=desc, callback=callback, progress=progress, n_styles=n_styles
    )


def pmi_bc(
    data: Demonstrations,
    cfg: BCConfig,
    *,
    seed: int,
    desc: str = "bc_pmi",
    callback: Callable[[int, dict[str, float]], None] | None = None,
    progress: bool = False,
    n_styles: int | None = None,
) -> tuple[StylePolicy, TrainResult]:
    """BC-PMI: tuples weighted by :func:`pmi_weights` of their precomputed PMI."""
    return _train(
        lambda pmi: pmi_weights(pmi, cfg.alpha, cfg.max_weight),
        data,
        cfg,
        seed=seed,
        desc=desc,
        callback=callback,
        progress=progress,
        n_styles=n_styles,
    )


TRAINERS: dict[str, Callable[..., tuple[StylePolicy, TrainResult]]] = {"bc": conditional_bc, "bc_pmi": pmi_bc}


def sampling_policy(
    policy: StylePolicy, features: Callable[[np.ndarray], np.ndarray], generator: torch.Generator, greedy: bool = False
) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """``act(states, styles) -> actions`` for rollouts: samples ``pi(. | s, z)`` (or takes its most likely
    action: the argmax, or the Gaussian's mean)."""

    @torch.no_grad()
    def act(states: np.ndarray, styles: np.ndarray) -> np.ndarray:
        logits = policy(torch.from_numpy(features(states)), torch.from_numpy(np.asarray(styles)))
        if policy.cfg.continuous:
            if greedy:
                return logits.double().numpy()
            noise = torch.randn(logits.shape, generator=generator) * policy.log_std.exp()
            return (logits + noise).double().numpy()
        if greedy:
            return logits.argmax(1).numpy()
        return torch.multinomial(torch.softmax(logits, 1), 1, generator=generator).squeeze(1).numpy()

    return act
