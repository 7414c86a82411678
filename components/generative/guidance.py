"""Training-free guidance of a pretrained flow toward a reward (OC-Flow, arXiv 2410.18070, and baselines).

A pretrained velocity ``f(x, t)`` gives the controlled ODE ``dx/dt = f(x, t) + u_t`` discretised on
the uniform grid ``t_k = k h``, ``h = 1 / N``:

    Euclidean:  x_{k+1} = x_k + h (f(x_k, t_k) + u_k)
    SO(3):      R_{k+1} = R_k exp(h (f(R_k, t_k) + u_k))        (controls in so(3), through exp)

The optimal-control objective (the paper's eq. for J, summed over the batch) is

    J(u) = L(x_N) + (gamma / 2) sum_k h ||u_k||^2,     L = -reward.

Costates by the method of successive approximations (Alg. 1): ``lambda_N = grad L(x_N)`` and
``lambda_k = (dx_{k+1}/dx_k)^T lambda_{k+1}`` by one vector-Jacobian product per step; the same VJP
gives ``g_k = dL/du_k`` (``= h lambda_{k+1}`` in Euclidean space). Every method below has the signature
``(field, x0, reward, cfg) -> GuidanceResult`` and lives in :data:`GUIDANCE`:

    unguided:  u = 0, x0 fixed (plain sampling)
    dflow:     D-Flow (Ben-Hamu et al. 2024): optimise the source only, x0 <- x0 - eta grad_{x0} L
               (through the state's own step map, so an SO(3) source stays a rotation), keeping each
               sample's best source seen (the official ``dflow_opt``)
    flowgrad:  FlowGrad (Liu et al. 2023): controls, plain gradient steps through the solver by autograd,
               u_k <- u_k - eta g_k / h  (no running cost)
    ocflow:    OC-Flow, with one of two updates (``GuidanceConfig.update``):
               "alg1"      Alg. 1: costates by the backward VJP recursion, weight-decayed update
                           u_k <- (1 - gamma) u_k - eta g_k / h     (beta = 1 - gamma; gamma = 0 is FlowGrad)
               "official"  the official code's default ``oc``: plain gradient steps on J over the controls
                           *and* a shift delta of the source, x0 + delta (an extra slot with no running cost),
                           each sample's whole gradient clipped to norm ``clip``:
                           (delta, u) <- (delta, u) - eta clip(dJ/d delta, dJ/du),  dJ/du_k = g_k + gamma h u_k

``g_k / h`` is ``lambda_{k+1}`` in Euclidean space and the costate pulled back to so(3) on SO(3).
``GuidanceConfig.clip`` (the official code's ``max_grad_norm``) bounds the norm of each sample's update
direction in every method: D-Flow's grad_{x0} L, FlowGrad's and Alg. 1's (g_k / h)_k, the official (dJ/d delta, dJ/du).
Model evaluations are counted as NFE: one per forward step and one per VJP through a step.

Rewards of the toy tasks (``L = -reward``) and the closeness of guided samples to the data:

    point_reward(c):         -||x - c||^2                       (a target point)
    logistic_reward(w, b):   log sigmoid(w . x + b)             (log p(class | x) of a logistic classifier)
    rotation_reward(R*):     -d(R*, R) = -angle(R*^T R)         (geodesic distance to a target rotation)
    nearest_distance(x, D):  min_{d in D} ||x - d||              (distance to the nearest training point)
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor

from components.generative.samplers import SampleResult, sample
from components.generative.so3 import euler_step, geodesic_distance, sample_so3

__all__ = [
    "DYNAMICS",
    "GUIDANCE",
    "Dynamics",
    "Field",
    "GuidanceConfig",
    "GuidanceResult",
    "Reward",
    "control_energy",
    "controlled_field",
    "costates",
    "guide",
    "logistic_reward",
    "nearest_distance",
    "UPDATES",
    "clip_per_sample",
    "objective",
    "oc_gradient",
    "ocflow_official",
    "point_reward",
    "rollout",
    "rotation_reward",
    "source_gradient",
]

#: ``field(x [B, ...], t [B]) -> v``: a velocity in the state's tangent coordinates.
Field = Callable[[Tensor, Tensor], Tensor]
#: ``reward(x [B, ...]) -> [B]``: per-sample reward of terminal states (higher is better).
Reward = Callable[[Tensor], Tensor]


@dataclass(frozen=True)
class Dynamics:
    """A state space: one step along a tangent velocity, the tangent shape, and the sampler of a rollout.

    Attributes:
        step: ``(x, v, h) -> x_next``.
        tangent: ``x -> zeros`` of the tangent coordinates (controls have this shape per step).
        rollout: ``(field, x0, n_steps) -> SampleResult`` with the trajectory (a shared sampler).
    """

    step: Callable[[Tensor, Tensor, float], Tensor]
    tangent: Callable[[Tensor], Tensor]
    rollout: Callable[[Field, Tensor, int], SampleResult]


DYNAMICS: dict[str, Dynamics] = {
    "euclidean": Dynamics(
        step=lambda x, v, h: x + h * v,
        tangent=torch.zeros_like,
        rollout=lambda f, x0, n: sample(f, x0, n, "euler", return_trajectory=True),
    ),
    "so3": Dynamics(
        step=euler_step,
        tangent=lambda r: r.new_zeros(*r.shape[:-2], 3),
        rollout=lambda f, r0, n: sample_so3(f, r0, n, return_trajectory=True),
    ),
}


#: OC-Flow's update rules (``GuidanceConfig.update``).
UPDATES = ("alg1", "official")


@dataclass(frozen=True)
class GuidanceConfig:
    """Settings shared by all guidance methods.

    Attributes:
        n_steps: Euler steps N of the rollout (brief: 20; official molecule code: 50).
        iterations: optimisation iterations (brief: 10; PepFlow SO(3): 20).
        lr: eta, the step on the costate (official code: SGD lr 1).
        gamma: running-cost weight (official: 0.01); with ``update="alg1"`` OC-Flow decays controls by
            beta = 1 - gamma per iteration (so gamma <= 1), with "official" by 1 - eta gamma h.
        dynamics: key of :data:`DYNAMICS` ("euclidean" or "so3").
        update: OC-Flow's update, "alg1" or "official" (see the module docstring).
        clip: largest norm of one sample's update direction (official ``max_grad_norm``: 10); None: no clip.
    """

    n_steps: int = 20
    iterations: int = 10
    lr: float = 0.1
    gamma: float = 0.0
    dynamics: str = "euclidean"
    update: str = "alg1"
    clip: float | None = None

    def __post_init__(self) -> None:
        if self.n_steps < 1 or self.iterations < 0:
            raise ValueError(f"GuidanceConfig needs n_steps >= 1 and iterations >= 0, got {self}")
        if not self.lr > 0 or not self.gamma >= 0 or (self.update == "alg1" and self.gamma > 1):
            raise ValueError(f"GuidanceConfig needs lr > 0 and gamma >= 0 (<= 1 for update 'alg1'), got {self}")
        if self.dynamics not in DYNAMICS:
            raise ValueError(f"unknown dynamics {self.dynamics!r}; expected one of {sorted(DYNAMICS)}")
        if self.update not in UPDATES:
            raise ValueError(f"unknown OC-Flow update {self.update!r}; expected one of {UPDATES}")
        if self.clip is not None and not self.clip > 0:
            raise ValueError(f"GuidanceConfig needs clip > 0 or None, got {self.clip}")

    @property
    def h(self) -> float:
        return 1.0 / self.n_steps


@dataclass(frozen=True)
class GuidanceResult:
    """Output of a guidance method.

    Attributes:
        x: ``[B, ...]`` terminal states of the final rollout.
        x0: ``[B, ...]`` source states used (moved by D-Flow and the official OC-Flow, else the input).
        controls: ``[N, B, *tangent]`` final controls (zeros for unguided and D-Flow).
        trajectory: ``[N + 1, B, ...]`` states of the final rollout.
        nfe: model evaluations (forward steps + VJPs through steps).
        seconds: wall-clock time of the method.
        reward_history: mean reward of each iterate's rollout, the final one last.
    """

    x: Tensor
    x0: Tensor
    controls: Tensor
    trajectory: Tensor
    nfe: int
    seconds: float
    reward_history: list[float] = field(default_factory=list)


def controlled_field(f: Field, controls: Tensor, n_steps: int) -> Field:
    """``(x, t_k) -> f(x, t_k) + u_k`` on the grid ``t_k = k / n_steps`` (k read back from t)."""

    def controlled(x: Tensor, t: Tensor) -> Tensor:
        k = min(max(round(float(t[0]) * n_steps), 0), n_steps - 1)
        return f(x, t) + controls[k]

    return controlled


def rollout(f: Field, x0: Tensor, controls: Tensor | None, cfg: GuidanceConfig) -> SampleResult:
    """The controlled Euler rollout of :class:`GuidanceConfig`'s dynamics (gradients flow through it)."""
    dyn = DYNAMICS[cfg.dynamics]
    return dyn.rollout(f if controls is None else controlled_field(f, controls, cfg.n_steps), x0, cfg.n_steps)


