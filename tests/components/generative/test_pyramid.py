"""Pyramidal flow matching: schedule values against the official formulas, pyramids, block noise, the
continuity of the path at a jump (the brief's derivation, checked by moments), the temporal pyramid's
history levels, the sampler against an exact velocity field, the unified training batches, loss and guided
velocity, and the exact token/FLOP counts against hand counts."""

from __future__ import annotations

import functools
import math

import pytest
import torch
import torch.nn.functional as F

from components.generative.flow_matching import flow_matching_loss
from components.generative.pyramid import (
    JUMP_ENTRY,
    JUMPS,
    ComputeCounter,
    Cost,
    PyramidSchedule,
    autoregressive_sample,
    batch_columns,
    block_noise,
    block_noise_covariance,
    compress_history,
    corrupt_history,
    data_pyramid,
    downsample,
    guided_velocity,
    history_levels,
    jump,
    noise_pyramid,
    pyramid_batches,
    pyramid_loss,
    pyramid_sample,
    sequence_layout,
    stage_field,
    stage_pair,
    unit_lengths,
    upsample_nearest,
)
from components.models.dit import DiTConfig, forward_flops


def _official_start_sigma(stage: int, gamma: float = 1 / 3, steps: int = 1000) -> float:
    """scheduling_flow_matching.py: sigmas on the 1000-step grid, then the correction for i_s > 0."""
    sigmas = [(steps - i) / steps for i in range(steps)]
    start = sigmas[int([0, 1 / 3, 2 / 3, 1][stage] * steps)]
    if stage == 0:
        return start
    ori = 1 - start
    return 1 - (1 / (math.sqrt(1 + 1 / gamma) * (1 - ori) + ori)) * ori


# ---- schedule ------------------------------------------------------------------------------------
def test_schedule_values_match_the_official_scheduler() -> None:
    s = PyramidSchedule(3, 1 / 3)
    assert [s.start_sigma(k) for k in range(3)] == pytest.approx([1.0, 0.8, 0.5])
    assert [s.end_sigma(k) for k in range(3)] == pytest.approx([2 / 3, 1 / 3, 0.0])
    for k in range(3):  # the official 1000-step grid differs by its 1/1000 rounding only
        assert s.start_sigma(k) == pytest.approx(_official_start_sigma(k), abs=2e-3)
    # gamma = 1/3: the correction is o / (2 - o) (the commented line of the official code)
    o = 1 / 3
    assert 1 - s.start_sigma(1) == pytest.approx(o / (2 - o))


def test_jump_coefficients_give_the_corrected_start() -> None:
    s = PyramidSchedule(3, 1 / 3)
    alpha, beta = s.jump_coefficients(1)
    assert (alpha, beta) == pytest.approx((0.6, 0.4 * math.sqrt(3)))
    for k in (1, 2):
        alpha, beta = s.jump_coefficients(k)
        o = 1 - s.end_sigma(k - 1)
        assert alpha * o == pytest.approx(1 - s.start_sigma(k))  # signal coefficient
        # the 11^T terms of the block covariance cancel (beta^2 gamma = alpha^2 e^2) and what is left,
        # alpha^2 e^2 (1 + 1/gamma) I, is the corrected start's variance s_k^2 I
        assert beta**2 * s.gamma == pytest.approx(alpha**2 * (1 - o) ** 2)
        assert alpha * (1 - o) * math.sqrt(1 + 1 / s.gamma) == pytest.approx(s.start_sigma(k))


def test_time_spans_tile_the_unit_interval_in_proportion_to_stage_lengths() -> None:
    s = PyramidSchedule(3, 1 / 3)
    spans = [s.time_span(k) for k in range(3)]
    assert spans[0][0] == 0.0 and spans[-1][1] == 1.0
    assert all(spans[k][1] == pytest.approx(spans[k + 1][0]) for k in range(2))
    lengths = [s.start_sigma(k) - s.end_sigma(k) for k in range(3)]
    for (a, b), length in zip(spans, lengths):
        assert b - a == pytest.approx(length / sum(lengths))
    t = torch.tensor([0.0, 0.5, 1.0])
    assert torch.allclose(s.global_time(1, t), torch.tensor([spans[1][0], sum(spans[1]) / 2, spans[1][1]]))


