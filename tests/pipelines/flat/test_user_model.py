"""FLAT with the user's own causal LM (``model.name_or_path``): accepted as a checkpoint folder (its refusal, when
it is neither a folder nor a cached Hugging Face id, is a row of tests/reliability/test_bad_inputs.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from paperflows.params import ParamsError, validate
from pipelines.flat.params import FlatParams
from pipelines.flat.report import lm_label
from pipelines.flat.training import adapter_meta
from tests.components.llm.test_llm_user_model import write_tiny_checkpoint
from tests.conftest import REPO


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("flat-user-lm")
    (root / "params.yaml").write_text((REPO / "params.yaml").read_text())
    write_tiny_checkpoint(root / "checkpoints" / "my-llama")
    return root


def paperflows(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PAPERFLOWS_ROOT": str(root),
        "MLFLOW_TRACKING_URI": f"sqlite:///{root / 'mlflow.db'}",
        "PREFECT_HOME": str(root / "prefect-home"),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
    }
    return subprocess.run(
        [sys.executable, "-m", "paperflows", *args], cwd=root, env=env, capture_output=True, text=True, timeout=600
    )


def test_name_or_path_is_validated_and_overrides_lm(project: Path) -> None:
    default = FlatParams()
    assert default.model.name_or_path is None and default.model.lm_used == "smollm2-135m"
    assert lm_label(default.model) == "SmolLM2-135M-Instruct"
    chosen = validate(FlatParams, {"model": {"name_or_path": "./checkpoints/my-llama"}}, "flat")
    assert chosen.model.lm_used == "./checkpoints/my-llama"
    assert adapter_meta(chosen.model, "original")["base_model"] == "./checkpoints/my-llama"
    assert "./checkpoints/my-llama" in lm_label(chosen.model)
    assert validate(FlatParams, {"model": {"name_or_path": ""}}, "flat").model.name_or_path is None
    for bad in ("gpt2", "bad\x01/name"):  # a bare word (write ./gpt2 for a folder) and control characters
        with pytest.raises(ParamsError, match=r"flat\.model\.name_or_path"):
            validate(FlatParams, {"model": {"name_or_path": bad}}, "flat")
    missing = validate(FlatParams, {"model": {"name_or_path": "someone/not-cached-anywhere"}}, "flat")
    (problem,) = missing.environment_problems()
    assert problem.startswith("model.name_or_path: ") and "not in the local Hugging Face cache" in problem
    assert missing.environment_problems(("data",)) == []  # a stage that does not load the LM is not held up


def test_cli_accepts_a_checkpoint_folder(project: Path) -> None:
    # a missing folder is refused: tests/reliability/test_bad_inputs.py (PAPERS)
    shown = paperflows(project, "run", "flat", "--show", "--set", "model.name_or_path=./checkpoints/my-llama")
    assert shown.returncode == 0, shown.stderr
    assert "./checkpoints/my-llama" in shown.stdout
    assert not (project / "runs").exists() and not (project / ".paperflows" / "flat").exists()
