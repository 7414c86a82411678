"""Hierarchical rectified flow (HRF, Zhang et al., ICLR 2025): flows nested in velocity space.

Rectified flow (RF) regresses the *mean* velocity ``E[x1 - x0 | x_t]``, so its ODE paths never cross and
the velocity it produces at a point is a single value. HRF models the whole *distribution* of
velocities at ``(x_t, t)`` by a second rectified flow in velocity space (and, at depth D, a flow for the
velocity of that flow, and so on). Following the official ``lowdim/hrfD.py``:

**Training (depth D).** Draw the data ``x1``, the source ``z_0 = x0`` and D - 1 further noise vectors
``z_1..z_{D-1}`` (all N(0, I)), and one time per level ``t_d ~ U(0, 1)``. The level states and the
common target are::

    s_d    = (1 - t_d) z_d + t_d (x1 - sum_{j<d} z_j)            d = 0..D-1
    target = x1 - sum_j z_j

and the network ``u(s [B, D, ...], t [B, D]) -> [B, ...]`` regresses the target with MSE. For D = 1 this is
RF (``s_0 = x_t``, target ``x1 - x0``). For D = 2 (HRF2): ``s_0 = x_t``, ``s_1 = v_tau = (1 - tau) v0 + tau
v1`` with ``v1 = x1 - x0`` and ``v0 = z_1``, and the target is the acceleration ``a = v1 - v0``.

**Sampling (nested Euler).** With step counts ``steps = [N_0, ..., N_{D-1}]``, level d integrates its
state over its own time in ``N_d`` uniform Euler steps; every step of level d < D - 1 first restarts
level d + 1 from fresh noise and integrates it to its time 1, and the value it ends at is the velocity
level d moves with::

    level D-1:  s_{D-1} <- s_{D-1} + h * u(s, t)                      (one network call)
    level d:    s_{d+1} <- N(0, I);  integrate level d + 1;  s_d <- s_d + h * s_{d+1}

so ``NFE = prod_d N_d`` (:class:`HierarchicalSampleResult.nfe` counts the calls actually made). For
D = 1 this is the Euler sampler of :func:`components.generative.samplers.sample`; for D = 2 with one
inner step and the ideal acceleration ``E[v1 | x_t] - v0`` it is RF's Euler update (the fresh ``v0``
cancels).

For D = 1 the network is called as a plain velocity model ``u(x [B, ...], t [B])``; for D > 1 as
``u(s [B, D, ...], t [B, D])``.

**Oracle.** For a 1-D Gaussian-mixture target and N(0, 1) source the velocity law at ``(x_t, t)`` is a
Gaussian mixture in closed form (:func:`gaussian_mixture_velocity_law`). Each level of the ideal hierarchy
is again RF from N(0, 1) to a Gaussian mixture, so the exact field of every depth follows
(:func:`exact_mixture_field`: the RF velocity, the HRF2 acceleration, ...): known answers for tests, the
"true law" against which sampled velocities are compared, and (:func:`mixture_field_model`) an ideal
"network" to sample with, whose quality curve is what a perfect fit would give.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from components.generative.flow_matching import flow_matching_loss
from components.generative.samplers import sample
from components.generative.time import sample_time

__all__ = [
    "HierarchicalModel",
    "HierarchicalSampleResult",
    "draw_velocities",
    "exact_mixture_field",
    "gaussian_mixture_velocity_law",
    "hierarchical_batch",
    "hierarchical_batch_loss",
    "hierarchical_loss",
    "hierarchical_states",
    "mixture_field_model",
    "mixture_velocity_law_samples",
    "sample_hierarchical",
    "sample_schedule",
    "sample_velocity",
]

#: ``u(states [B, D, ...], times [B, D]) -> [B, ...]`` (for D = 1: ``u(x [B, ...], t [B])``).
HierarchicalModel = Callable[[Tensor, Tensor], Tensor]


# --------------------------------------------------------------------------------------------------
# training
# --------------------------------------------------------------------------------------------------
def hierarchical_states(x0: Tensor, x1: Tensor, noise: Tensor, times: Tensor) -> tuple[Tensor, Tensor]:
    """Level states and the regression target of depth-D HRF (module docstring).

    Args:
        x0: ``[B, ...]`` source samples ``z_0``.
        x1: ``[B, ...]`` data samples.
        noise: ``[B, D-1, ...]`` the extra noise ``z_1..z_{D-1}`` (``[B, 0, ...]`` for RF).
        times: ``[B, D]`` level times in [0, 1].

    Returns:
        ``(states [B, D, ...], target [B, ...])`` with
        ``states[:, d] = (1 - t_d) z_d + t_d (x1 - sum_{j<d} z_j)`` and ``target = x1 - sum_j z_j``.
    """
    if x0.shape != x1.shape:
        raise ValueError(f"x0 and x1 shapes differ: {tuple(x0.shape)} vs {tuple(x1.shape)}")
    if noise.shape[0] != x0.shape[0] or noise.shape[2:] != x0.shape[1:]:
        raise ValueError(
            f"noise must be [B, D-1, ...] = [{x0.shape[0]}, D-1, {', '.join(map(str, x0.shape[1:]))}],"
            f" got {tuple(noise.shape)}"
        )
    z = torch.cat([x0.unsqueeze(1), noise], dim=1)  # [B, D, ...]
    depth = z.shape[1]
    if times.shape != (x0.shape[0], depth):
        raise ValueError(f"times must be [B, D] = [{x0.shape[0]}, {depth}], got {tuple(times.shape)}")
    before = torch.cumsum(z, dim=1) - z  # sum_{j<d} z_j
    t = times.to(x0.dtype).view(*times.shape, *([1] * (x0.ndim - 1)))
    states = (1 - t) * z + t * (x1.unsqueeze(1) - before)
    return states, x1 - z.sum(dim=1)


def hierarchical_loss(model: HierarchicalModel, x0: Tensor, x1: Tensor, noise: Tensor, times: Tensor) -> Tensor:
    """Mean squared error ``mean (u(states, times) - target)^2`` of depth-D HRF.

    Shapes as in :func:`hierarchical_states`; for D = 1 the model is called as ``u(x_t, t)``, which makes
    this exactly :func:`components.generative.flow_matching.flow_matching_loss` with the linear path.
    """
    states, target = hierarchical_states(x0, x1, noise, times)
    pred = model(states[:, 0], times[:, 0]) if states.shape[1] == 1 else model(states, times)
    if pred.shape != target.shape:
        raise ValueError(f"model returned shape {tuple(pred.shape)}, expected {tuple(target.shape)}")
    return (pred - target).pow(2).mean()


def hierarchical_batch(
    x1: Tensor, depth: int, generator: torch.Generator, source: Callable[[int, torch.Generator], Tensor] | None = None
) -> tuple[Tensor, ...]:
    """The random rest of one training batch for the data rows ``x1 [B, ...]``, drawn from ``generator``.

    Depth 1 (RF): ``(x0, x1, t [B])``; depth D > 1: ``(x0, x1, noise [B, D-1, ...], times [B, D])``; x0 is N(0, I)
    or ``source(B, generator)`` (the level-0 source, e.g. the 8 Gaussians of the official moons), the further
    noise N(0, I), the times U(0, 1) (drawn in that order). :func:`hierarchical_batch_loss` takes either.
    """
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
        raise ValueError(f"depth must be an int >= 1, got {depth!r}")
    batch = x1.shape[0]
    if source is None:
        x0 = torch.randn(x1.shape, generator=generator, dtype=x1.dtype)
    else:
        x0 = source(batch, generator).to(x1.dtype)
        if x0.shape != x1.shape:
            raise ValueError(f"source gave shape {tuple(x0.shape)}, expected {tuple(x1.shape)}")
    if depth == 1:
        return x0, x1, sample_time(batch, generator)
    noise = torch.randn((batch, depth - 1, *x1.shape[1:]), generator=generator, dtype=x1.dtype)
    return x0, x1, noise, sample_time(batch * depth, generator).view(batch, depth)


def hierarchical_batch_loss(model: HierarchicalModel, batch: tuple[Tensor, ...]) -> Tensor:
    """The loss to hand to ``fit`` for a :func:`hierarchical_batch`: the flow-matching loss for an RF batch
    ``(x0, x1, t)``, :func:`hierarchical_loss` for a deeper one."""
    if len(batch) == 3:
        return flow_matching_loss(model, *batch)
    if len(batch) != 4:
        raise ValueError(f"a hierarchical batch is (x0, x1, t) or (x0, x1, noise, times), got {len(batch)} tensors")
    return hierarchical_loss(model, *batch)


# --------------------------------------------------------------------------------------------------
# sampling
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class HierarchicalSampleResult:
    """Output of :func:`sample_hierarchical`.

    Attributes:
        x: ``[B, ...]`` level-0 state at t = 1 (the samples).
        nfe: network evaluations made (= ``prod(steps)``).
        trajectory: ``[N_0 + 1, B, ...]`` level-0 states on its time grid (x0 first), or None.
        velocities: ``[N_0, B, ...]`` the velocity each outer step moved with, or None.
    """

    x: Tensor
    nfe: int
    trajectory: Tensor | None
    velocities: Tensor | None


class _Nested:
    """Nested Euler integration of the D levels; counts network calls."""

    def __init__(self, model: HierarchicalModel, steps: Sequence[int], generator: torch.Generator | None) -> None:
        steps = list(steps)
        if not steps or any(not isinstance(n, int) or n < 1 for n in steps):
            raise ValueError(f"steps must be a non-empty list of ints >= 1, got {steps}")
        self.model, self.steps, self.generator, self.calls = model, steps, generator, 0

    def field(self, states: list[Tensor], times: list[float]) -> Tensor:
        self.calls += 1
        ref = states[0]
        t = torch.tensor(times, dtype=ref.dtype, device=ref.device).expand(ref.shape[0], len(times))
        if len(states) == 1:
            return self.model(states[0], t[:, 0].contiguous())
        return self.model(torch.stack(states, dim=1), t.contiguous())

    def noise(self, like: Tensor) -> Tensor:
        return torch.randn(like.shape, generator=self.generator, dtype=like.dtype, device=like.device)

    def integrate(
        self,
        level: int,
        states: list[Tensor],
        times: list[float],
        trajectory: list[Tensor] | None = None,
        velocities: list[Tensor] | None = None,
    ) -> Tensor:
        """Integrate ``states[level]`` over its time [0, 1]; returns its final value (states updated)."""
        n = self.steps[level]
        h = 1.0 / n
        for k in range(n):
            times[level] = k * h
            if level == len(self.steps) - 1:
                v = self.field(states, times)
            else:
                states[level + 1] = self.noise(states[level])
                times[level + 1] = 0.0
                v = self.integrate(level + 1, states, times)
            states[level] = states[level] + h * v
            if trajectory is not None:
                trajectory.append(states[level])
            if velocities is not None:
                velocities.append(v)
        return states[level]


def sample_hierarchical(
    model: HierarchicalModel,
    x0: Tensor,
    steps: Sequence[int],
    generator: torch.Generator | None = None,
    return_trajectory: bool = False,
) -> HierarchicalSampleResult:
    """Nested Euler sampling of a depth-D HRF from ``x0`` (module docstring).

    Args:
        model: the network, ``u(states [B, D, ...], times [B, D])`` (D = 1: ``u(x, t)``).
        x0: ``[B, ...]`` source samples (level 0 at t = 0).
        steps: ``[N_0, ..., N_{D-1}]`` Euler steps per level; its length is the depth D.
        generator: draws the fresh noise of the inner levels (reproducible sampling).
        return_trajectory: keep the level-0 states and the velocities of every outer step.

    Returns:
        :class:`HierarchicalSampleResult` with ``nfe = prod(steps)``.
    """
    nested = _Nested(model, steps, generator)
    depth = len(nested.steps)
    states = [x0] + [x0] * (depth - 1)  # inner levels are overwritten with noise before use
    times = [0.0] * depth
    trajectory = [x0] if return_trajectory else None
    velocities = [] if return_trajectory else None
    x = nested.integrate(0, states, times, trajectory, velocities)
    return HierarchicalSampleResult(
        x=x,
        nfe=nested.calls,
        trajectory=torch.stack(trajectory) if trajectory is not None else None,
        velocities=torch.stack(velocities) if velocities is not None else None,
    )


def sample_velocity(
    model: HierarchicalModel, x: Tensor, t: float, inner_steps: Sequence[int], generator: torch.Generator | None = None
) -> tuple[Tensor, int]:
    """Draw velocities from the model's velocity law at the points ``x`` and time ``t``.

    Integrates levels 1..D-1 (each from fresh noise) with level 0 held at ``x``, time ``t``: one sample per
    row of ``x`` (repeat a point to draw many velocities there).

    Args:
        model: a depth-D network (D = ``len(inner_steps) + 1`` >= 2).
        x: ``[B, ...]`` level-0 states.
        t: level-0 time.
        inner_steps: ``[N_1, ..., N_{D-1}]``.
        generator: draws the noise.

    Returns:
        ``(v [B, ...], nfe)`` with ``nfe = prod(inner_steps)``.
    """
    if not inner_steps:
        raise ValueError("inner_steps must name at least one inner level (a depth-1 model has one velocity)")
    nested = _Nested(model, [1, *inner_steps], generator)
    states = [x] + [nested.noise(x) for _ in inner_steps]
    times = [float(t)] + [0.0] * len(inner_steps)
    return nested.integrate(1, states, times), nested.calls


def sample_schedule(
    model: HierarchicalModel,
    x0: Tensor,
    steps: Sequence[int],
    generator: torch.Generator | None = None,
    return_trajectory: bool = False,
) -> HierarchicalSampleResult:
    """Sample with the schedule ``steps = [N_0, ..., N_{D-1}]`` (without gradients).

    D = 1 is RF with the shared Euler sampler (:func:`components.generative.samplers.sample`, no noise
    drawn); D > 1 the nested sampler :func:`sample_hierarchical`. Raises RuntimeError if the network was
    called other than ``prod(steps)`` times, so the NFE a result reports is the schedule's.
    """
    steps = list(steps)
    with torch.no_grad():
        if len(steps) == 1:
            flat = sample(model, x0, steps[0], "euler", return_trajectory=return_trajectory)
            result = HierarchicalSampleResult(x=flat.x, nfe=flat.nfe, trajectory=flat.trajectory, velocities=None)
        else:
            result = sample_hierarchical(model, x0, steps, generator, return_trajectory)
    if result.nfe != math.prod(steps):
        raise RuntimeError(f"schedule {steps} made {result.nfe} network calls, expected NFE = {math.prod(steps)}")
    return result


def draw_velocities(
    model: HierarchicalModel,
    x: Tensor,
    t: float,
    depth: int,
    inner_steps: int,
    generator: torch.Generator | None = None,
) -> Tensor:
    """The velocities a depth-``depth`` model moves with at the points ``x [B, ...]`` and time ``t``.

    RF (depth 1) gives its one velocity per point, ``model(x, t)``; a hierarchy draws one sample per row
    from its velocity law (:func:`sample_velocity`, ``inner_steps`` Euler steps on every inner level).
    No gradients.
    """
    with torch.no_grad():
        if depth == 1:
            return model(x, torch.full((x.shape[0],), float(t), dtype=x.dtype, device=x.device))
        v, _ = sample_velocity(model, x, t, [inner_steps] * (depth - 1), generator)
    return v


# --------------------------------------------------------------------------------------------------
# closed-form oracle for a 1-D Gaussian mixture (known answers)
# --------------------------------------------------------------------------------------------------
def gaussian_mixture_velocity_law(
    x: Tensor, t: Tensor | float, weights: Tensor, means: Tensor, variances: Tensor
) -> tuple[Tensor, Tensor, Tensor]:
    """Law of ``v = x1 - x0`` given ``x_t = x`` for ``x0 ~ N(0, 1)``, ``x1 ~ sum_k w_k N(m_k, s_k^2)``.

    Per component, ``(x_t, v)`` is jointly Gaussian with means ``(t m_k, m_k)``, variances
    ``V_k = (1-t)^2 + t^2 s_k^2`` and ``s_k^2 + 1``, covariance ``c_k = t s_k^2 - (1 - t)``, so::

        v | x_t = x  ~  sum_k w'_k N(m_k + c_k / V_k (x - t m_k),  s_k^2 + 1 - c_k^2 / V_k),
        w'_k ∝ w_k N(x; t m_k, V_k).

    Args:
        x: ``[B]`` points.
        t: time(s), a float or ``[B]``.
        weights, means, variances: ``[K]`` or ``[B, K]`` mixture parameters (weights sum to 1).

    Returns:
        ``(weights [B, K], means [B, K], variances [B, K])`` of the velocity law at each point.
    """
    x = x.reshape(-1, 1)
    t = torch.as_tensor(t, dtype=x.dtype, device=x.device).reshape(-1, 1)
    w, m, s2 = (torch.as_tensor(a, dtype=x.dtype, device=x.device) for a in (weights, means, variances))
    v_x = (1 - t) ** 2 + t**2 * s2
    cov = t * s2 - (1 - t)
    log_w = torch.log(w) - 0.5 * (x - t * m) ** 2 / v_x - 0.5 * torch.log(2 * math.pi * v_x)
    post_w = torch.softmax(log_w, dim=-1)
    post_m = m + cov / v_x * (x - t * m)
    post_var = (s2 + 1 - cov**2 / v_x).clamp_min(0.0)
    shape = torch.broadcast_shapes(post_w.shape, post_m.shape, post_var.shape)
    return post_w.expand(shape), post_m.expand(shape), post_var.expand(shape)


def exact_mixture_field(states: Tensor, times: Tensor, weights: Tensor, means: Tensor, variances: Tensor) -> Tensor:
    """The ideal depth-D HRF field of the 1-D mixture (D = 1: the ideal RF velocity ``E[x1 - x0 | x_t]``).

    Level d's target law, given the states of the levels above, is a Gaussian mixture, and level d + 1 is
    RF from N(0, 1) to that mixture, so applying :func:`gaussian_mixture_velocity_law` level after level
    gives the law of the last level's target; the field is its mean. For D = 2 this is the acceleration
    ``E[v1 - v0 | x_t, v_tau]``.

    Args:
        states: ``[B, D, 1]`` level states (D = 1: ``[B, 1]``, a plain velocity model's input).
        times: ``[B, D]`` level times (D = 1: ``[B]``).
        weights, means, variances: ``[K]`` parameters of the target mixture.

    Returns:
        ``[B, 1]``.
    """
    if times.ndim == 1:
        states, times = states.unsqueeze(1), times.unsqueeze(1)
    law = (weights, means, variances)
    for d in range(states.shape[1]):
        law = gaussian_mixture_velocity_law(states[:, d, 0], times[:, d], *law)
    w, m, _ = law
    return (w * m).sum(-1, keepdim=True)


def mixture_velocity_law_samples(
    x: float,
    t: float,
    means: Sequence[float],
    variance: float,
    n: int,
    generator: torch.Generator,
    min_weight: float = 0.05,
) -> tuple[Tensor, list[float]]:
    """``n`` draws of the true law of ``v = x1 - x0`` given ``x_t = x`` for an equal-weight 1-D mixture
    target (components ``N(means[k], variance)``) from N(0, 1), and the law's modes.

    The law is :func:`gaussian_mixture_velocity_law` (computed in float64); the modes are the means of its
    components with posterior weight above ``min_weight``. Returns ``(v [n, 1] float32, modes)``.
    """
    k = len(means)
    if k == 0 or variance <= 0 or n < 1:
        raise ValueError(f"need >= 1 mean, variance > 0 and n >= 1, got {k} means, {variance}, {n}")
    w, m, var = gaussian_mixture_velocity_law(
        torch.full((1,), float(x), dtype=torch.float64),
        t,
        torch.full((k,), 1.0 / k, dtype=torch.float64),
        torch.tensor(list(means), dtype=torch.float64),
        torch.full((k,), float(variance), dtype=torch.float64),
    )
    comp = torch.multinomial(w[0], n, replacement=True, generator=generator)
    v = m[0, comp] + var[0, comp].sqrt() * torch.randn(n, generator=generator, dtype=torch.float64)
    modes = [float(mu) for mu, wk in zip(m[0], w[0]) if wk > min_weight]
    return v.float()[:, None], modes


def mixture_field_model(means: Sequence[float], variance: float) -> HierarchicalModel:
    """The ideal field of an equal-weight 1-D mixture target (components ``N(means[k], variance)``) as a network
    of any depth is called: ``u(x [B, 1], t [B])`` is the exact RF velocity, ``u(s [B, D, 1], t [B, D])`` the
    exact depth-D field (:func:`exact_mixture_field`, computed in float64, returned in the states' dtype)."""
    k = len(means)
    if k == 0 or variance <= 0:
        raise ValueError(f"need >= 1 mean and variance > 0, got {k} means, {variance}")
    law = (
        torch.full((k,), 1.0 / k, dtype=torch.float64),
        torch.tensor(list(means), dtype=torch.float64),
        torch.full((k,), float(variance), dtype=torch.float64),
    )

    def field(states: Tensor, times: Tensor) -> Tensor:
        return exact_mixture_field(states.double(), times.double(), *law).to(states.dtype)

    return field
