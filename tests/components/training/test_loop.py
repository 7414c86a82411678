"""Tests of the shared training loop: known answers (linear regression, warmup LRs, window means),
invariants (determinism, bit-exact resume, clipping bound) and the checkpoint contract."""

from __future__ import annotations

import copy
import json
import math
import shutil
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from torch import nn
from torch.optim.optimizer import register_optimizer_step_pre_hook

from components.training import TrainConfig, TrainResult, fit, seed_everything, select_device

QUIET = {"progress": False, "device": "cpu"}


def regression_batches(step: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """y = 3x + 1 on 32 fresh x ~ N(0, 1) per step: shapes (32, 1), (32, 1)."""
    x = torch.randn(32, 1, generator=generator)
    return x, 3.0 * x + 1.0


def mse(model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    x, y = batch
    return nn.functional.mse_loss(model(x), y)


def small_net() -> nn.Module:
    """A net with dropout, so resume/determinism also cover torch's global RNG."""
    torch.manual_seed(123)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Dropout(0.3), nn.Linear(8, 1))


def net_batches(step: int, generator: torch.Generator) -> dict[str, torch.Tensor]:
    x = torch.randn(16, 4, generator=generator)
    return {"x": x, "y": x.sum(dim=1, keepdim=True)}


def net_loss(model: nn.Module, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, float]]:
    err = model(batch["x"]) - batch["y"]
    return err.pow(2).mean(), {"mae": err.abs().mean().item()}


def assert_same_weights(a: nn.Module, b: nn.Module) -> None:
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys()
    for key in sa:
        assert torch.equal(sa[key], sb[key]), key


def test_linear_regression_converges_to_known_answer() -> None:
    torch.manual_seed(0)
    model = nn.Linear(1, 1)
    result = fit(model, mse, regression_batches, TrainConfig(steps=200, lr=0.05, log_every=50, **QUIET))
    assert isinstance(result, TrainResult)
    assert model.weight.item() == pytest.approx(3.0, abs=0.02)
    assert model.bias.item() == pytest.approx(1.0, abs=0.02)
    assert result.steps_done == 200 and result.resumed_from == 0 and result.device == "cpu"
    assert [h["step"] for h in result.history] == [50.0, 100.0, 150.0, 200.0]
    assert result.final_loss == result.history[-1]["loss"] < 1e-3 < result.history[0]["loss"]
    assert model.weight.device.type == "cpu"


def test_two_fresh_runs_with_same_seed_give_identical_weights() -> None:
    cfg = TrainConfig(steps=15, lr=1e-2, seed=7, **QUIET)
    a, b = small_net(), small_net()
    fit(a, net_loss, net_batches, cfg)
    fit(b, net_loss, net_batches, cfg)
    assert_same_weights(a, b)
    c = small_net()
    fit(c, net_loss, net_batches, TrainConfig(steps=15, lr=1e-2, seed=8, **QUIET))
    assert not torch.equal(a[0].weight, c[0].weight)  # the seed really changes the run


def test_resumed_run_matches_uninterrupted_run_exactly(tmp_path: Path) -> None:
    base = {"lr": 1e-2, "weight_decay": 0.1, "warmup_steps": 5, "log_every": 3, **QUIET}
    straight = small_net()
    full = fit(straight, net_loss, net_batches, TrainConfig(steps=40, **base))

    first = fit(small_net(), net_loss, net_batches, TrainConfig(steps=20, **base), checkpoint_dir=tmp_path)
    assert first.steps_done == 20 and first.resumed_from == 0
    resumed_model = small_net()
    resumed = fit(resumed_model, net_loss, net_batches, TrainConfig(steps=40, **base), checkpoint_dir=tmp_path)

    assert resumed.resumed_from == 20 and resumed.steps_done == 40
    assert_same_weights(straight, resumed_model)
    # history keeps the first run's entries (its last step, 20, was logged) and continues after it
    assert resumed.history[:7] == first.history == full.history[:6] + [first.history[-1]]
    assert [h["step"] for h in resumed.history[7:]] == [21.0, 24.0, 27.0, 30.0, 33.0, 36.0, 39.0, 40.0]
    assert resumed.history[8:] == full.history[7:]  # from step 24 on, same windows, same values


