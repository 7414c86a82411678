"""BC and BC-PMI: the weights follow the brief (exp PMI, mean 1 per batch, clipped, mixed), and both trainers
share one signature and the one training loop."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
import torch

from components.imitation.bc import TRAINERS, BCConfig, Demonstrations, pmi_weights, sampling_policy


def test_weights_are_exp_pmi_normalised_to_mean_one() -> None:
    pmi = torch.log(torch.tensor([0.5, 1.0, 1.5, 1.0]))
    w = pmi_weights(pmi)
    assert torch.allclose(w, torch.tensor([0.5, 1.0, 1.5, 1.0]))  # already mean 1: exp(pmi) itself
    shifted = pmi_weights(pmi + 3.0)  # a constant in PMI cancels
    assert torch.allclose(shifted, w) and float(w.mean()) == pytest.approx(1.0)


def test_weights_are_clipped_and_mixed() -> None:
    pmi = torch.tensor([8.0] + [0.0] * 99)  # one huge weight: ~ 29.8 after normalising
    w = pmi_weights(pmi, max_weight=10.0)
    assert float(w.max()) == 10.0 and float(w.min()) >= 0.0
    assert torch.allclose(pmi_weights(pmi, alpha=0.0), torch.ones(100))  # alpha = 0: plain BC
    half = pmi_weights(pmi, alpha=0.5)
    assert torch.allclose(half, 0.5 + 0.5 * w)
    assert not pmi_weights(pmi.requires_grad_()).requires_grad  # never differentiated


def _data(n: int = 300) -> Demonstrations:
    rng = np.random.default_rng(0)
    styles = rng.integers(0, 2, n)
    states = rng.uniform(-1, 1, (n, 2)).astype(np.float32)
    actions = np.where(styles == 0, 2, 3)  # style decides the action
    pmi = np.where(states[:, 0] > 0, 0.5, -0.5)
    return Demonstrations(
        torch.from_numpy(states), torch.from_numpy(actions), torch.from_numpy(styles), torch.from_numpy(pmi).float()
    )


@pytest.mark.parametrize("name", ["bc", "bc_pmi"])
def test_trainers_share_a_signature_and_learn_a_style_conditioned_policy(name: str) -> None:
    assert inspect.signature(TRAINERS[name]).parameters.keys() == inspect.signature(TRAINERS["bc"]).parameters.keys()
    data = _data()
    policy, result = TRAINERS[name](data, BCConfig(steps=150, batch_size=64, lr=1e-2), seed=0)
    assert result.steps_done == 150 and result.history[-1]["nll"] < 0.2
    with torch.no_grad():
        acc = (policy(data.states, data.styles).argmax(1) == data.actions).float().mean()
    assert float(acc) == 1.0


def test_gaussian_policy_learns_continuous_style_conditioned_actions() -> None:
    rng = np.random.default_rng(0)
    n = 400
    styles = rng.integers(0, 2, n)
    states = rng.uniform(-1, 1, (n, 3)).astype(np.float32)
    means = np.stack([np.where(styles == 0, 0.5, -0.5), states[:, 0]], axis=1)  # style decides the first torque
    actions = (means + 0.05 * rng.standard_normal((n, 2))).astype(np.float32)
    data = Demonstrations(torch.from_numpy(states), torch.from_numpy(actions), torch.from_numpy(styles), torch.zeros(n))
    for name in ("bc", "bc_pmi"):
        policy, result = TRAINERS[name](data, BCConfig(steps=400, batch_size=128, lr=1e-2), seed=0, n_styles=2)
        assert policy.cfg.continuous and policy.cfg.action_dim == 2 and policy.cfg.n_styles == 2
        with torch.no_grad():
            error = (policy(data.states, data.styles) - torch.from_numpy(means)).abs().mean()
        assert float(error) < 0.08, (name, float(error))
        assert float(policy.log_std.detach().exp().max()) < 0.3  # the learned std shrinks toward the noise (0.05)
    # NLL of a Gaussian at its mean with std 1: 0.5 log(2 pi) per dimension (a known value)
    from components.imitation.bc import PolicyConfig, StylePolicy, action_nll

    policy = StylePolicy(PolicyConfig(state_dim=3, n_styles=2, action_dim=2), seed=0)
    with torch.no_grad():
        policy.log_std.zero_()
        mean = policy(data.states[:4], data.styles[:4])
    assert torch.allclose(
        action_nll(policy, data.states[:4], mean, data.styles[:4]), torch.full((4,), float(np.log(2 * np.pi)))
    )


@pytest.mark.parametrize(("random_starts", "success"), [(False, 0.6), (True, 0.3)])
def test_greedy_policies_recover_every_style_in_the_gridworld(random_starts: bool, success: float) -> None:
    """What the headline needs of the learned part: from 20 noisy demonstrations per style, a greedy policy of
    either trainer crosses the zone in the asked-for corridor and reaches the goal (a regression to a policy that
    ignores z, or learns nothing, fails)."""
    from components.imitation.envs import make_gridworld

    env = make_gridworld(0.1, random_starts=random_starts)
    demos = env.demonstrations(20, np.random.default_rng(0))
    exact = env.exact_pmi(demos["obs"], demos["action"], demos["style"])
    data = Demonstrations(
        torch.from_numpy(env.features(demos["obs"])),
        torch.from_numpy(demos["action"]),
        torch.from_numpy(demos["style"]),
        torch.from_numpy(exact).float(),
    )
    styles = np.repeat(np.arange(3), 50)
    for name in ("bc", "bc_pmi"):
        policy, _ = TRAINERS[name](data, BCConfig(steps=800), seed=0, n_styles=3)
        act = sampling_policy(policy, env.features, torch.Generator().manual_seed(0), greedy=True)
        out = env.rollout(act, styles, np.random.default_rng(1))
        # a random policy: style accuracy ~0.2, success ~0.02 (from a random start; 0 from the bottom centre)
        assert (out["style"] == styles).mean() >= 0.9 and out["success"].mean() >= success, name
