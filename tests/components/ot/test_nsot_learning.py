"""What NSOT's headline needs from its learned part: a flow trained on superset-OT pairs generates better clouds in
one Euler step than the same flow trained on independent pairs (same network, data, batches and steps)."""

from __future__ import annotations

import torch

from components.data.shapes import sample_shapes
from components.generative import couple, pair_loss, sample, sample_time
from components.metrics.pointcloud import pairwise_chamfer
from components.models.point_transformer import PointTransformer, PointTransformerConfig
from components.ot import precompute_superset_ot, subsample_pairs
from components.training import TrainConfig, fit

N_POINTS, STEPS = 16, 150


def _train(coupling: str, x0_sup: torch.Tensor, x1_sup: torch.Tensor) -> PointTransformer:
    torch.manual_seed(0)
    model = PointTransformer(PointTransformerConfig(d_model=32, n_layers=1, n_heads=2))

    def batches(step: int, gen: torch.Generator) -> tuple[torch.Tensor, ...]:
        shapes = torch.randint(0, x1_sup.shape[0], (16,), generator=gen)
        x0, x1 = subsample_pairs(x0_sup, x1_sup, shapes, N_POINTS, gen)  # OT pairs at one random index subset
        if coupling == "independent":  # the same points, paired with fresh noise
            x0, x1 = couple("independent", torch.randn(x1.shape, generator=gen), x1, gen)
        return x0, x1, sample_time(x0.shape[0], gen)

    fit(model, pair_loss, batches, TrainConfig(steps=STEPS, lr=3e-3, seed=0, progress=False, device="cpu"))
    return model.eval()


def test_a_flow_on_superset_ot_pairs_beats_independent_pairs_at_one_euler_step() -> None:
    x0_sup, x1_sup, _ = precompute_superset_ot(sample_shapes("ellipsoid", 32, 4 * N_POINTS, seed=0), seed=1)
    test = sample_shapes("ellipsoid", 32, N_POINTS, seed=2)
    noise = torch.randn(32, N_POINTS, 3, generator=torch.Generator().manual_seed(3))
    real = sample_shapes("ellipsoid", 32, N_POINTS, seed=4)  # other shapes of the family: the floor of the score
    floor, untrained = (pairwise_chamfer(x, test).min(1).values.mean() for x in (real, noise))
    assert untrained > 1.3 * floor
    scores = {}
    for coupling in ("independent", "nsot"):
        model = _train(coupling, x0_sup, x1_sup)
        with torch.no_grad():
            clouds = sample(model, noise, 1, "euler").x
        scores[coupling] = pairwise_chamfer(clouds, test).min(1).values.mean()  # distance to the nearest test cloud
    assert scores["nsot"] < 1.15 * floor  # one step lands as close to the test shapes as real shapes are
    assert scores["nsot"] < 0.7 * scores["independent"]  # straight pairs: one Euler step suffices
