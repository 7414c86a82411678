"""Two reaching styles on gymnasium's MuJoCo ``Reacher-v5`` that differ only while the arm sweeps.

``Reacher-v5`` is a 2-link planar arm (links 0.1 and 0.11) driven by two joint torques in ``[-1, 1]``;
an episode is 50 steps of 0.02 s. Its observation (10 floats) is, in order::

    cos q1, cos q2, sin q1, sin q2, target_x, target_y, dq1, dq2, fingertip_x - target_x, fingertip_y - target_y

Every episode starts with the arm stretched along +x (the env's reset, q ~ U(-0.1, 0.1)); the target is placed
*behind* it (through ``set_state``, in place of the env's own uniform target): shoulder angle ``pi + U(-w, w)``,
elbow ``U(elbow_low, elbow_high)``, so that reaching it takes about half a turn of the shoulder either way.

The scripted experts are Markov controllers of the observation. Let ``q* = IK(target)`` (elbow-positive
solution) and ``e = wrap(q1* - q1)``:

* **shared start** (elbow not yet bent, ``gate = clip(1 - |q2* - q2| / gate_width, 0, 1) = 0``): the elbow
  bends toward ``q2*`` while the shoulder holds still;
* **the style zone** (``|e| > zone_angle`` and ``gate > 0``): the shoulder sweeps counter-clockwise (style 0,
  ``e mod 2 pi``) or clockwise (style 1, ``e mod 2 pi - 2 pi``) at up to ``max_speed`` rad/s;
* **shared approach** (``|e| <= zone_angle``): the same PD controller on ``e`` for both styles.

Shoulder torque ``clip(k_v (v* - dq1))`` with ``v* = clip(k_p e_style, +- max_speed) * gate`` in the zone,
elbow torque ``clip(k_p2 (q2* - q2) - k_d2 dq2)``; the demonstrations add Gaussian action noise of std
``noise`` (clipped to ``[-1, 1]``). A rollout's *style* is the direction of its sweep: the net shoulder
rotation, summed from the observations, ``>= pi/2`` is counter-clockwise (0), ``<= -pi/2`` clockwise (1),
anything else no style (-1). *Success*: the final fingertip-target distance is below ``success_distance``.
*Return*: the env's reward summed over the episode (``-distance - |a|^2`` per step).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

STYLE_NAMES = ("counter-clockwise", "clockwise")
OBS_DIM, ACTION_DIM = 10, 2
LINKS = (0.1, 0.11)
ENV_ID = "Reacher-v5"


@dataclass(frozen=True)
class ReacherConfig:
    """The targets' placement, the experts' controller and noise, the horizon and the success threshold."""

    target_spread: float = 0.8  # w: the shoulder angle of the target is pi + U(-w, w)
    elbow_low: float = 0.5
    elbow_high: float = 1.6
    zone_angle: float = 0.6  # |e| above this (with the elbow bent) is the style zone
    gate_width: float = 0.3
    max_speed: float = 9.0
    k_p: float = 10.0
    k_v: float = 0.5
    k_p2: float = 2.0
    k_d2: float = 0.2
    noise: float = 0.1
    horizon: int = 50
    success_distance: float = 0.02

    def __post_init__(self) -> None:
        if not 0.0 <= self.target_spread < np.pi / 2:
            raise ValueError(f"ReacherConfig.target_spread must be in [0, pi/2), got {self.target_spread!r}")
        if not 0.0 < self.elbow_low < self.elbow_high < 3.0:
            raise ValueError(
                f"ReacherConfig elbow range must satisfy 0 < low < high < 3, got {self.elbow_low}, {self.elbow_high}"
            )
        if not 0.0 <= self.noise <= 2.0:
            raise ValueError(f"ReacherConfig.noise must be in [0, 2], got {self.noise!r}")
        if self.horizon < 1 or self.success_distance <= 0:
            raise ValueError("ReacherConfig.horizon must be >= 1 and success_distance > 0")


def _wrap(angle: np.ndarray) -> np.ndarray:
    return (angle + np.pi) % (2 * np.pi) - np.pi


def inverse_kinematics(targets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Joint angles ``(q1 [B], q2 [B])`` (elbow-positive) that put the fingertip on ``targets [B, 2]``."""
    l1, l2 = LINKS
    targets = np.asarray(targets, dtype=np.float64)
    c2 = np.clip(((targets**2).sum(1) - l1**2 - l2**2) / (2 * l1 * l2), -1.0, 1.0)
    q2 = np.arccos(c2)
    q1 = np.arctan2(targets[:, 1], targets[:, 0]) - np.arctan2(l2 * np.sin(q2), l1 + l2 * np.cos(q2))
    return q1, q2