def objective(f: Field, x0: Tensor, controls: Tensor, reward: Reward, cfg: GuidanceConfig) -> Tensor:
    """``J = -sum_b reward(x_N) + (gamma / 2) sum_k h ||u_k||^2`` (scalar)."""
    x_n = rollout(f, x0, controls, cfg).x
    return -reward(x_n).sum() + 0.5 * cfg.gamma * cfg.h * controls.pow(2).sum()


def costates(
    f: Field, trajectory: Tensor, controls: Tensor, reward: Reward, cfg: GuidanceConfig
) -> tuple[Tensor, Tensor]:
    """Backward costate recursion of OC-Flow (method of successive approximations).

    Args:
        trajectory: ``[N + 1, B, ...]`` states of the rollout under ``controls``.
        controls: ``[N, B, *tangent]``.

    Returns:
        ``(lambdas [N + 1, B, ...], grads [N, B, *tangent])`` with ``lambda_N = grad L(x_N)``,
        ``lambda_k = (dx_{k+1}/dx_k)^T lambda_{k+1}`` and ``grads_k = dL/du_k``.
    """
    dyn, h, n = DYNAMICS[cfg.dynamics], cfg.h, cfg.n_steps
    with torch.enable_grad():
        x_n = trajectory[n].detach().requires_grad_(True)
        lam = torch.autograd.grad(-reward(x_n).sum(), x_n)[0]
        lams, grads = [lam], []
        for k in reversed(range(n)):
            x = trajectory[k].detach().requires_grad_(True)
            u = controls[k].detach().requires_grad_(True)
            t = torch.full((x.shape[0],), k * h, dtype=x.dtype, device=x.device)
            lam, g = torch.autograd.grad(dyn.step(x, f(x, t) + u, h), (x, u), lam)
            lams.append(lam)
            grads.append(g)
    return torch.stack(lams[::-1]), torch.stack(grads[::-1])


