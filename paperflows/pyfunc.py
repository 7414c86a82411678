"""Registered models as MLflow pyfunc models: any torch module a stage saved with ``components.io.save_model``.

A stage's declared model folder (``Stage.models``) is logged by :func:`log_torch_pyfunc` as an MLflow model whose
python model, :class:`TorchModule`, rebuilds the module when loaded and runs it in ``predict``::

    model = mlflow.pyfunc.load_model("models:/story-linear/1")
    model.predict(np.zeros((4, 5), dtype=np.float32))   # -> numpy, the module's output

How a weight file is rebuilt: its safetensors metadata names the class (``model.class``, ``module:QualName``) and,
when the module keeps a config dataclass as ``cfg``, that config as JSON (``model.config``). The class is imported,
its config dataclass is the annotation of the first ``__init__`` parameter (``Linear(cfg: LinearConfig)``), filled
from the JSON; a class without such an annotation gets the JSON's keys as keyword arguments, one without a config
is called bare. The state dict is then loaded strictly. Files that do not rebuild so (adapters, a loader function
as ``model.class``) are still logged: the pyfunc loads, and ``predict`` says why it cannot run.

A folder may hold several files (one per seed, the untrained start beside the trained weights): ``predict`` runs
the first file in name order that rebuilds; ``load_model(uri, model_config={"weights": "<file>"})`` picks another.

The input example (and the signature inferred from it and the module's output on it) comes from, in order:

1. the stage, through the weight file's metadata: ``save_model(m, path, metadata={"model.input_shape": "[1, 28,
   28]", "model.input_dtype": "float32"})`` (one row's shape, without the batch dimension; dtype float32 unless
   said);
2. the module: an ``example_input()`` method returning a batch tensor;
3. the module's first ``torch.nn.Linear``: rows of ``in_features`` floats.

When none applies, or the module fails on the example, the model is logged without example nor signature and the
version's tag ``paperflows.input_example`` says why (it reads ``"shape [5] (first Linear)"`` when one was made).
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import json
import logging
import typing
from pathlib import Path
from typing import Any

import mlflow.pyfunc
import numpy as np

ARTIFACT = "weights"  # the key of the model folder in the pyfunc's artifacts
INPUT_SHAPE, INPUT_DTYPE = "model.input_shape", "model.input_dtype"
EXAMPLE_ROWS = 2
# a larger primary weight file is not rebuilt at log time (that would cost more than the logging itself): it is
# logged without example and signature, and still loads and predicts
MAX_EXAMPLE_BYTES = 256 * 2**20


class RebuildError(RuntimeError):
    """A weight file whose metadata does not say how to rebuild its module."""


# --------------------------------------------------------------------------------------------------
# rebuilding a module from a weight file
# --------------------------------------------------------------------------------------------------
def _import(spec: str) -> Any:
    module_name, _, qualname = spec.partition(":")
    if not module_name or not qualname:
        raise RebuildError(f"model.class {spec!r} is not 'module:QualName'")
    target: Any = importlib.import_module(module_name)
    for part in qualname.split("."):
        target = getattr(target, part)
    return target


def _config_class(cls: type) -> type | None:
    """The dataclass annotating the first parameter of ``cls.__init__`` (None when there is none)."""
    try:
        params = list(inspect.signature(cls.__init__).parameters.values())[1:]
    except (TypeError, ValueError):
        return None
    if not params:
        return None
    try:
        hints = typing.get_type_hints(cls.__init__)
    except Exception:  # noqa: BLE001 - an annotation that does not resolve: fall back to keyword arguments
        return None
    hint = hints.get(params[0].name)
    for candidate in (hint, *typing.get_args(hint)):  # `Config | None` too
        if isinstance(candidate, type) and dataclasses.is_dataclass(candidate):
            return candidate
    return None


def build_module(path: str | Path) -> Any:
    """The ``torch.nn.Module`` saved at ``path`` by ``components.io.save_model``, weights loaded, in eval mode.

    Raises :class:`RebuildError` when the metadata names no module class."""
    import torch
    from safetensors.torch import load_file

    from components.io import safetensors_metadata

    meta = safetensors_metadata(path)
    if "model.class" not in meta:
        raise RebuildError(f"{Path(path).name}: no 'model.class' in its safetensors metadata")
    cls = _import(meta["model.class"])
    if not (isinstance(cls, type) and issubclass(cls, torch.nn.Module)):
        raise RebuildError(f"{Path(path).name}: model.class {meta['model.class']} is not a torch.nn.Module class")
    config = json.loads(meta["model.config"]) if "model.config" in meta else None
    if config is None:
        module = cls()
    elif (config_cls := _config_class(cls)) is not None:
        module = cls(_from_json(config_cls, config))
    elif isinstance(config, dict):
        module = cls(**config)
    else:
        raise RebuildError(f"{Path(path).name}: model.config is not an object")
    module.load_state_dict(load_file(str(path)), strict=True)
    return module.eval()


def _from_json(config_cls: type, data: dict[str, Any]) -> Any:
    """``config_cls`` from the JSON ``save_model`` wrote: fields typed as tuples get tuples back (JSON made them
    lists), nested config dataclasses are rebuilt, keys the class no longer has are dropped."""
    try:
        hints = typing.get_type_hints(config_cls)
    except Exception:  # noqa: BLE001 - an annotation that does not resolve: the values as they are
        hints = {}
    values = {}
    for field in dataclasses.fields(config_cls):
        if field.name not in data:
            continue
        value, hint = data[field.name], hints.get(field.name)
        if isinstance(hint, type) and dataclasses.is_dataclass(hint) and isinstance(value, dict):
            value = _from_json(hint, value)
        elif isinstance(value, list) and (hint is tuple or typing.get_origin(hint) is tuple):
            value = tuple(value)
        values[field.name] = value
    return config_cls(**values)


def weight_files(folder: Path) -> list[str]:
    """The safetensors files under ``folder``, relative and in name order."""
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*.safetensors") if p.is_file())


# --------------------------------------------------------------------------------------------------
# inputs and outputs
# --------------------------------------------------------------------------------------------------
def _to_numpy(output: Any) -> np.ndarray:
    """A module's output as numpy: a tensor; of a tuple or list, its first tensor; of a dict, its only tensor."""
    import torch

    if isinstance(output, torch.Tensor):
        return output.detach().cpu().numpy()
    if isinstance(output, (tuple, list)) and output and isinstance(output[0], torch.Tensor):
        return _to_numpy(output[0])
    if isinstance(output, dict):
        tensors = [v for v in output.values() if isinstance(v, torch.Tensor)]
        if len(tensors) == 1:
            return _to_numpy(tensors[0])
    raise TypeError(f"the module returned {type(output).__name__}, not a tensor")


