"""MTSAM: parameter rules, the NYUv2 path read in place of the rendered scenes, the per-task LoRAs of the baseline
merged by KnOTS, and one tiny Prefect flow (the NYUv2 folder checked before any work: rows of
tests/reliability/test_bad_inputs.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from components.io import load_json, load_table, load_tensors
from components.merging import MergeConfig, knots_merge, original_space
from components.models.lora import apply_deltas, group_factors_by_layer, load_factors
from components.models.multitask_dense import TASKS
from components.models.pretrained_vit import ViTS14
from paperflows.contract import StageContext
from paperflows.engine import run_stage
from paperflows.params import ParamsError, validate
from pipelines.mtsam.params import MtsamParams
from pipelines.mtsam.pipeline import PIPELINE, _dense_model
from tests.components.data.test_nyuv2 import write_nyuv2

TINY: dict[str, Any] = {
    "seeds": [0, 1],
    "data": {"n_train": 12, "n_test": 6, "label_size": 12},
    "model": {"encoder": "tiny", "input_size": 28, "decoder_dim": 16, "decoder_mlp": 16},
    "train": {"steps": 3, "batch_size": 2, "examples": 2},
}


def _run(params: MtsamParams, project: Path, names: tuple[str, ...]) -> Path:
    root = project / "out"
    for name in names:
        run_stage(
            StageContext(
                pipeline=PIPELINE, stage=PIPELINE.stage(name), params=params, root=root, progress=False, project=project
            )
        )
    return root


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ({"train": {"methods": ["tora", "tora"], "baseline": "tora"}}, "methods repeat"),
        ({"train": {"methods": ["tora", "decoders"]}}, "baseline 'lora_per_task' must be one of methods"),
        ({"train": {"methods": ["adapter"]}}, "mtsam.train.methods"),
        ({"model": {"decoder_dim": 24, "decoder_heads": 5}}, "decoder_heads (5) must divide decoder_dim (24)"),
        ({"model": {"encoder": "tiny", "adapt_blocks": 3}}, "the tiny encoder has 2 blocks"),
        ({"model": {"input_size": 50}}, "mtsam.model.input_size"),
    ],
)
def test_bad_params_name_the_key(section: dict[str, Any], message: str) -> None:
    with pytest.raises(ParamsError, match=message.replace("(", r"\(").replace(")", r"\)")):
        validate(MtsamParams, section, "mtsam")


def test_paper_scale() -> None:
    paper = MtsamParams(scale="paper")
    assert (paper.tora.r1, paper.tora.r2, paper.tora.r3, paper.tora.lam) == (32, 32, 4, 1.0)
    assert paper.model.adapt_blocks == 12 and paper.model.decoder_dim == 256 and paper.train.baseline == "finetune"
    assert paper.train.steps == 39_600 and paper.train.warmup_steps == 1_980
    assert paper.train.methods == ["decoders", "finetune", "lora_per_task", "lora_shared", "tora"]
    assert PIPELINE.items(PIPELINE.stage("train"), MtsamParams()) == [
        "decoders",
        "lora_per_task",
        "lora_shared",
        "tora",
    ]


def test_nyuv2_is_read_in_place_of_the_rendered_scenes(project: Path) -> None:
    write_nyuv2(project / "nyu", {"train": 4, "val": 3}, h=8, w=12)
    params = MtsamParams.model_validate(
        {**TINY, "data": {"nyuv2_path": "nyu", "n_train": 8, "n_test": 5, "nyuv2_label_stride": 2}}
    )
    root = _run(params, project, ("scenes",))
    data = load_tensors(root / "data" / "scenes.safetensors")
    assert data["train/image"].shape == (4, 3, 28, 28) and data["test/image"].shape == (3, 3, 28, 28)
    assert data["train/label"].shape == (4, 4, 6) and data["test/normal"].shape == (3, 3, 4, 6)
    label = np.load(project / "nyu" / "train" / "label" / "1.npy")[1::2, 1::2]
    assert torch.equal(data["train/label"][1], torch.from_numpy(label).long())
    stats = load_json(root / "metrics" / "scenes.json")
    assert stats["source"] == "nyuv2" and stats["label_size"] == [4, 6] and "train/class_share/12" in stats


def test_the_per_task_loras_of_the_baseline_merge_with_knots(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """KnOTS accepts the per-task adapters mtsam produces: the three single-task LoRAs of one seed are merged
    (KnOTS-TIES and KnOTS-TA), KnOTS-TA equals plain task arithmetic, and the merged tail runs. Training reads
    the frozen prefix from the encode stage's cache: the encoder's prefix never runs in the train stage."""
    params = MtsamParams.model_validate(
        {**TINY, "seeds": [0], "train": {**TINY["train"], "methods": ["lora_per_task"]}}
    )
    _run(params, project, ("scenes", "encode"))

    def no_encoder(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the train stage ran the frozen encoder")

    monkeypatch.setattr(ViTS14, "hidden", no_encoder)
    root = _run(params, project, ("train",))
    folder = root / "methods" / "lora_per_task"
    per_task = [load_factors(folder / f"seed0_{task}_lora.safetensors") for task in TASKS]
    layer_factors, scale = group_factors_by_layer(per_task)
    assert sorted(layer_factors) == [f"blocks.0.attn.{n}" for n in ("k_proj", "q_proj", "v_proj")]
    ta = knots_merge(layer_factors, "ta", MergeConfig(lam=1.0, merge="sum"), scale=scale)
    plain = original_space(layer_factors, scale).merge("ta", MergeConfig(lam=1.0, merge="sum"))
    for name, dw in ta.items():
        torch.testing.assert_close(dw, plain[name], rtol=1e-5, atol=1e-7)
        assert float(dw.abs().max()) > 0  # three steps moved the LoRAs
    ties = knots_merge(layer_factors, "ties", MergeConfig(lam=1.0, top_k=20.0), scale=scale)
    ctx = StageContext(pipeline=PIPELINE, stage=PIPELINE.stage("train"), params=params, root=root, project=project)
    model = apply_deltas(_dense_model(ctx, seed=0), ties).eval()
    h = load_tensors(root / "data" / "prefix.safetensors")["test/prefix"]
    with torch.no_grad():
        assert torch.isfinite(model.decode(model.tokens(h), "seg")).all()


def test_flow_smoke(project: Path, run_flow_and_check) -> None:
    params = MtsamParams.model_validate({**TINY, "train": {**TINY["train"], "methods": ["lora_per_task", "tora"]}})
    report = run_flow_and_check(PIPELINE, params, project)
    root = next((project / "runs" / "mtsam").iterdir())
    assert [r["method"] for r in report["rows"]] == ["LoRA per task [single-task baseline]", "ToRA (MTSAM)"]
    assert [c["id"] for c in report["claims"]] == ["tora_beats_lora_per_task"]
    checks = {c["id"]: c["passed"] for c in report["checks"]}
    assert checks == {
        "tora_init_equals_frozen": True,
        "tora_parameter_formula": True,
        "tora_fewer_adapter_params": True,
    }
    scores = load_table(root / "tables" / "scores.parquet")
    assert len(scores) == 4 and {r["method"] for r in scores} == set(params.train.methods)
    assert all(r["init_max_abs_diff"] == 0.0 for r in scores if r["method"] == "tora")
    for name in ("training_curves.png", "example_predictions.png", "delta_m.png", "training_curves.csv"):
        assert (root / "plots" / name).is_file()
    assert (root / "methods" / "tora" / "seed1_seg+depth+normal.safetensors").is_file()
