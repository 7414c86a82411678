"""`load_lm` with the user's own causal LM: a checkpoint folder or a Hugging Face id in the local cache, offline."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from components.llm import LM_NAMES, lm_source_problem, load_lm, resolve_lm_source
from components.llm._tiny import build_tiny_model, build_tiny_tokenizer


def write_tiny_checkpoint(folder: Path, *, seed: int = 0) -> Path:
    """The packaged tiny model (a random Llama with its byte tokenizer), saved as a transformers checkpoint."""
    tokenizer = build_tiny_tokenizer()
    build_tiny_model(len(tokenizer), seed).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_checkpoint(tmp_path_factory.mktemp("user-lm") / "my-llama")


def fake_hub_cache(cache: Path, repo_id: str, checkpoint: Path) -> Path:
    """The Hugging Face cache layout (models--org--name/refs/main + snapshots/<commit>/) holding ``checkpoint``."""
    repo = cache / f"models--{repo_id.replace('/', '--')}"
    commit = "0" * 40
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    shutil.copytree(checkpoint, repo / "snapshots" / commit)
    return cache


def test_a_checkpoint_folder_loads_generates_and_scores(checkpoint: Path) -> None:
    lm = load_lm(str(checkpoint), seed=0, log=lambda _: None)
    assert lm.name == str(checkpoint.resolve()) and not lm.model.training
    assert lm.model.config.num_hidden_layers == 2 and lm.model.dtype == torch.float32
    prompt = lm.chat([{"role": "user", "content": "Hi"}])
    texts = lm.generate([prompt, "abc"], max_new_tokens=4)
    assert len(texts) == 2 and all(isinstance(t, str) for t in texts)
    scores = lm.logprobs(["The sky is"], [" blue"])
    assert len(scores) == 1 and float(scores[0]) < 0
    # a relative path is taken from root; bf16 casts the weights as for the packaged models
    again = load_lm(checkpoint.name, root=checkpoint.parent, precision="bf16", log=lambda _: None)
    assert again.model.dtype == torch.bfloat16 and again.name == lm.name


def test_a_cached_hub_id_loads_from_the_local_cache_only(checkpoint: Path, tmp_path: Path) -> None:
    cache = fake_hub_cache(tmp_path / "hub", "someone/my-llama", checkpoint)
    source = resolve_lm_source("someone/my-llama", hub_cache=cache)
    assert source.kind == "hub" and source.folder is not None and (source.folder / "config.json").is_file()
    lm = load_lm("someone/my-llama", hub_cache=cache, log=lambda _: None)
    assert lm.name == "someone/my-llama" and lm.generate(["x"], max_new_tokens=2)[0] is not None


def test_packaged_names_stay_the_defaults() -> None:
    assert LM_NAMES == ("smollm2-135m", "tiny")
    assert resolve_lm_source("tiny").kind == "packaged" and load_lm("tiny").name == "tiny"


def test_missing_folders_unknown_ids_and_non_checkpoints_are_refused(tmp_path: Path, checkpoint: Path) -> None:
    with pytest.raises(
        ValueError, match=r"'nope/not-here'.*not in the local Hugging Face cache; nothing is downloaded"
    ):
        load_lm("nope/not-here", hub_cache=tmp_path / "empty-cache")
    missing = str(tmp_path / "no" / "such" / "folder")
    with pytest.raises(ValueError, match="no folder at .*not in the local Hugging Face cache"):
        load_lm(missing)
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "holds no config.json" in lm_source_problem(str(empty))
    no_weights = tmp_path / "no-weights"
    shutil.copytree(checkpoint, no_weights, ignore=shutil.ignore_patterns("*.safetensors"))
    assert "holds no weights" in lm_source_problem(str(no_weights))
    encoder = tmp_path / "encoder"
    encoder.mkdir()
    (encoder / "config.json").write_text('{"model_type": "bert-no-such"}')
    assert "is not a causal LM" in lm_source_problem(str(encoder))
    assert lm_source_problem(str(checkpoint), need_chat=True) is None
    assert lm_source_problem("tiny") is None
