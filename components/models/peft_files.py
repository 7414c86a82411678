"""peft LoRA adapter folders read without torch: the checked ``adapter_config.json`` and each factor's shape from
the ``adapter_model.safetensors`` header (what a data-file check needs before any work; :mod:`.peft_io` loads
the tensors themselves).

The safetensors header is an 8-byte little-endian length followed by that many bytes of JSON: ``{name: {"dtype",
"shape", "data_offsets"}, "__metadata__": {...}}``; both are bounded before they are read.
"""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path

CONFIG_FILE = "adapter_config.json"
WEIGHTS_FILE = "adapter_model.safetensors"
PICKLED_WEIGHTS_FILE = "adapter_model.bin"
PREFIX = "base_model.model."
_KEY = re.compile(r"^base_model\.model\.(?P<module>.+)\.lora_(?P<part>[AB])\.weight$")
MAX_CONFIG_BYTES = 1 << 20  # an adapter_config.json is a few kB
MAX_HEADER_BYTES = 16 << 20  # a safetensors header lists names and shapes: far below this
MAX_RANK = 65_536
# config fields that change what the factors mean; we read only plain LoRA (they must be absent, false or empty)
_UNSUPPORTED = ("use_dora", "lora_bias", "fan_in_fan_out", "rank_pattern", "alpha_pattern", "layer_replication")

Shapes = dict[str, dict[str, tuple[int, ...]]]  # module -> {"A": shape, "B": shape}


def peft_key(module: str, part: str) -> str:
    """peft's saved name of a module's ``A`` or ``B`` factor: ``base_model.model.<module>.lora_<part>.weight``."""
    return f"{PREFIX}{module}.lora_{part}.weight"


def read_peft_config(folder: str | os.PathLike[str]) -> dict:
    """``adapter_config.json`` of a peft LoRA folder, checked: a JSON object, ``peft_type`` LORA, a positive
    integer ``r``, a positive ``lora_alpha`` and none of the options plain LoRA factors cannot express."""
    path = Path(folder) / CONFIG_FILE
    if not path.is_file():
        raise ValueError(f"{path}: missing (a peft adapter folder needs {CONFIG_FILE})")
    with path.open("rb") as handle:
        raw = handle.read(MAX_CONFIG_BYTES + 1)
    if len(raw) > MAX_CONFIG_BYTES:
        raise ValueError(f"{path}: larger than {MAX_CONFIG_BYTES} bytes, not an adapter config")
    try:
        config = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as err:  # bad UTF-8, bad JSON, integers past Python's digit limit
        raise ValueError(f"{path}: not readable JSON ({type(err).__name__})") from None
    if not isinstance(config, dict):
        raise ValueError(f"{path}: expected a JSON object, got {type(config).__name__}")
    if config.get("peft_type") != "LORA":
        raise ValueError(f"{path}: peft_type must be 'LORA', got {_short(config.get('peft_type'))}")
    r = config.get("r")
    if not isinstance(r, int) or isinstance(r, bool) or not 1 <= r <= MAX_RANK:
        raise ValueError(f"{path}: r must be an integer in [1, {MAX_RANK}], got {_short(r)}")
    alpha = config.get("lora_alpha")
    if not isinstance(alpha, int | float) or isinstance(alpha, bool) or not math.isfinite(alpha) or alpha <= 0:
        raise ValueError(f"{path}: lora_alpha must be a positive number, got {_short(alpha)}")
    for field in _UNSUPPORTED:
        if config.get(field):
            raise ValueError(f"{path}: {field} is set; only plain LoRA adapters can be read")
    modules_to_save = config.get("modules_to_save")
    if modules_to_save:
        raise ValueError(f"{path}: modules_to_save is set; only LoRA factors (no saved full modules) can be read")
    return config


def safetensors_shapes(path: Path) -> dict[str, tuple[int, ...]]:
    """``{tensor name: shape}`` from a safetensors file's header, without reading a tensor."""
    bad = f"{path}: not a readable safetensors file"
    with path.open("rb") as handle:
        head = handle.read(8)
        if len(head) < 8:
            raise ValueError(f"{bad} (shorter than its 8-byte header length)")
        size = int.from_bytes(head, "little")
        if size > MAX_HEADER_BYTES:
            raise ValueError(f"{bad} (a header of {size} bytes)")
        raw = handle.read(size)
    if len(raw) != size:
        raise ValueError(f"{bad} (the header is cut short)")
    try:
        header = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError):
        raise ValueError(f"{bad} (its header is not JSON)") from None
    if not isinstance(header, dict):
        raise ValueError(f"{bad} (its header is not a JSON object)")
    shapes = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        shape = info.get("shape") if isinstance(info, dict) else None
        if not isinstance(shape, list) or not all(
            isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape
        ):
            raise ValueError(f"{bad} (tensor {_short(name)} has no valid shape)")
        shapes[name] = tuple(shape)
    return shapes


def adapter_shapes(folder: str | os.PathLike[str]) -> tuple[dict, float, Shapes]:
    """The checked config, the scale (``lora_alpha / r``; ``/ sqrt(r)`` with rsLoRA) and each adapted module's
    factor shapes of a peft LoRA folder: exactly an A [r, in] and a B [out, r] per module, safetensors only."""
    folder = Path(folder)
    config = read_peft_config(folder)
    path = folder / WEIGHTS_FILE
    if not path.is_file():
        pickled = " (adapter_model.bin is a pickle and is never loaded: save with safe_serialization)"
        raise ValueError(f"{path}: missing{pickled if (folder / PICKLED_WEIGHTS_FILE).exists() else ''}")
    r = config["r"]
    scale = config["lora_alpha"] / (math.sqrt(r) if config.get("use_rslora") else r)
    parts: Shapes = {}
    for key, shape in safetensors_shapes(path).items():
        match = _KEY.match(key)
        if match is None:
            raise ValueError(
                f"{path}: tensor {_short(key)} is not a LoRA factor (base_model.model.<module>"
                ".lora_A.weight / .lora_B.weight)"
            )
        parts.setdefault(match["module"], {})[match["part"]] = shape
    if not parts:
        raise ValueError(f"{path}: holds no LoRA factors")
    for module, found in sorted(parts.items()):
        missing = [p for p in "AB" if p not in found]
        if missing:
            raise ValueError(f"{path}: {peft_key(module, missing[0])} is missing (each module needs lora_A and lora_B)")
        a, b = found["A"], found["B"]
        if len(a) != 2 or a[0] != r:
            raise ValueError(f"{path}: {peft_key(module, 'A')} has shape {a}, expected [r={r}, in]")
        if len(b) != 2 or b[1] != r:
            raise ValueError(f"{path}: {peft_key(module, 'B')} has shape {b}, expected [out, r={r}]")
    return config, scale, parts


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