def test_completed_checkpoint_returns_without_training(tmp_path: Path) -> None:
    cfg = TrainConfig(steps=6, lr=1e-2, **QUIET)
    trained = small_net()
    fit(trained, net_loss, net_batches, cfg, checkpoint_dir=tmp_path)
    calls = []
    fresh = small_net()
    result = fit(fresh, lambda m, b: calls.append(1) or net_loss(m, b), net_batches, cfg, checkpoint_dir=tmp_path)
    assert calls == []
    assert result.resumed_from == 6 and result.steps_done == 6
    assert_same_weights(trained, fresh)  # the trained weights are loaded into the caller's model


def test_periodic_checkpoints_resume_mid_run(tmp_path: Path) -> None:
    cfg = TrainConfig(steps=10, lr=1e-2, checkpoint_every=4, log_every=3, **QUIET)
    seen: list[int] = []

    def crash_after_6(step: int, generator: torch.Generator) -> dict[str, torch.Tensor]:
        if step == 7:
            raise KeyboardInterrupt
        seen.append(step)
        return net_batches(step, generator)

    with pytest.raises(KeyboardInterrupt):
        fit(small_net(), net_loss, crash_after_6, cfg, checkpoint_dir=tmp_path)
    with open(tmp_path / "trainer_state.json") as handle:
        assert json.load(handle)["step"] == 4
    resumed_model, straight = small_net(), small_net()
    resumed = fit(resumed_model, net_loss, net_batches, cfg, checkpoint_dir=tmp_path)
    full = fit(straight, net_loss, net_batches, cfg)
    assert resumed.resumed_from == 4 and seen == [1, 2, 3, 4, 5, 6]
    assert_same_weights(straight, resumed_model)
    # the half-filled logging window (step 4) is checkpointed too, so the step-6 mean covers 4..6
    assert resumed.history == full.history