def test_one_stage_is_plain_rectified_flow() -> None:
    s = PyramidSchedule(1)
    assert (s.start_sigma(0), s.end_sigma(0), s.time_span(0)) == (1.0, 0.0, (0.0, 1.0))
    assert s.level_size(16, 0) == 16


def test_schedule_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="gamma"):
        PyramidSchedule(3, 0.5)
    with pytest.raises(ValueError, match="n_stages"):
        PyramidSchedule(0)
    with pytest.raises(ValueError, match="divisible"):
        PyramidSchedule(3).level_size(6, 0)
    with pytest.raises(ValueError, match="stage"):
        PyramidSchedule(3).start_sigma(3)


# ---- pyramids and block noise --------------------------------------------------------------------
def test_downsample_is_the_two_by_two_mean_and_upsample_repeats() -> None:
    x = torch.randn(2, 3, 8, 8)
    assert torch.allclose(downsample(x), F.avg_pool2d(x.flatten(0, 1)[:, None], 2)[:, 0].view(2, 3, 4, 4), atol=1e-6)
    up = upsample_nearest(torch.arange(4.0).view(2, 2))
    assert torch.equal(up, torch.tensor([[0.0, 0, 1, 1], [0, 0, 1, 1], [2, 2, 3, 3], [2, 2, 3, 3]]))
    assert torch.allclose(downsample(upsample_nearest(x)), x)


def test_pyramids_shapes_and_unit_noise_variance() -> None:
    x = torch.rand(4, 1, 16, 16)
    levels = data_pyramid(x, 3)
    assert [t.shape[-1] for t in levels] == [4, 8, 16] and levels[-1] is x
    noise = noise_pyramid(torch.randn(4000, 16, 16, generator=torch.Generator().manual_seed(0)), 3)
    for n in noise:  # the factor 2 keeps unit variance at every level
        assert n.var().item() == pytest.approx(1.0, abs=0.02)
    # without it the 2x2 mean would have variance 1/4
    assert downsample(noise[-1]).var().item() == pytest.approx(0.25, abs=0.01)