def forward_kinematics(q1: np.ndarray, q2: np.ndarray) -> np.ndarray:
    """Fingertip positions ``[B, 2]`` of joint angles ``q1 [B], q2 [B]``."""
    l1, l2 = LINKS
    return np.stack([l1 * np.cos(q1) + l2 * np.cos(q1 + q2), l1 * np.sin(q1) + l2 * np.sin(q1 + q2)], axis=1)


def _decode(obs: np.ndarray) -> tuple[np.ndarray, ...]:
    obs = np.asarray(obs, dtype=np.float64).reshape(-1, OBS_DIM)
    return np.arctan2(obs[:, 2], obs[:, 0]), np.arctan2(obs[:, 3], obs[:, 1]), obs[:, 4:6], obs[:, 6:8]


def _phase(cfg: ReacherConfig, obs: np.ndarray) -> tuple[np.ndarray, ...]:
    q1, q2, target, velocity = _decode(obs)
    q1_goal, q2_goal = inverse_kinematics(target)
    error = _wrap(q1_goal - q1)
    gate = np.clip(1.0 - np.abs(q2_goal - q2) / cfg.gate_width, 0.0, 1.0)
    return error, gate, q2_goal - q2, velocity


def in_zone(cfg: ReacherConfig, obs: np.ndarray) -> np.ndarray:
    """``[B]`` bool: the states where the two experts act differently (sweeping, elbow bent)."""
    error, gate, _, _ = _phase(cfg, obs)
    return (np.abs(error) > cfg.zone_angle) & (gate > 0)


def before_sweep(cfg: ReacherConfig, obs: np.ndarray) -> np.ndarray:
    """``[B]`` bool: the shared start (far from the goal angle, elbow still bending): both styles act alike
    on states both reach, so the exact PMI there is 0."""
    error, gate, _, _ = _phase(cfg, obs)
    return (np.abs(error) > cfg.zone_angle) & (gate == 0)


def expert_actions(cfg: ReacherConfig, obs: np.ndarray, styles: np.ndarray) -> np.ndarray:
    """The noiseless expert torques ``[B, 2]`` for ``obs [B, 10]`` and ``styles [B]`` (0 CCW, 1 CW)."""
    error, gate, elbow_error, velocity = _phase(cfg, obs)
    styles = np.asarray(styles)
    zone = np.abs(error) > cfg.zone_angle
    turn = np.mod(error, 2 * np.pi)
    steered = np.where(zone, np.where(styles == 0, turn, turn - 2 * np.pi), error)
    speed = np.clip(cfg.k_p * steered, -cfg.max_speed, cfg.max_speed) * np.where(zone, gate, 1.0)
    shoulder = np.clip(cfg.k_v * (speed - velocity[:, 0]), -1.0, 1.0)
    elbow = np.clip(cfg.k_p2 * elbow_error - cfg.k_d2 * velocity[:, 1], -1.0, 1.0)
    return np.stack([shoulder, elbow], axis=1)


def noisy_expert(cfg: ReacherConfig, rng: np.random.Generator) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """``act(obs, styles)``: the expert torques plus N(0, noise^2), clipped to [-1, 1]."""

    def act(obs: np.ndarray, styles: np.ndarray) -> np.ndarray:
        own = expert_actions(cfg, obs, styles)
        return np.clip(own + cfg.noise * rng.standard_normal(own.shape), -1.0, 1.0)

    return act


def sweep_style(obs_sequence: np.ndarray) -> np.ndarray:
    """The style of each episode from its observations ``[T, B, 10]``: net shoulder rotation >= pi/2 is 0
    (counter-clockwise), <= -pi/2 is 1 (clockwise), else -1."""
    q1 = np.arctan2(obs_sequence[..., 2], obs_sequence[..., 0])
    net = _wrap(np.diff(q1, axis=0)).sum(0)
    return np.where(net >= np.pi / 2, 0, np.where(net <= -np.pi / 2, 1, -1)).astype(np.int64)


def _start(env, cfg: ReacherConfig, rng: np.random.Generator) -> np.ndarray:
    """Reset one env and move its target behind the arm; returns the first observation."""
    env.reset(seed=int(rng.integers(2**31)))
    sim = env.unwrapped
    angle = np.pi + rng.uniform(-cfg.target_spread, cfg.target_spread)
    elbow = rng.uniform(cfg.elbow_low, cfg.elbow_high)
    qpos, qvel = sim.data.qpos.copy(), sim.data.qvel.copy()
    qpos[2:] = forward_kinematics(np.array([angle]), np.array([elbow]))[0]
    qvel[2:] = 0.0
    sim.set_state(qpos, qvel)
    return sim._get_obs()  # the env's own observation of the moved target (reset returned the old one)


