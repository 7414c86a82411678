"""KnOTS with the user's own peft LoRA adapters (``lora.adapters_path``): read in place of training and merged,
each run's LoRAs written as peft folders, and adapters that disagree refused by the data check (the CLI's refusals
of malformed folders: rows of tests/reliability/test_bad_inputs.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from components.io import load_json, load_table, load_tensors
from components.models.lora import LoraSpec, apply_deltas, attach_lora, load_factors
from components.models.peft_io import load_peft_adapter
from paperflows.contract import StageContext
from paperflows.engine import run_stage
from paperflows.params import ParamsError, check_data_files
from pipelines.knots.params import KnotsParams
from pipelines.knots.pipeline import BASE_FILE, PIPELINE
from pipelines.knots.tasks import make_encoder
from tests.pipelines.knots.test_pipeline import TINY

TASKS = TINY["data"]["tasks"]
SPEC = LoraSpec(r=2, alpha=4.0, targets=("q_proj", "v_proj"))  # not the pipeline's own r / alpha / targets


def write_adapters(folder: Path, encoder: nn.Module, tasks=TASKS) -> Path:
    """One peft adapter per task, saved by peft itself, with non-zero B (as after training)."""
    for n, task in enumerate(tasks):
        model = attach_lora(encoder, SPEC, seed=n)
        g = torch.Generator().manual_seed(10 + n)
        with torch.no_grad():
            for name, param in model.named_parameters():
                if "lora_B" in name:
                    param.copy_(0.05 * torch.randn(param.shape, generator=g))
        model.save_pretrained(str(folder / task))
    return folder


def _params(**lora) -> KnotsParams:
    return KnotsParams.model_validate({**TINY, "lora": {**TINY["lora"], **lora}})


def _run(params: KnotsParams, project: Path, names: tuple[str, ...]) -> Path:
    root = project / "out"
    for name in names:
        stage = PIPELINE.stage(name)
        run_stage(
            StageContext(pipeline=PIPELINE, stage=stage, params=params, root=root, progress=False, project=project)
        )
    return root


def test_user_adapters_replace_training_and_are_merged(project: Path) -> None:
    root = _run(_params(), project, ("prepare", "pretrain"))
    encoder = make_encoder(_params())
    encoder.load_state_dict(load_tensors(root / BASE_FILE))
    write_adapters(project / "mine", encoder.eval())
    params = _params(adapters_path="mine")
    checked = check_data_files(params, project, "knots")["lora.adapters_path"]
    assert checked.path == project / "mine" and set(checked.summary) == set(TASKS)
    _run(params, project, ("finetune", "merge", "report"))
    notes = load_json(root / "report.json")["notes"]
    assert any("peft folders under mine" in n for n in notes), notes  # the report says whose adapters it merged
    assert not any(n.startswith("Scale: this run uses") for n in notes), notes
    for task in TASKS:
        user = load_peft_adapter(project / "mine" / task)
        assert {f.scale for f in user.values()} == {2.0} and len(user) == 2 * 2  # q/v of 2 blocks
        for kept in (
            load_factors(root / "models" / "lora" / task / "seed0.safetensors"),
            load_peft_adapter(root / "models" / "lora" / task / "peft" / "seed0", encoder),
        ):
            assert set(kept) == set(user)
            assert all(torch.equal(kept[m].B, user[m].B) and kept[m].scale == 2.0 for m in user)
        assert set(load_json(root / "models" / "lora" / task / "single_task.json")) == {
            "seed0/val",
            "seed0/test",
            "seed0/zero_shot_test",
        }
    rows = load_table(root / "tables" / "merge_test.parquet")
    assert {r["method"] for r in rows} == set(params.merge.methods)
    assert load_json(root / "metrics" / "merge.json")["knots_ta/avg_norm_acc"] > 0


def test_trained_loras_are_written_as_peft_folders_that_peft_loads(project: Path) -> None:
    from peft import PeftModel

    params = _params(steps=3, head_steps=2)
    root = _run(params, project, ("prepare", "pretrain", "finetune"))
    encoder = make_encoder(params)
    encoder.load_state_dict(load_tensors(root / BASE_FILE))
    folder = root / "models" / "lora" / "digits" / "peft" / "seed0"
    ours = load_factors(root / "models" / "lora" / "digits" / "seed0.safetensors")
    merged = apply_deltas(encoder.eval(), {name: f.delta() for name, f in ours.items()})
    loaded = PeftModel.from_pretrained(encoder, str(folder)).eval()  # peft wraps (and changes) encoder: last
    x = torch.rand(3, 28, 28)
    with torch.no_grad():
        torch.testing.assert_close(loaded(x), merged(x), atol=1e-5, rtol=1e-5)


def test_adapters_that_disagree_are_refused(tmp_path: Path) -> None:
    encoder = make_encoder(KnotsParams())
    write_adapters(tmp_path / "mine", encoder, tasks=["animal"])
    attach_lora(encoder, LoraSpec(r=2, alpha=4.0, targets=("q_proj",)), seed=0).save_pretrained(
        str(tmp_path / "mine" / "digits")
    )
    with pytest.raises(ParamsError, match=r"knots\.lora\.adapters_path: digits/ adapts"):
        check_data_files(_params(adapters_path="mine"), tmp_path, "knots")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ParamsError, match=r"knots\.lora\.adapters_path: .* no task subfolder"):
        check_data_files(_params(adapters_path="empty"), tmp_path, "knots")
