"""Registered models are MLflow pyfunc models: ``mlflow.pyfunc.load_model("models:/<slug>-<role>/<version>")``
rebuilds the stage's torch module and predicts what it predicts, with a signature and an input example (from the
first Linear, or the shape the stage declared); weights that make no example are still logged, and say why."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import mlflow
import numpy as np
import pandas as pd
import pytest
import torch
from mlflow import MlflowClient
from pydantic import Field

from components.io import save_model, save_tensors
from paperflows.contract import Pipeline, StageContext, stage
from paperflows.engine import execute
from paperflows.paper import Paper
from paperflows.params import PipelineParams, Section
from paperflows.pyfunc import build_module
from paperflows.report import Report
from paperflows.settings import Settings
from paperflows.tracking import MlflowTracker


class TinyModel(Section):
    width: int = Field(5, ge=1, le=64, description="input features")


class TinyParams(PipelineParams):
    model: TinyModel = Field(default_factory=TinyModel, description="model")


@dataclass
class MlpConfig:
    width: int
    hidden: int = 7
    classes: int = 3


class Mlp(torch.nn.Module):
    def __init__(self, cfg: MlpConfig, seed: int = 0) -> None:
        super().__init__()
        self.cfg = cfg
        torch.manual_seed(seed)
        self.net = torch.nn.Sequential(
            torch.nn.Linear(cfg.width, cfg.hidden), torch.nn.Tanh(), torch.nn.Linear(cfg.hidden, cfg.classes)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x).softmax(-1)


@dataclass
class ImageConfig:
    side: int


class ImageScorer(torch.nn.Module):
    """Reads (batch, 1, side, side) images: its first layer is a convolution, so the stage declares the shape."""

    def __init__(self, cfg: ImageConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.conv = torch.nn.Conv2d(1, 2, 3, padding=1)
        self.head = torch.nn.Linear(2 * cfg.side * cfg.side, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.conv(x).flatten(1))


@stage(
    params=("seeds", "model"),
    outs=("models/mlp/", "models/image/", "models/adapter/"),
    models={"mlp": "models/mlp/", "image": "models/image/", "adapter": "models/adapter/"},
)
def train(ctx: StageContext) -> None:
    """One MLP per seed; an image model with its declared input shape; bare tensors (no module to rebuild)."""
    for seed in ctx.params.seeds:
        save_model(Mlp(MlpConfig(ctx.params.model.width), seed), ctx.path("models/mlp/") / f"mlp_s{seed}.safetensors")
    save_model(
        ImageScorer(ImageConfig(4)),
        ctx.path("models/image/") / "scorer.safetensors",
        {"model.input_shape": "[1, 4, 4]"},
    )
    save_tensors({"lora_a": torch.ones(2, 3)}, ctx.path("models/adapter/") / "adapter.safetensors")


@stage("report", params=("seeds",), deps=("models/mlp/",), outs=("report.json",))
def tiny_report(ctx: StageContext) -> None:
    """A one-row report."""
    Report(slug="tinyfunc", title="Tiny pyfunc", columns=["method"], rows=[{"method": "mlp"}], claims=[]).save(
        ctx.path("report.json")
    )


def tiny_pipeline() -> Pipeline:
    return Pipeline(
        paper=Paper("tinyfunc", "Tiny pyfunc", "", "models load"), params_model=TinyParams, stages=(train, tiny_report)
    )


@pytest.fixture()
def settings(tmp_path: Path) -> Settings:
    (tmp_path / "params.yaml").write_text("tinyfunc:\n  seeds: [0, 1]\n  model:\n    width: 5\n")
    return Settings(
        root=tmp_path,
        tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}",
        artifact_root=tmp_path / "mlruns",
        prefect_home=tmp_path / "prefect",
    )


@pytest.fixture()
def registry(settings: Settings):
    """What a reader does: point MLflow at the store (put back afterwards)."""
    before = mlflow.get_tracking_uri()
    yield lambda: mlflow.set_tracking_uri(settings.tracking_uri)
    mlflow.set_tracking_uri(before)


def test_registered_models_load_as_pyfunc_and_predict_like_the_module(settings: Settings, registry) -> None:
    tracker = MlflowTracker(settings, "tinyfunc")
    params = TinyParams.model_validate({"seeds": [0, 1], "model": {"width": 5}})
    out = settings.runs("tinyfunc") / "r1"
    started = time.perf_counter()
    summary = execute(tiny_pipeline(), params, settings, out, entry="test", tracker=tracker)
    assert time.perf_counter() - started < 60
    client = MlflowClient(settings.tracking_uri)
    parent = client.get_run(summary.run_id)
    assert parent.data.tags["paperflows.models"] == "tinyfunc-mlp/1, tinyfunc-image/1, tinyfunc-adapter/1"
    assert mlflow.get_tracking_uri() != settings.tracking_uri  # the tracker's URI was set for the call only
    registry()

    # the MLP: first Linear -> rows of 5 floats; the first file in name order (seed 0) is the one that runs
    [version] = client.search_model_versions("name = 'tinyfunc-mlp'")
    assert version.run_id == summary.run_id and version.source.startswith("models:/m-")
    assert version.tags["paperflows.input_example"] == "shape [5] (first Linear)"
    assert version.tags["paperflows.weights"] == "mlp_s0.safetensors" and version.tags["paperflows.stage"] == "train"
    logged = client.get_logged_model(version.source.removeprefix("models:/"))
    assert logged.source_run_id == summary.run_id and logged.experiment_id == tracker.experiment_id
    model = mlflow.pyfunc.load_model(f"models:/tinyfunc-mlp/{version.version}")
    info = model.metadata
    assert info.signature is not None and info.saved_input_example_info is not None
    assert info.signature.inputs.to_dict()[0]["tensor-spec"]["shape"] == (-1, 5)
    example = info.load_input_example(mlflow.artifacts.download_artifacts(f"models:/tinyfunc-mlp/{version.version}"))
    assert example.shape == (2, 5)
    x = np.random.default_rng(1).standard_normal((6, 5)).astype(np.float32)
    module = Mlp(MlpConfig(5), seed=0).eval()
    with torch.no_grad():
        expected = module(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(model.predict(x), expected, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(model.predict(pd.DataFrame(x)), expected, rtol=1e-6, atol=1e-7)
    # the same weights as the run folder's, rebuilt from the file alone; another seed on request
    rebuilt = build_module(out / "models/mlp/mlp_s1.safetensors")
    seed1 = mlflow.pyfunc.load_model(
        f"models:/tinyfunc-mlp/{version.version}", model_config={"weights": "mlp_s1.safetensors"}
    )
    with torch.no_grad():
        np.testing.assert_allclose(seed1.predict(x), rebuilt(torch.from_numpy(x)).numpy(), rtol=1e-6, atol=1e-7)

    # the image model: the shape the stage declared in the weights' metadata; flat table rows are reshaped
    image = mlflow.pyfunc.load_model("models:/tinyfunc-image/1")
    assert image.metadata.signature.inputs.to_dict()[0]["tensor-spec"]["shape"] == (-1, 1, 4, 4)
    [image_version] = client.search_model_versions("name = 'tinyfunc-image'")
    assert image_version.tags["paperflows.input_example"] == "shape [1, 4, 4] (declared)"
    pictures = np.random.default_rng(2).standard_normal((3, 1, 4, 4)).astype(np.float32)
    scorer = build_module(out / "models/image/scorer.safetensors")
    with torch.no_grad():
        expected = scorer(torch.from_numpy(pictures)).numpy()
    np.testing.assert_allclose(image.predict(pictures), expected, rtol=1e-6, atol=1e-6)

    # bare tensors: still a loadable pyfunc, without example nor signature, and the tag says why
    [adapter_version] = client.search_model_versions("name = 'tinyfunc-adapter'")
    assert adapter_version.tags["paperflows.input_example"].startswith("none: no file rebuilds a module")
    adapter = mlflow.pyfunc.load_model("models:/tinyfunc-adapter/1")
    assert adapter.metadata.signature is None and adapter.metadata.saved_input_example_info is None
    with pytest.raises(Exception, match="do not rebuild a torch module"):
        adapter.predict(np.zeros((1, 3), dtype=np.float32))
    # the folder (weights + config.json) is in the model's artifacts
    folder = Path(mlflow.artifacts.download_artifacts("models:/tinyfunc-mlp/1", dst_path=str(settings.root / "dl")))
    assert sorted(p.name for p in (folder / "artifacts" / "mlp").iterdir()) == [
        "config.json",
        "mlp_s0.safetensors",
        "mlp_s1.safetensors",
    ]