def test_grad_clipping_bounds_the_norm_the_optimizer_sees() -> None:
    def huge_loss(model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        return 1e4 * mse(model, batch)

    def norms_at_optimizer_step(grad_clip: float | None) -> tuple[list[float], list[float]]:
        seen: list[float] = []

        def hook(optimizer: torch.optim.Optimizer, args: tuple, kwargs: dict) -> None:
            grads = [p.grad for g in optimizer.param_groups for p in g["params"] if p.grad is not None]
            seen.append(torch.nn.utils.get_total_norm(grads).item())

        handle = register_optimizer_step_pre_hook(hook)
        try:
            torch.manual_seed(0)
            result = fit(
                nn.Linear(1, 1),
                huge_loss,
                regression_batches,
                TrainConfig(steps=5, grad_clip=grad_clip, log_every=1, **QUIET),
            )
        finally:
            handle.remove()
        return seen, [h["grad_norm"] for h in result.history]

    clipped_seen, clipped_logged = norms_at_optimizer_step(0.5)
    assert len(clipped_seen) == 5
    assert all(n > 0.5 for n in clipped_logged)  # the recorded norm is the one before clipping
    assert all(n <= 0.5 * (1 + 1e-5) for n in clipped_seen)
    unclipped_seen, unclipped_logged = norms_at_optimizer_step(None)
    assert unclipped_seen == pytest.approx(unclipped_logged, rel=1e-5)
    assert all(n > 0.5 for n in unclipped_seen)


def test_callback_gets_window_means_at_log_steps_and_last_step() -> None:
    def step_marked_loss(model: nn.Module, batch: torch.Tensor) -> tuple[torch.Tensor, dict[str, float]]:
        # loss value = step number (with a zero-gradient path to the weights)
        return model.weight.sum() * 0 + batch, {"marker": 10 * batch.item()}

    calls: list[tuple[int, dict[str, float]]] = []
    result = fit(
        nn.Linear(1, 1),
        step_marked_loss,
        lambda step, g: torch.tensor(float(step)),
        TrainConfig(steps=7, log_every=3, lr=0.01, warmup_steps=4, **QUIET),
        callback=lambda step, metrics: calls.append((step, metrics)),
    )
    assert [step for step, _ in calls] == [3, 6, 7]
    assert all(set(m) == {"loss", "lr", "grad_norm", "marker"} for _, m in calls)
    assert [m["loss"] for _, m in calls] == [2.0, 5.0, 7.0]  # means of 1..3, 4..6, 7
    assert [m["marker"] for _, m in calls] == [20.0, 50.0, 70.0]
    assert [m["lr"] for _, m in calls] == pytest.approx([0.0075, 0.01, 0.01])  # warmup: 0.01 * 3/4
    assert [m["grad_norm"] for _, m in calls] == [0.0, 0.0, 0.0]
    assert result.history == [{"step": float(s), **m} for s, m in calls]


def test_only_given_parameters_are_trained() -> None:
    torch.manual_seed(0)
    model = nn.Linear(1, 1)
    bias_before = model.bias.detach().clone()
    fit(model, mse, regression_batches, TrainConfig(steps=5, lr=0.1, **QUIET), parameters=[model.weight])
    assert torch.equal(model.bias, bias_before)
    with pytest.raises(ValueError, match=r"parameters\[0\]"):
        fit(model, mse, regression_batches, TrainConfig(steps=1, **QUIET), parameters=[nn.Parameter(torch.ones(1))])


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("steps", 0),
        ("steps", 2.5),
        ("lr", 0.0),
        ("lr", math.nan),
        ("weight_decay", -0.1),
        ("grad_clip", 0.0),
        ("seed", -1),
        ("device", "tpu"),
        ("log_every", 0),
        ("checkpoint_every", -1),
        ("warmup_steps", -2),
        ("bf16", "yes"),
        ("optimizer", "adam"),
    ],
)
def test_bad_config_names_the_field(field: str, value: object) -> None:
    kwargs = {"steps": 10, field: value}
    with pytest.raises(ValueError, match=rf"TrainConfig\.{field}\b"):
        TrainConfig(**kwargs)


def test_bad_loss_output_is_rejected() -> None:
    with pytest.raises(ValueError, match="scalar"):
        fit(nn.Linear(1, 1), lambda m, b: m(b[0]), regression_batches, TrainConfig(steps=1, **QUIET))
    with pytest.raises(FloatingPointError):
        fit(nn.Linear(1, 1), lambda m, b: mse(m, b) * math.inf, regression_batches, TrainConfig(steps=1, **QUIET))


def test_mismatched_checkpoint_names_file_and_key(tmp_path: Path) -> None:
    def batches(step: int, generator: torch.Generator) -> torch.Tensor:
        return torch.randn(4, 2, generator=generator)

    fit(
        nn.Linear(2, 1),
        lambda m, x: m(x).pow(2).mean(),
        batches,
        TrainConfig(steps=2, **QUIET),
        checkpoint_dir=tmp_path,
    )
    with pytest.raises(ValueError, match=r"model\.safetensors.*'weight'"):
        fit(
            nn.Linear(3, 1),
            lambda m, x: m(x).pow(2).mean(),
            batches,
            TrainConfig(steps=4, **QUIET),
            checkpoint_dir=tmp_path,
        )
    with pytest.raises(ValueError, match=r"trainer_state\.json.*'seed'"):
        fit(
            nn.Linear(2, 1),
            lambda m, x: m(x).pow(2).mean(),
            batches,
            TrainConfig(steps=4, seed=1, **QUIET),
            checkpoint_dir=tmp_path,
        )