def _blocks(x: torch.Tensor) -> torch.Tensor:
    """[..., H, W] -> [N_blocks, 4] with the 2x2 pixels of each block in row-major order."""
    h, w = x.shape[-2:]
    return x.reshape(-1, h // 2, 2, w // 2, 2).permute(0, 1, 3, 2, 4).reshape(-1, 4)


@pytest.mark.parametrize("gamma", [1 / 3, 0.2])
def test_block_noise_has_the_block_covariance_and_independent_blocks(gamma: float) -> None:
    n = block_noise((20_000, 4, 4), gamma, torch.Generator().manual_seed(1))
    cov = torch.cov(_blocks(n).T.double())
    assert torch.allclose(cov, block_noise_covariance(gamma), atol=0.03)
    neighbours = torch.stack([n[:, 0, 1].double(), n[:, 0, 2].double()])  # same row, different blocks
    assert abs(torch.corrcoef(neighbours)[0, 1].item()) < 0.03
    if gamma == 1 / 3:  # singular covariance: every block sums to zero
        assert _blocks(n).sum(1).abs().max().item() < 1e-5


def test_block_noise_is_seeded_and_needs_even_sizes() -> None:
    a = block_noise((2, 4, 4), 1 / 3, torch.Generator().manual_seed(3))
    b = block_noise((2, 4, 4), 1 / 3, torch.Generator().manual_seed(3))
    assert torch.equal(a, b)
    with pytest.raises(ValueError, match="even"):
        block_noise((2, 3, 4), 1 / 3)


# ---- training pairs --------------------------------------------------------------------------------
def test_stage_pairs_follow_the_formulas() -> None:
    s = PyramidSchedule(3)
    x = torch.rand(2, 1, 16, 16)
    levels, noise = data_pyramid(x, 3), noise_pyramid(torch.randn(2, 1, 16, 16), 3)
    start, end = stage_pair(levels, noise, 0, s)
    assert torch.equal(start, noise[0]) and torch.allclose(end, 2 / 3 * noise[0] + 1 / 3 * levels[0])
    start, end = stage_pair(levels, noise, 1, s)
    assert torch.allclose(start, 0.8 * noise[1] + 0.2 * upsample_nearest(levels[0]))
    start, end = stage_pair(levels, noise, 2, s)
    assert torch.equal(end, x) and torch.allclose(start, 0.5 * noise[2] + 0.5 * upsample_nearest(levels[1]))


def test_a_stage_is_the_core_linear_interpolant_from_start_to_end() -> None:
    """flow_matching_loss of the exact stage velocity (end - start) through stage_field is zero."""
    s = PyramidSchedule(3)
    x = torch.rand(3, 1, 8, 8)
    start, end = stage_pair(data_pyramid(x, 3), noise_pyramid(torch.randn(3, 1, 8, 8), 3), 1, s)
    seen = {}

    def model(x_t: torch.Tensor, tau: torch.Tensor, stage: int) -> torch.Tensor:
        seen["tau"], seen["stage"] = tau, stage
        return end - start

    t = torch.tensor([0.0, 0.5, 1.0])
    assert flow_matching_loss(stage_field(model, s, 1), start, end, t).item() == pytest.approx(0.0, abs=1e-12)
    assert seen["stage"] == 1 and torch.allclose(seen["tau"], s.global_time(1, t))


# ---- the jump: continuity in distribution (the brief's derivation) ----------------------------------
def _moments(samples: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-pixel mean and variance over draws, and the within-block covariance of the centred draws."""
    mean = samples.mean(0)
    centred = samples - mean
    return mean, centred.var(0), torch.cov(_blocks(centred).T.double())


@pytest.mark.parametrize("stage", [1, 2])
def test_renoised_end_of_a_stage_matches_the_start_of_the_next(stage: int) -> None:
    """end_{k-1} = e n + (1 - e) x_{k-1}, jumped with alpha Up + beta n_blk, has the law of the training start
    s_k n + (1 - s_k) Up(x_{k-1}): mean (1 - s_k) Up(x_{k-1}), variance s_k^2, no correlation inside a block."""
    s, draws = PyramidSchedule(3), 20_000
    gen = torch.Generator().manual_seed(stage)
    x = torch.rand(1, 16, 16, generator=gen) * 2 - 1  # one fixed clean frame
    levels = data_pyramid(x.expand(draws, 16, 16), 3)
    noise = noise_pyramid(torch.randn(draws, 16, 16, generator=gen), 3)
    _, end_prev = stage_pair(levels, noise, stage - 1, s)
    jumped = jump("block", end_prev, s, stage, gen)
    start, _ = stage_pair(levels, noise_pyramid(torch.randn(draws, 16, 16, generator=gen), 3), stage, s)

    sk = s.start_sigma(stage)
    expected_mean = (1 - sk) * upsample_nearest(levels[stage - 1][0])
    for samples in (jumped, start):
        mean, var, block_cov = _moments(samples)
        assert torch.allclose(mean, expected_mean, atol=4 * sk / math.sqrt(draws) + 1e-3)
        assert var.mean().item() == pytest.approx(sk**2, rel=0.02)
        assert torch.allclose(block_cov, sk**2 * torch.eye(4, dtype=torch.float64), atol=0.02)


@pytest.mark.parametrize("name", ["iid", "none"])
def test_the_ablated_jumps_break_the_continuity(name: str) -> None:
    """Without renoising the variance is e^2 and the pixels of a block are copies; with i.i.d. noise the
    variance is right but the pixels of a block stay correlated by gamma / (1 + gamma)."""
    s, draws, stage = PyramidSchedule(3), 20_000, 2
    gen = torch.Generator().manual_seed(7)
    x = torch.rand(1, 16, 16, generator=gen)
    levels = data_pyramid(x.expand(draws, 16, 16), 3)
    _, end_prev = stage_pair(levels, noise_pyramid(torch.randn(draws, 16, 16, generator=gen), 3), stage - 1, s)
    _, var, block_cov = _moments(jump(name, end_prev, s, stage, gen))
    corr = (block_cov[0, 1] / block_cov[0, 0]).item()
    if name == "none":  # the noise level of the stage at the time "none" enters it, but block-constant
        assert var.mean().item() == pytest.approx(s.end_sigma(stage - 1) ** 2, rel=0.03)
        assert var.mean().item() == pytest.approx(s.sigma(stage, JUMP_ENTRY["none"](s, stage)) ** 2, rel=0.03)
        assert corr == pytest.approx(1.0, abs=1e-6)
    else:
        assert var.mean().item() == pytest.approx(s.start_sigma(stage) ** 2, rel=0.03)
        assert corr == pytest.approx(s.gamma / (1 + s.gamma), abs=0.03)
    assert set(JUMPS) == {"block", "iid", "none"}
    with pytest.raises(ValueError, match="unknown jump"):
        jump("bogus", end_prev, s, stage)


def test_the_unrenoised_state_enters_the_stage_where_its_noise_level_is() -> None:
    s = PyramidSchedule(3, 1 / 3)
    # stage 1 runs from sigma 0.8 to 1/3; the end of stage 0 has sigma 2/3: (0.8 - 2/3) / (0.8 - 1/3) = 2/7
    assert s.unrenoised_entry_time(1) == pytest.approx(2 / 7)
    assert s.unrenoised_entry_time(2) == pytest.approx((0.5 - 1 / 3) / 0.5)
    for k in (1, 2):
        assert s.sigma(k, s.unrenoised_entry_time(k)) == pytest.approx(s.end_sigma(k - 1))
        assert JUMP_ENTRY["block"](s, k) == JUMP_ENTRY["iid"](s, k) == 0.0
    assert s.sigma(1, 0.0) == pytest.approx(0.8) and s.sigma(1, 1.0) == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match="stage >= 1"):
        s.unrenoised_entry_time(0)


def test_unrenoised_sampling_integrates_from_the_entry_time() -> None:
    """With a field that returns 1 everywhere, Euler moves the state by the length of the integrated span:
    1 per stage for the renoised jumps, 1 - entry time for "none" (same number of steps, shorter span)."""
    s = PyramidSchedule(3)
    times: list[float] = []

    def field(x: torch.Tensor, tau: torch.Tensor, stage: int) -> torch.Tensor:
        times.append(float(tau[0]))
        return torch.ones_like(x)

    out = pyramid_sample(field, s, torch.zeros(1, 1, 16, 16), [2, 2, 2], "none")
    assert out.nfe == 6
    lo, hi = s.time_span(1)
    assert times[2] == pytest.approx(lo + s.unrenoised_entry_time(1) * (hi - lo))
    expected = 1 + (1 - s.unrenoised_entry_time(1)) + (1 - s.unrenoised_entry_time(2))
    assert out.x.mean().item() == pytest.approx(expected)
    times.clear()
    renoised = pyramid_sample(field, s, torch.zeros(1, 1, 16, 16), [2, 2, 2], "iid", torch.Generator().manual_seed(0))
    assert times[2] == pytest.approx(lo) and renoised.nfe == 6


# ---- the temporal pyramid ----------------------------------------------------------------------------
def test_history_levels_follow_the_official_compression() -> None:
    # most recent frame at the current stage's level, one level coarser per lag, then the coarsest
    assert history_levels(3, 2, 3) == [0, 1, 2]
    assert history_levels(5, 2, 3) == [0, 0, 0, 1, 2]
    assert history_levels(2, 1, 3) == [0, 1]
    assert history_levels(3, 0, 3) == [0, 0, 0]
    assert history_levels(3, 0, 3, "full") == [2, 2, 2]
    assert history_levels(0, 2, 3) == []
    with pytest.raises(ValueError, match="history mode"):
        history_levels(1, 0, 3, "half")


def test_compress_history_picks_each_frame_at_its_level() -> None:
    clip = torch.rand(2, 3, 1, 16, 16)
    levels = data_pyramid(clip, 3)
    frames = compress_history(levels, 2)
    assert [f.shape[-1] for f in frames] == [4, 8, 16]
    assert torch.equal(frames[-1], clip[:, 2]) and torch.allclose(frames[0], levels[0][:, 0])


def test_corrupt_history_shares_one_level_per_sample() -> None:
    frames = [torch.zeros(500, 16, 16), torch.zeros(500, 32, 32)]
    gen = torch.Generator().manual_seed(0)
    out = corrupt_history(frames, 1 / 3, gen)
    std0, std1 = out[0].flatten(1).std(1), out[1].flatten(1).std(1)
    assert torch.allclose(std0, std1, rtol=0.25, atol=0.01)  # the same r for both frames of a sample
    assert std1.max().item() < 1 / 3 * 1.6 and std1.mean().item() == pytest.approx(1 / 6, rel=0.1)
    assert corrupt_history(frames, 0.0) == frames


def test_unit_lengths_balance_the_columns() -> None:
    assert [unit_lengths(s, 4, 3) for s in range(1, 6)] == [[4, 4, 1], [3, 3, 2], [2, 2, 3], [1, 1, 4], [4, 4, 1]]
    assert unit_lengths(7, 1, 3) == [1, 1, 1]


def test_sequence_layout_counts_tokens_per_frame() -> None:
    s = PyramidSchedule(3)
    assert sequence_layout(4, 2, s, 16, 2) == (4, 16, 64, 64)
    assert sequence_layout(4, 0, s, 16, 2) == (4, 4, 4, 4)
    assert sequence_layout(4, 1, s, 16, 2, "full") == (64, 64, 64, 16)
    assert sequence_layout(1, 2, s, 16, 2) == (64,)
    assert sequence_layout(3, 0, PyramidSchedule(1), 16, 2) == (64, 64, 64)


# ---- sampling -----------------------------------------------------------------------------------------
def _exact_field(schedule: PyramidSchedule, x_star: torch.Tensor):
    """The exact velocity of every stage when the data is the single frame x_star: on the stage's path
    x_t = a n + b with a, b known, so n and hence end - start can be read off x_t. Takes global time."""
    levels = data_pyramid(x_star, schedule.n_stages)

    def field(x: torch.Tensor, tau: torch.Tensor, stage: int) -> torch.Tensor:
        lo, hi = schedule.time_span(stage)
        t = ((tau - lo) / (hi - lo)).view(-1, *([1] * (x.ndim - 1)))
        s, e = schedule.start_sigma(stage), schedule.end_sigma(stage)
        up = upsample_nearest(levels[stage - 1]) if stage > 0 else torch.zeros_like(levels[0])
        a = (1 - t) * s + t * e
        b = (1 - t) * (1 - s) * up + t * (1 - e) * levels[stage]
        n = (x - b) / a
        return (e - s) * n + (1 - e) * levels[stage] - (1 - s) * up

    return field


@pytest.mark.parametrize("name", ["block", "iid", "none"])
def test_pyramid_sample_reaches_the_data_under_the_exact_field(name: str) -> None:
    s = PyramidSchedule(3)
    x_star = torch.rand(1, 16, 16)
    result = pyramid_sample(
        _exact_field(s, x_star), s, torch.randn(5, 1, 16, 16), [3, 2, 4], name, torch.Generator().manual_seed(0)
    )
    assert result.nfe == 9 and [e.shape[-1] for e in result.stage_ends] == [4, 8, 16]
    assert torch.allclose(result.x, x_star.expand(5, 1, 16, 16), atol=1e-4)
    with pytest.raises(ValueError, match="one step count per stage"):
        pyramid_sample(_exact_field(s, x_star), s, torch.randn(5, 1, 16, 16), [3, 2])


def test_autoregressive_sample_hands_each_stage_its_compressed_history() -> None:
    s = PyramidSchedule(3)
    seen: list[tuple[int, tuple[int, ...]]] = []

    def velocity(x: torch.Tensor, tau: torch.Tensor, stage: int, history: list[torch.Tensor]) -> torch.Tensor:
        assert x.shape[-1] == s.level_size(16, stage) and all(h.shape[0] == x.shape[0] for h in history)
        seen.append((stage, tuple(h.shape[-1] for h in history)))
        return torch.zeros_like(x)

    out = autoregressive_sample(
        velocity, s, torch.randn(2, 3, 1, 16, 16), [1, 1, 1], "compressed", "block", torch.Generator().manual_seed(0)
    )
    assert out.clips.shape == (2, 3, 1, 16, 16) and out.nfe == 9
    assert seen == [(0, ()), (1, ()), (2, ()), (0, (4,)), (1, (8,)), (2, (16,)), (0, (4, 4)), (1, (4, 8)), (2, (8, 16))]
    seen.clear()
    autoregressive_sample(velocity, s, torch.randn(2, 2, 1, 16, 16), [1, 1, 1], "full")
    assert seen[3:] == [(0, (16,)), (1, (16,)), (2, (16,))]
    # the first frame with its own steps and velocity (the paper: more steps, larger guidance)
    calls: list[str] = []

    def tagged(tag: str):
        def v(x, tau, stage, history):
            calls.append(tag)
            return torch.zeros_like(x)

        return v

    out = autoregressive_sample(
        tagged("later"),
        s,
        torch.randn(2, 3, 1, 16, 16),
        [1, 1, 1],
        first_steps=[2, 2, 2],
        first_velocity=tagged("first"),
    )
    assert out.nfe == 6 + 3 + 3 and calls == ["first"] * 6 + ["later"] * 6


# ---- unified training: batch columns, batches, loss; the guided velocity -----------------------------
def test_batch_columns_split_equally_with_the_remainder_on_the_finest() -> None:
    assert batch_columns(12, 3) == [4, 4, 4]
    assert batch_columns(7, 3) == [2, 2, 3]
    assert batch_columns(8, 3) == [2, 3, 3]
    assert batch_columns(5, 1) == [5]
    with pytest.raises(ValueError, match="cannot fill"):
        batch_columns(2, 3)


def test_pyramid_batches_build_each_column_at_its_stage_with_its_history() -> None:
    s = PyramidSchedule(3)
    n, t = 10, 4
    # clip i is the constant i / n in every frame: its history frames show which clip was drawn
    clips = (torch.arange(n, dtype=torch.float32) / n).view(n, 1, 1, 1, 1).expand(n, t, 1, 16, 16).contiguous()
    labels = torch.arange(n)
    draw = pyramid_batches(clips, labels, s, [2, 2, 3], [0, 1, 2], corrupt_ratio=0.0, label_dropout=0.0, null_label=10)
    groups = draw(1, torch.Generator().manual_seed(0))  # unit_lengths(1, 4, 3) == [4, 4, 1]
    assert [g["stage"] for g in groups] == [0, 1, 2]
    assert [g["x0"].shape for g in groups] == [(2, 1, 4, 4), (2, 1, 8, 8), (3, 1, 16, 16)]
    assert [g["x1"].shape == g["x0"].shape and g["t"].shape == (g["x0"].shape[0],) for g in groups] == [True] * 3
    assert [[h.shape[-1] for h in g["history"]] for g in groups] == [[4, 4, 4], [4, 4, 8], []]
    for g in groups[:2]:  # uncorrupted history = the drawn clip's (constant) frames at their levels
        for h in g["history"]:
            torch.testing.assert_close(h, (g["labels"].float() / n).view(-1, 1, 1, 1).expand_as(h))
    assert torch.equal(groups[2]["x1"], (groups[2]["labels"].float() / n).view(-1, 1, 1, 1).expand(3, 1, 16, 16))
    again = draw(1, torch.Generator().manual_seed(0))
    assert all(torch.equal(a["x0"], b["x0"]) for a, b in zip(groups, again))
    dropped = pyramid_batches(clips, labels, s, [2, 2, 3], [0, 1, 2], label_dropout=1.0, null_label=10)
    assert all(
        torch.equal(g["labels"], torch.full_like(g["labels"], 10)) for g in dropped(2, torch.Generator().manual_seed(0))
    )


def test_pyramid_loss_is_the_sample_weighted_mean_of_the_column_losses() -> None:
    s = PyramidSchedule(3)
    clips, labels = torch.randn(6, 2, 1, 16, 16), torch.arange(6) % 3
    groups = pyramid_batches(clips, labels, s, [1, 2, 3], [0, 1, 2])(1, torch.Generator().manual_seed(1))

    class Zero(torch.nn.Module):
        def forward(self, x, tau, *, history=(), stage=0, labels=None):
            return torch.zeros_like(x)

    expected = sum(g["x0"].shape[0] * (g["x1"] - g["x0"]).pow(2).mean() for g in groups) / 6
    torch.testing.assert_close(pyramid_loss(s)(Zero(), groups), expected)


def test_guided_velocity_is_the_conditional_model_or_its_cfg_combination() -> None:
    calls = []

    def model(x, tau, *, history, stage, labels):
        calls.append((x.shape[0], len(history), stage))
        return torch.zeros_like(x) + labels.float().view(-1, 1, 1, 1)

    labels, x, hist = torch.tensor([2, 7]), torch.zeros(2, 1, 4, 4), [torch.zeros(2, 1, 2, 2)]
    plain = guided_velocity(model, labels)(x, torch.rand(2), 1, hist)
    assert torch.equal(plain[:, 0, 0, 0], torch.tensor([2.0, 7.0])) and calls[-1] == (2, 1, 1)
    guided = guided_velocity(model, labels, guidance=3.0, null_label=10)(x, torch.rand(2), 2, hist)
    # u + w (c - u) with u = 10: 10 + 3 (2 - 10) = -14 and 10 + 3 (7 - 10) = 1, in one call of batch 4
    assert torch.equal(guided[:, 0, 0, 0], torch.tensor([-14.0, 1.0])) and calls[-1] == (4, 1, 2)


# ---- compute: tokens and FLOPs against hand counts ------------------------------------------------------
def _tokens(layout) -> int:  # a "model" whose forward costs one FLOP per token
    return sum(layout)


PYRAMID = ComputeCounter(PyramidSchedule(3), 16, 2, 4, _tokens, (1, 1, 1), (0, 1, 2), "compressed", 3)
FULL = ComputeCounter(PyramidSchedule(1), 16, 2, 4, _tokens, (1, 1, 1), (0, 0, 0), "full", 3)


def test_step_costs_by_hand() -> None:
    # step 1: frames per column [4, 4, 1]; stage 0: 4 x 4 tokens; stage 1: history at levels 0, 0, 1 -> 4+4+16
    # and the frame 16; stage 2: one 8x8-patch frame 64
    assert PYRAMID.step(1) == Cost(tokens=16 + 40 + 64, newest_tokens=4 + 16 + 64, flops=3 * 120)
    assert FULL.step(1) == Cost(tokens=9 * 64, newest_tokens=3 * 64, flops=3 * 9 * 64)
    for step in range(1, 9):  # the generated frames alone: (1 + 1/4 + 1/16) / 3 of the tokens, every step
        assert PYRAMID.step(step).newest_tokens / FULL.step(step).newest_tokens == pytest.approx(0.4375)
    assert PYRAMID.step(5) == PYRAMID.step(1)
    with pytest.raises(ValueError, match="1-based"):
        PYRAMID.step(0)


def test_totals_repeat_every_cycle_of_frames() -> None:
    assert FULL.total(4).tokens == 1920 and PYRAMID.total(4).tokens == 648  # one cycle of unit lengths
    assert PYRAMID.total(0) == Cost(0, 0, 0)
    six = [PYRAMID.step(s) for s in range(1, 7)]
    assert PYRAMID.total(6) == Cost(*(sum(c[i] for c in six) for i in range(3)))
    assert FULL.total(4002).flops == 1000 * FULL.total(4).flops + FULL.step(1).flops + FULL.step(2).flops


def test_closest_step_is_the_first_minimiser_of_the_flop_gap() -> None:
    target = PYRAMID.total(10).flops
    gaps = [abs(FULL.total(s).flops - target) for s in range(1, 11)]
    assert FULL.closest_step(target, 10) == 1 + gaps.index(min(gaps))
    assert FULL.closest_step(FULL.total(3).flops, 10) == 3
    assert FULL.closest_step(1e30, 10) == 10 and FULL.closest_step(0, 10) == 1
    midpoint = (FULL.total(2).flops + FULL.total(3).flops) / 2
    assert FULL.closest_step(midpoint, 10) == 2  # a tie goes to the smaller step


def test_sampling_flops_by_hand() -> None:
    two = ComputeCounter(PyramidSchedule(3), 16, 2, 2, _tokens, (1, 1, 1), (0, 1, 2))
    # frame 1: 4 + 16 + 64; frame 2 (one history frame, one level below the stage, >= 0): 8 + 32 + 128
    assert two.sampling_flops([1, 1, 1]) == 252
    assert two.sampling_flops([1, 1, 1], calls_per_step=2) == 504
    assert two.sampling_flops([2, 1, 1]) == 252 + 4 + 8
    # the first frame (84 per step set) with its own steps and calls: 2 x (2 x 84) + 168
    assert two.sampling_flops([1, 1, 1], 1, first_frame_steps=[2, 2, 2], first_frame_calls=2) == 4 * 84 + 168
    assert two.sampling_flops([1, 1, 1], 2, first_frame_steps=[1, 1, 1]) == 504
    with pytest.raises(ValueError, match="one step count per stage"):
        two.sampling_flops([1, 1])


def test_training_flops_with_the_dit_count_match_an_independent_loop() -> None:
    cfg = DiTConfig(d_model=16, n_heads=2, n_layers=1)
    counter = ComputeCounter(PyramidSchedule(3), 16, 2, 4, functools.partial(forward_flops, cfg), (2, 2, 3), (0, 1, 2))

    def layout(n_frames: int, stage: int) -> list[int]:
        levels = [max(stage - lag + 1, 0) for lag in range(n_frames - 1, 0, -1)] + [stage]
        return [(16 // 2 ** (2 - level) // 2) ** 2 for level in levels]

    flops = 0
    for step in range(1, 8):
        high = 1 + (step - 1) % 4
        for size, stage, n_frames in zip((2, 2, 3), (0, 1, 2), (5 - high, 5 - high, high)):
            flops += size * 3 * forward_flops(cfg, layout(n_frames, stage))
    assert counter.total(7).flops == flops