def oc_gradient(f: Field, x0: Tensor, controls: Tensor, reward: Reward, cfg: GuidanceConfig) -> Tensor:
    """``dJ/du_k = g_k + gamma h u_k`` from the costates (the gradient OC-Flow's update follows)."""
    with torch.no_grad():
        traj = rollout(f, x0, controls, cfg).trajectory
    _, grads = costates(f, traj, controls, reward, cfg)
    return grads + cfg.gamma * cfg.h * controls


def control_energy(controls: Tensor, h: float) -> Tensor:
    """``sum_k h ||u_k||^2`` per sample: ``[N, B, ...]`` -> ``[B]``."""
    return h * controls.pow(2).flatten(2).sum(-1).sum(0)


def clip_per_sample(grads: list[Tensor], max_norm: float | None, batch_dims: list[int]) -> list[Tensor]:
    """Scale each sample's gradient, all tensors together, to norm at most ``max_norm`` (None: unchanged).

    ``batch_dims[i]`` is the batch axis of ``grads[i]``; a sample's norm is taken over every other axis of
    every tensor (the official code clips the whole gradient of one molecule with ``clip_grad_norm_``).
    """
    if max_norm is None:
        return grads
    moved = [g.movedim(d, 0) for g, d in zip(grads, batch_dims)]
    sq = sum(m.reshape(m.shape[0], -1).pow(2).sum(1) for m in moved)
    scale = (max_norm / sq.sqrt().clamp_min(1e-12)).clamp(max=1.0)
    return [(m * scale.view(-1, *[1] * (m.ndim - 1))).movedim(0, d) for m, d in zip(moved, batch_dims)]


def _zero_controls(x0: Tensor, cfg: GuidanceConfig) -> Tensor:
    tangent = DYNAMICS[cfg.dynamics].tangent(x0)
    return tangent.expand(cfg.n_steps, *tangent.shape).clone()