def _float_dtype(module: Any) -> Any:
    import torch

    for p in module.parameters():
        if p.is_floating_point():
            return p.dtype
    return torch.float32


def run_module(module: Any, data: Any, input_shape: list[int] | None = None) -> np.ndarray:
    """``module`` on ``data`` (numpy array, pandas DataFrame or anything ``np.asarray`` takes), as numpy.

    Floating inputs take the module's float dtype; a table's rows are reshaped to ``input_shape`` when given
    (a DataFrame is flat)."""
    import torch

    if hasattr(data, "to_numpy"):  # pandas
        data = data.to_numpy()
    array = np.asarray(data)
    if array.dtype == object:
        raise TypeError("predict takes a numeric array or DataFrame")
    if input_shape and array.ndim == 2 and list(array.shape[1:]) != list(input_shape):
        if array.shape[1] != int(np.prod(input_shape)):
            raise ValueError(f"rows of {array.shape[1]} values, the model reads rows of shape {input_shape}")
        array = array.reshape(len(array), *input_shape)
    tensor = torch.from_numpy(np.ascontiguousarray(array))
    if tensor.is_floating_point() or tensor.dtype == torch.bool:
        tensor = tensor.to(_float_dtype(module))
    with torch.no_grad():
        return _to_numpy(module(tensor))