def test_sgd_step_is_the_hand_computed_update() -> None:
    """One plain SGD step on loss = (w x + b - y)^2 with x = 2, y = 1 from w = 0.5, b = 0.25: the residual
    is 0.25, dL/dw = 2 * 0.25 * 2 = 1, dL/db = 0.5; with lr 0.1 and L2 weight decay 0.2 (added to the
    gradient): w = 0.5 - 0.1 * (1 + 0.2 * 0.5) = 0.39, b = 0.25 - 0.1 * (0.5 + 0.2 * 0.25) = 0.195."""
    model = nn.Linear(1, 1)
    with torch.no_grad():
        model.weight.fill_(0.5)
        model.bias.fill_(0.25)
    batch = (torch.tensor([[2.0]]), torch.tensor([[1.0]]))
    fit(
        model,
        mse,
        lambda step, g: batch,
        TrainConfig(steps=1, lr=0.1, weight_decay=0.2, grad_clip=None, optimizer="sgd", **QUIET),
    )
    assert model.weight.item() == pytest.approx(0.39, abs=1e-7)
    assert model.bias.item() == pytest.approx(0.195, abs=1e-7)


def test_a_backward_inside_loss_fn_adds_to_the_step() -> None:
    """A loss_fn may backpropagate an extra term itself: the optimiser steps on the sum of both gradients,
    exactly as if the two terms had been returned as one loss."""

    def split(model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        (0.5 * model(batch[0]).pow(2).mean()).backward()
        return mse(model, batch)

    def joined(model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        return mse(model, batch) + 0.5 * model(batch[0]).pow(2).mean()

    cfg = TrainConfig(steps=5, lr=0.05, grad_clip=None, optimizer="sgd", **QUIET)
    torch.manual_seed(0)
    a = nn.Linear(1, 1)
    b = copy.deepcopy(a)
    fit(a, split, regression_batches, cfg)
    fit(b, joined, regression_batches, cfg)
    assert torch.allclose(a.weight, b.weight, atol=1e-6) and torch.allclose(a.bias, b.bias, atol=1e-6)


def test_sgd_resume_is_exact_and_another_optimizer_is_refused(tmp_path: Path) -> None:
    base = {"lr": 1e-2, "optimizer": "sgd", "weight_decay": 0.01, **QUIET}
    straight = small_net()
    fit(straight, net_loss, net_batches, TrainConfig(steps=12, **base))
    fit(small_net(), net_loss, net_batches, TrainConfig(steps=6, **base), checkpoint_dir=tmp_path)
    resumed = small_net()
    fit(resumed, net_loss, net_batches, TrainConfig(steps=12, **base), checkpoint_dir=tmp_path)
    assert_same_weights(straight, resumed)
    with pytest.raises(ValueError, match=r"trainer_state\.json: the checkpoint was written by another optimiser"):
        fit(
            small_net(),
            net_loss,
            net_batches,
            TrainConfig(steps=18, **{**base, "optimizer": "adamw"}),
            checkpoint_dir=tmp_path,
        )


def test_torn_checkpoint_is_reported(tmp_path: Path) -> None:
    early, late = tmp_path / "early", tmp_path / "late"
    fit(nn.Linear(1, 1), mse, regression_batches, TrainConfig(steps=2, **QUIET), checkpoint_dir=early)
    fit(nn.Linear(1, 1), mse, regression_batches, TrainConfig(steps=3, **QUIET), checkpoint_dir=late)
    shutil.copy(late / "model.safetensors", early / "model.safetensors")  # as if killed between renames
    with pytest.raises(ValueError, match=r"model\.safetensors: written at step 3.*step 2"):
        fit(nn.Linear(1, 1), mse, regression_batches, TrainConfig(steps=4, **QUIET), checkpoint_dir=early)


def test_checkpoint_files_are_safetensors_and_json_only(tmp_path: Path) -> None:
    model = small_net()
    fit(model, net_loss, net_batches, TrainConfig(steps=3, **QUIET), checkpoint_dir=tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "model.safetensors",
        "optimizer.safetensors",
        "trainer_state.json",
    ]
    with safe_open(str(tmp_path / "model.safetensors"), framework="pt") as handle:
        assert set(handle.keys()) == set(model.state_dict())
        assert handle.metadata()["step"] == "3"
        for key in handle.keys():
            assert torch.equal(handle.get_tensor(key), model.state_dict()[key])
    with safe_open(str(tmp_path / "optimizer.safetensors"), framework="pt") as handle:
        keys = set(handle.keys())
    n_params = len(list(model.parameters()))
    expected = {f"state.{i}.{name}" for i in range(n_params) for name in ("step", "exp_avg", "exp_avg_sq")}
    assert expected | {"rng.batches", "rng.torch"} <= keys
    state = json.loads((tmp_path / "trainer_state.json").read_text())
    assert state["step"] == 3
    assert state["param_names"] == [name for name, _ in model.named_parameters()]
    assert state["optimizer"]["param_groups"][0]["params"] == list(range(n_params))


def test_tied_weights_checkpoint_and_resume(tmp_path: Path) -> None:
    class Tied(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.encode = nn.Linear(3, 3, bias=False)
            self.decode = nn.Linear(3, 3, bias=False)
            self.decode.weight = self.encode.weight

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.decode(torch.tanh(self.encode(x)))

    def batches(step: int, generator: torch.Generator) -> torch.Tensor:
        return torch.randn(8, 3, generator=generator)

    def loss(m: nn.Module, x: torch.Tensor) -> torch.Tensor:
        return (m(x) - x).pow(2).mean()

    torch.manual_seed(0)
    straight = Tied()
    fit(straight, loss, batches, TrainConfig(steps=6, **QUIET))
    torch.manual_seed(0)
    fit(Tied(), loss, batches, TrainConfig(steps=3, **QUIET), checkpoint_dir=tmp_path)
    resumed = Tied()
    fit(resumed, loss, batches, TrainConfig(steps=6, **QUIET), checkpoint_dir=tmp_path)
    assert resumed.decode.weight is resumed.encode.weight
    assert_same_weights(straight, resumed)


def test_seed_everything_and_select_device() -> None:
    g = seed_everything(3)
    first = (torch.rand(2), torch.rand(2, generator=g))
    g = seed_everything(3)
    assert torch.equal(first[0], torch.rand(2)) and torch.equal(first[1], torch.rand(2, generator=g))
    assert select_device("cpu") == torch.device("cpu")
    assert select_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    with pytest.raises(ValueError, match="device"):
        select_device("tpu")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_bf16_step(tmp_path: Path) -> None:
    seen: dict[str, object] = {}

    def loss(model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        x, y = batch
        out = model(x)
        seen.update(device=x.device.type, autocast=torch.is_autocast_enabled("cuda"), dtype=out.dtype)
        return nn.functional.mse_loss(out.float(), y)

    torch.manual_seed(0)
    model = nn.Linear(1, 1)
    before = model.weight.detach().clone()
    result = fit(
        model, loss, regression_batches, TrainConfig(steps=1, device="cuda", progress=False), checkpoint_dir=tmp_path
    )
    assert seen == {"device": "cuda", "autocast": True, "dtype": torch.bfloat16}
    assert result.device.startswith("cuda") and result.steps_done == 1
    assert model.weight.device.type == "cpu" and model.weight.dtype == torch.float32
    assert not torch.equal(model.weight, before)
    resumed = nn.Linear(1, 1)
    fit(resumed, loss, regression_batches, TrainConfig(steps=1, device="cuda", progress=False), checkpoint_dir=tmp_path)
    assert torch.equal(resumed.weight, model.weight)


def test_torch_threads_sets_and_restores_the_count():
    from components.training import torch_threads

    before = torch.get_num_threads()
    other = 2 if before == 1 else 1
    with torch_threads(other):
        assert torch.get_num_threads() == other
    assert torch.get_num_threads() == before
    with pytest.raises(ValueError, match="thread count"):
        with torch_threads(0):
            pass