def make_envs(count: int, horizon: int, envs: list | None = None) -> list:
    """``count`` ``Reacher-v5`` envs: those of ``envs`` (a pool the caller keeps; it is topped up in place),
    then new ones (about 30 ms each to build, so repeated rollouts should share a pool)."""
    import gymnasium as gym

    envs = [] if envs is None else envs
    while len(envs) < count:
        envs.append(gym.make(ENV_ID, max_episode_steps=horizon))
    return envs[:count]


def rollout(
    cfg: ReacherConfig,
    policy: Callable[[np.ndarray, np.ndarray], np.ndarray],
    styles: np.ndarray,
    rng: np.random.Generator,
    horizon: int | None = None,
    pool: list | None = None,
) -> dict[str, np.ndarray]:
    """One ``Reacher-v5`` episode per entry of ``styles``, all stepped together, under
    ``policy(obs [B, 10], styles [B]) -> torques [B, 2]`` (in envs of ``pool``, see :func:`make_envs`; each
    episode is reset with a seed drawn from ``rng``, so reusing envs changes nothing).

    Returns per episode ``success``, ``style`` (:func:`sweep_style`), ``return``, ``distance`` (final) and
    the trajectories ``obs [B, T, 10]``, ``action [B, T, 2]`` (``obs[:, t]`` is the state ``action[:, t]``
    was taken in).
    """
    styles = np.asarray(styles, dtype=np.int64)
    horizon = horizon or cfg.horizon
    envs = make_envs(len(styles), horizon, pool)
    obs = np.stack([_start(env, cfg, rng) for env in envs])
    seen, actions, total = [obs], [], np.zeros(len(styles))
    for _ in range(horizon):
        act = np.clip(np.asarray(policy(obs, styles), dtype=np.float64).reshape(len(styles), ACTION_DIM), -1, 1)
        steps = [env.unwrapped.step(a) for env, a in zip(envs, act)]  # no time limit: exactly `horizon` steps
        obs = np.stack([s[0] for s in steps])
        total += [s[1] for s in steps]
        seen.append(obs)
        actions.append(act)
    distance = np.linalg.norm(obs[:, 8:10], axis=1)
    trace = np.stack(seen)
    return {
        "success": distance < cfg.success_distance,
        "style": sweep_style(trace),
        "return": total,
        "distance": distance,
        "obs": trace[:-1].transpose(1, 0, 2),
        "action": np.stack(actions).transpose(1, 0, 2),
    }


def expert_demonstrations(
    cfg: ReacherConfig, per_style: int, rng: np.random.Generator, pool: list | None = None
) -> dict[str, np.ndarray]:
    """``per_style`` noisy expert episodes of every style, ``cfg.horizon`` steps each.

    Returns flat arrays over all steps: ``obs [N, 10]``, ``action [N, 2]`` (float64), ``style [N]``,
    ``episode [N]`` (style-major: style k holds episodes ``k*per_style .. (k+1)*per_style - 1``), ``t [N]``.
    """
    styles = np.repeat(np.arange(len(STYLE_NAMES)), per_style)
    out = rollout(cfg, noisy_expert(cfg, rng), styles, rng, pool=pool)
    n, horizon = out["obs"].shape[:2]
    return {
        "obs": out["obs"].reshape(n * horizon, OBS_DIM),
        "action": out["action"].reshape(n * horizon, ACTION_DIM),
        "style": np.repeat(styles, horizon),
        "episode": np.repeat(np.arange(n), horizon),
        "t": np.tile(np.arange(horizon), n),
    }


def state_features(obs: np.ndarray) -> np.ndarray:
    """Policy / MINE input ``[B, 10]`` float32: the observation with positions x5 and velocities /10."""
    scale = np.array([1, 1, 1, 1, 5, 5, 0.1, 0.1, 5, 5], dtype=np.float64)
    return (np.asarray(obs, dtype=np.float64).reshape(-1, OBS_DIM) * scale).astype(np.float32)


def fingertip(obs: np.ndarray) -> np.ndarray:
    """Fingertip positions ``[B, 2]`` read from observations (target + fingertip-target)."""
    obs = np.asarray(obs, dtype=np.float64).reshape(-1, OBS_DIM)
    return obs[:, 4:6] + obs[:, 8:10]