def _mean_reward(reward: Reward, x: Tensor) -> float:
    with torch.no_grad():
        return float(reward(x).mean())


def _finish(
    f: Field,
    x0: Tensor,
    controls: Tensor,
    reward: Reward,
    cfg: GuidanceConfig,
    nfe: int,
    started: float,
    history: list[float],
) -> GuidanceResult:
    with torch.no_grad():
        res = rollout(f, x0, controls, cfg)
    history = history + [_mean_reward(reward, res.x)]
    return GuidanceResult(
        x=res.x,
        x0=x0,
        controls=controls,
        trajectory=res.trajectory,
        nfe=nfe + res.nfe,
        seconds=time.perf_counter() - started,
        reward_history=history,
    )


def unguided(f: Field, x0: Tensor, reward: Reward, cfg: GuidanceConfig) -> GuidanceResult:
    """Plain sampling of the pretrained flow."""
    started = time.perf_counter()
    return _finish(f, x0, _zero_controls(x0, cfg), reward, cfg, 0, started, [])


def dflow(f: Field, x0: Tensor, reward: Reward, cfg: GuidanceConfig) -> GuidanceResult:
    """D-Flow: gradient steps on the source, ``x0 <- step(x0, -eta grad_delta L, 1)`` (``delta`` a tangent shift).

    As the official ``dflow_opt``, it keeps the best source seen: per sample, the iterate (the final one included)
    whose rollout gave the highest reward."""
    started = time.perf_counter()
    dyn = DYNAMICS[cfg.dynamics]
    history, nfe, best_x0, best = [], 0, x0, None
    for _ in range(cfg.iterations):
        delta = dyn.tangent(x0).requires_grad_(True)
        with torch.enable_grad():
            res = rollout(f, dyn.step(x0, delta, 1.0), None, cfg)
            rewards = reward(res.x)
            grad = torch.autograd.grad(-rewards.sum(), delta)[0]
        history.append(float(rewards.detach().mean()))
        nfe += 2 * res.nfe  # forward rollout + one VJP per step
        best_x0, best = _keep_best(best_x0, best, x0, rewards.detach())
        (grad,) = clip_per_sample([grad], cfg.clip, [0])
        x0 = dyn.step(x0, -cfg.lr * grad, 1.0).detach()
    if cfg.iterations:
        with torch.no_grad():
            res = rollout(f, x0, None, cfg)
        nfe += res.nfe
        best_x0, _ = _keep_best(best_x0, best, x0, reward(res.x))
    return _finish(f, best_x0, _zero_controls(best_x0, cfg), reward, cfg, nfe, started, history)


def _keep_best(best_x0: Tensor, best: Tensor | None, x0: Tensor, rewards: Tensor) -> tuple[Tensor, Tensor]:
    """Per sample, the source with the higher reward: ``(sources, their rewards)``."""
    if best is None:
        return x0.clone(), rewards.clone()
    better = rewards > best
    mask = better.view(-1, *[1] * (x0.ndim - 1))
    return torch.where(mask, x0, best_x0), torch.where(better, rewards, best)


def flowgrad(f: Field, x0: Tensor, reward: Reward, cfg: GuidanceConfig) -> GuidanceResult:
    """FlowGrad: controls updated by plain gradient steps, gradients by autograd through the solver."""
    started = time.perf_counter()
    controls = _zero_controls(x0, cfg)
    history, nfe = [], 0
    for _ in range(cfg.iterations):
        u = controls.detach().requires_grad_(True)
        with torch.enable_grad():
            res = rollout(f, x0, u, cfg)
            rewards = reward(res.x)
            grad = torch.autograd.grad(-rewards.sum(), u)[0]
        history.append(float(rewards.detach().mean()))
        nfe += 2 * res.nfe
        (step,) = clip_per_sample([grad / cfg.h], cfg.clip, [1])
        controls = (controls - cfg.lr * step).detach()
    return _finish(f, x0, controls, reward, cfg, nfe, started, history)