def example_input(module: Any, meta: dict[str, str]) -> tuple[np.ndarray | None, str]:
    """A batch of ``EXAMPLE_ROWS`` random rows the module reads (seeded), and where its shape came from (or why
    there is none): the weight file's ``model.input_shape``, the module's ``example_input()``, its first Linear."""
    import torch

    rng = np.random.default_rng(0)
    if INPUT_SHAPE in meta:
        shape = [int(n) for n in json.loads(meta[INPUT_SHAPE])]
        dtype = np.dtype(meta.get(INPUT_DTYPE, "float32"))
        if np.issubdtype(dtype, np.integer):
            return rng.integers(0, 2, (EXAMPLE_ROWS, *shape)).astype(dtype), f"shape {shape} (declared)"
        return rng.standard_normal((EXAMPLE_ROWS, *shape)).astype(dtype), f"shape {shape} (declared)"
    if callable(getattr(module, "example_input", None)):
        tensor = module.example_input()
        return tensor.detach().cpu().numpy(), f"shape {list(tensor.shape[1:])} (example_input())"
    linear = next((m for m in module.modules() if isinstance(m, torch.nn.Linear)), None)
    if linear is not None:
        dtype = np.float64 if _float_dtype(module) == torch.float64 else np.float32
        rows = rng.standard_normal((EXAMPLE_ROWS, linear.in_features)).astype(dtype)
        return rows, f"shape [{linear.in_features}] (first Linear)"
    return None, f"none: no {INPUT_SHAPE} in the weights' metadata, no example_input(), no Linear layer"


# --------------------------------------------------------------------------------------------------
# the pyfunc
# --------------------------------------------------------------------------------------------------
class TorchModule(mlflow.pyfunc.PythonModel):
    """A torch module rebuilt from a folder of safetensors (see the module docstring); ``predict`` runs it.

    The model config (``model_config`` at log or load time) holds ``weights``, the file to run (relative to the
    folder), and ``input_shape``, one row's shape when it is not flat. Pickled without any weights: the module
    is built in :meth:`load_context`."""

    def load_context(self, context: Any) -> None:
        config = dict(context.model_config or {})
        folder = Path(context.artifacts[ARTIFACT])
        self.input_shape = config.get("input_shape")
        self.module, self.problem = None, ""
        files = [config["weights"]] if config.get("weights") else weight_files(folder)
        reasons = []
        for name in files:
            try:
                self.module, self.weights = build_module(folder / name), name
                return
            except Exception as exc:  # noqa: BLE001 - loading still succeeds; predict says why it cannot run
                reasons.append(str(exc) if isinstance(exc, RebuildError) else f"{name}: {type(exc).__name__}: {exc}")
        self.problem = "; ".join(reasons) or f"no safetensors file in {folder}"

    def predict(self, context, model_input, params=None):  # untyped: MLflow would validate inputs by the hints
        if self.module is None:
            raise RebuildError(f"this model's weights do not rebuild a torch module: {self.problem}")
        return run_module(self.module, model_input, self.input_shape)


def pip_requirements() -> list[str]:
    """What loading needs, pinned to this environment (given explicitly: MLflow infers nothing, reaches no index)."""
    from importlib.metadata import PackageNotFoundError, version

    pins = []
    for name in ("mlflow", "torch", "safetensors", "numpy", "pandas"):
        try:
            pins.append(f"{name}=={version(name)}")
        except PackageNotFoundError:
            pins.append(name)
    return pins