def ocflow(f: Field, x0: Tensor, reward: Reward, cfg: GuidanceConfig) -> GuidanceResult:
    """OC-Flow: costates by the backward VJP recursion, then the update ``cfg.update`` (module docstring)."""
    if cfg.update == "official":
        return ocflow_official(f, x0, reward, cfg)
    started = time.perf_counter()
    controls = _zero_controls(x0, cfg)
    history, nfe = [], 0
    for _ in range(cfg.iterations):
        with torch.no_grad():
            res = rollout(f, x0, controls, cfg)
        history.append(_mean_reward(reward, res.x))
        _, grads = costates(f, res.trajectory, controls, reward, cfg)
        nfe += 2 * res.nfe
        (step,) = clip_per_sample([grads / cfg.h], cfg.clip, [1])
        controls = ((1 - cfg.gamma) * controls - cfg.lr * step).detach()
    return _finish(f, x0, controls, reward, cfg, nfe, started, history)


def source_gradient(f: Field, x0: Tensor, delta: Tensor, lam0: Tensor, cfg: GuidanceConfig) -> Tensor:
    """``dL/d delta`` for the source ``step(x0, delta, 1)`` from the first costate ``lambda_0 = dL/dx_0``."""
    with torch.enable_grad():
        d = delta.detach().requires_grad_(True)
        return torch.autograd.grad(DYNAMICS[cfg.dynamics].step(x0, d, 1.0), d, lam0)[0]


def ocflow_official(f: Field, x0: Tensor, reward: Reward, cfg: GuidanceConfig) -> GuidanceResult:
    """OC-Flow as the official code's default ``oc``: SGD on ``J`` over the controls and a source shift,
    each sample's gradient ``(dJ/d delta, dJ/du)`` clipped to norm ``cfg.clip``."""
    started = time.perf_counter()
    dyn = DYNAMICS[cfg.dynamics]
    controls, delta = _zero_controls(x0, cfg), dyn.tangent(x0)
    history, nfe = [], 0
    for _ in range(cfg.iterations):
        source = dyn.step(x0, delta, 1.0)
        with torch.no_grad():
            res = rollout(f, source, controls, cfg)
        history.append(_mean_reward(reward, res.x))
        lams, grads = costates(f, res.trajectory, controls, reward, cfg)
        nfe += 2 * res.nfe
        g_delta, g_u = clip_per_sample(
            [source_gradient(f, x0, delta, lams[0], cfg), grads + cfg.gamma * cfg.h * controls], cfg.clip, [0, 1]
        )
        delta, controls = (delta - cfg.lr * g_delta).detach(), (controls - cfg.lr * g_u).detach()
    return _finish(f, dyn.step(x0, delta, 1.0), controls, reward, cfg, nfe, started, history)


#: name -> ``(field, x0, reward, cfg) -> GuidanceResult``.
GUIDANCE: dict[str, Callable[[Field, Tensor, Reward, GuidanceConfig], GuidanceResult]] = {
    "unguided": unguided,
    "dflow": dflow,
    "flowgrad": flowgrad,
    "ocflow": ocflow,
}


def guide(method: str, f: Field, x0: Tensor, reward: Reward, cfg: GuidanceConfig) -> GuidanceResult:
    """Run the guidance method ``method`` (a key of :data:`GUIDANCE`)."""
    try:
        run = GUIDANCE[method]
    except KeyError:
        raise ValueError(f"unknown guidance method {method!r}; expected one of {sorted(GUIDANCE)}") from None
    return run(f, x0, reward, cfg)


# --------------------------------------------------------------------------------------------------
# rewards and the closeness of guided samples to the data
# --------------------------------------------------------------------------------------------------
def point_reward(c: Tensor) -> Reward:
    """``-||x - c||^2``: pulls samples ``x [B, D]`` toward the point ``c [D]``."""
    return lambda x: -(x - c).pow(2).sum(-1)


def logistic_reward(w: Tensor, b: Tensor) -> Reward:
    """``log sigmoid(x . w + b)``: the log-probability of the positive class of a logistic classifier."""
    return lambda x: F.logsigmoid(x @ w + b)


def rotation_reward(target: Tensor) -> Reward:
    """``-d(R*, R)`` in radians for ``R [B, 3, 3]``; defined (and differentiable) off SO(3) too."""
    return lambda r: -geodesic_distance(target.expand_as(r), r)


def nearest_distance(x: Tensor, data: Tensor) -> Tensor:
    """Euclidean distance of each sample ``x [B, D]`` to its nearest point of ``data [M, D]``: ``[B]``."""
    return torch.cdist(x.float(), data).min(1).values