@dataclasses.dataclass
class Logged:
    """A logged pyfunc: its URI (``models:/m-...``), LoggedModel id, and tags for the registered version."""

    model_uri: str
    model_id: str
    tags: dict[str, str]


def describe_folder(folder: Path) -> tuple[dict[str, Any], np.ndarray | None, Any, dict[str, str]]:
    """What to log a model folder with: the model config, the input example, the signature and tags about them.
    Builds the primary module once (none above ``MAX_EXAMPLE_BYTES``) and runs it on the example."""
    from mlflow.models import infer_signature

    from components.io import safetensors_metadata

    config: dict[str, Any] = {}
    reasons = []
    for name in weight_files(folder):
        path = folder / name
        if path.stat().st_size > MAX_EXAMPLE_BYTES:
            config["weights"] = name
            reason = f"none: {name} is over {MAX_EXAMPLE_BYTES >> 20} MiB, not rebuilt at log time"
            return config, None, None, {"paperflows.weights": name, "paperflows.input_example": reason}
        try:
            module = build_module(path)
        except RebuildError as exc:
            reasons.append(str(exc))
            continue
        except Exception as exc:  # noqa: BLE001 - a class that no longer imports or builds: try the next file
            reasons.append(f"{name}: {type(exc).__name__}: {exc}")
            continue
        config["weights"] = name
        meta = safetensors_metadata(path)
        example, origin = example_input(module, meta)
        tags = {"paperflows.weights": name, "paperflows.input_example": origin}
        if example is None:
            return config, None, None, tags
        if example.ndim > 2:
            config["input_shape"] = list(example.shape[1:])
        try:
            output = run_module(module, example, config.get("input_shape"))
        except Exception as exc:  # noqa: BLE001 - a module that does not read one array (several inputs)
            message = str(exc).splitlines()[0][:200] if str(exc) else ""
            tags["paperflows.input_example"] = f"none: the module failed on {origin}: {type(exc).__name__}: {message}"
            return config, None, None, tags
        return config, example, infer_signature(example, output), tags
    reason = "; ".join(reasons)[:500] or "no safetensors file"
    return config, None, None, {"paperflows.input_example": f"none: no file rebuilds a module ({reason})"}


def log_torch_pyfunc(
    client: Any, experiment_id: str, run_id: str, name: str, folder: Path, tags: dict[str, str] | None = None
) -> Logged:
    """Log ``folder`` (safetensors files + config.json) as a pyfunc :class:`TorchModule` named ``name``: a
    LoggedModel of ``run_id``'s experiment, linked to that run as one of its outputs, with a signature and an input
    example when one can be made (:func:`describe_folder`)."""
    from mlflow.entities import LoggedModelOutput
    from mlflow.tracking._tracking_service.utils import _use_tracking_uri

    config, example, signature, about = describe_folder(folder)
    logged = client.create_logged_model(
        experiment_id, name=name, source_run_id=run_id, tags={**(tags or {}), **about}, model_type="torch"
    )
    # log_model resolves its store from the process-wide tracking URI: the tracker's, for the time of the call.
    # Its notes are not for a pipeline's log: the python model is pickled by reference (TorchModule holds no state)
    pyfunc_logger = logging.getLogger("mlflow.pyfunc")
    level = pyfunc_logger.level
    pyfunc_logger.setLevel(logging.ERROR)
    try:
        with _use_tracking_uri(client.tracking_uri):
            info = mlflow.pyfunc.log_model(
                name=name,
                python_model=TorchModule(),
                artifacts={ARTIFACT: str(folder)},
                signature=signature,
                input_example=example,
                pip_requirements=pip_requirements(),
                model_config=config or None,
                model_id=logged.model_id,
            )
    finally:
        pyfunc_logger.setLevel(level)
    client.log_outputs(run_id, [LoggedModelOutput(logged.model_id, step=0)])
    return Logged(model_uri=info.model_uri, model_id=logged.model_id, tags=about)
