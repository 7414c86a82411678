"""Parameters: one pydantic model per pipeline, one ``params.yaml`` section per slug.

The same model is the Prefect flow's parameter (the UI renders it as a form with the field
descriptions and bounds), the schema that validates ``params.yaml`` and ``--set`` overrides, and the
source of the DVC ``params:`` keys. Unknown keys, wrong types and out-of-range values are errors that
name the key, raised before any work starts.

Paper scale is one switch: ``scale: paper`` replaces every value that is still at its CPU default by
the value the paper (or its official code) uses, as listed in the model's ``PAPER_SCALE`` with its
source in ``PAPER_SOURCE``. Values the user changed explicitly are kept.

Types are strict, so what is refused is refused the same way from ``params.yaml``, ``--set`` and a
deployment's form: no ``true`` for a number, no ``4.0`` or ``"4"`` for a whole number, no ``nan`` or
``inf`` anywhere; seeds are distinct whole numbers in ``[0, 2**32)``. Numbers are read as YAML 1.2 reads
them (``1e-3`` is a float, not the string YAML 1.1 makes of it).
"""

from __future__ import annotations

import copy
import re
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

PydanticModel = BaseModel


Seed = Annotated[int, Field(ge=0, lt=2**32, description="A seed: a whole number in [0, 2**32).")]


class ParamsError(ValueError):
    """Bad parameters: the message names the key, the value and what was expected."""


class Section(BaseModel):
    """A group of parameters: no unknown keys, strict types, finite numbers, immutable once validated."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True, strict=True, allow_inf_nan=False)


class AttentionSection(Section):
    """A section describing an attention model: its ``n_heads`` must divide its width ``d_model``."""

    @model_validator(mode="after")
    def _heads_divide_width(self) -> AttentionSection:
        width, heads = getattr(self, "d_model"), getattr(self, "n_heads")
        if width % heads:
            raise ValueError(f"n_heads ({heads}) must divide d_model ({width})")
        return self


class PipelineParams(Section):
    """Base of every pipeline's parameter model."""

    scale: Literal["cpu", "paper"] = Field(
        "cpu",
        description="'cpu' runs the laptop-sized defaults; 'paper' switches every value still at its "
        "CPU default to the paper's setting (see PAPER_SCALE in the pipeline module).",
    )
    seeds: list[Seed] = Field(
        default_factory=lambda: [0, 1, 2],
        min_length=1,
        max_length=20,
        description="Seeds of the repeated experiment (distinct, in [0, 2**32)); claims are evaluated over all "
        "of them.",
    )

    PAPER_SCALE: ClassVar[dict[str, Any]] = {}
    PAPER_SOURCE: ClassVar[str] = ""

    @field_validator("seeds")
    @classmethod
    def _distinct_seeds(cls, value: list[int]) -> list[int]:
        repeated = sorted({s for s in value if value.count(s) > 1})
        if repeated:
            raise ValueError(f"seeds must be distinct (a repeated seed repeats the same run), {repeated} repeat")
        return value

    @model_validator(mode="before")
    @classmethod
    def _apply_paper_scale(cls, data: Any) -> Any:
        if not isinstance(data, dict) or data.get("scale") != "paper" or not cls.PAPER_SCALE:
            return data
        defaults = _cpu_defaults(cls)
        data = copy.deepcopy(data)
        for dotted, paper_value in cls.PAPER_SCALE.items():
            current = _get(data, dotted, _MISSING)
            if current is _MISSING or current == _get(defaults, dotted, _MISSING):
                _set(data, dotted, paper_value)
        return data


_MISSING = object()


def _cpu_defaults(cls: type[PipelineParams]) -> dict[str, Any]:
    return cls(scale="cpu").model_dump()


def _get(tree: Any, dotted: str, default: Any) -> Any:
    node = tree
    for part in dotted.split("."):
        if isinstance(node, BaseModel):
            node = node.model_dump()
        if not isinstance(node, dict) or part not in node:
            return default
        node = node[part]
    return node.model_dump() if isinstance(node, BaseModel) else node


def _set(tree: dict[str, Any], dotted: str, value: Any) -> None:
    parts = dotted.split(".")
    node = tree
    for part in parts[:-1]:
        child = node.get(part)
        if isinstance(child, BaseModel):
            child = child.model_dump()
        if not isinstance(child, dict):
            child = {}
        node[part] = child
        node = child
    node[parts[-1]] = value


def describe_error(err: ValidationError, prefix: str) -> str:
    """One line per problem, each naming the dotted key, e.g. ``knots.lora.r: ...``."""
    lines = []
    for item in err.errors():
        loc = ".".join(str(p) for p in item["loc"])
        key = f"{prefix}.{loc}" if prefix and loc else (prefix or loc)
        got = item.get("input")
        shown = "" if isinstance(got, dict) else f" (got {got!r})"
        lines.append(f"{key}: {item['msg']}{shown}")
    return "\n".join(lines)


def validate(model: type[PipelineParams], data: dict[str, Any], prefix: str) -> PipelineParams:
    try:
        return model.model_validate(data)
    except ValidationError as err:
        raise ParamsError(describe_error(err, prefix)) from None


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader with YAML 1.2's floats: ``1e-3`` and ``1E5`` are numbers (YAML 1.1 wants a dot)."""


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
                  |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
                  |\.[0-9_]+(?:[eE][-+]?[0-9]+)?
                  |[-+]?\.(?:inf|Inf|INF)
                  |\.(?:nan|NaN|NAN))$""", re.X),
    list("-+0123456789."))


def load_yaml(text: str) -> Any:
    """Parse YAML safely (no tags that build objects), numbers as YAML 1.2 reads them."""
    return yaml.load(text, Loader=_Loader)  # noqa: S506 - _Loader is a SafeLoader


def parse_override(text: str) -> tuple[str, Any]:
    """``key.sub=value`` → (``key.sub``, YAML-parsed value). ``lr=1e-3`` gives a float, ``seeds=[0,1]`` a list."""
    if "=" not in text:
        raise ParamsError(f"--set {text!r}: expected key=value")
    key, raw = text.split("=", 1)
    key = key.strip()
    if not key or any(not part.isidentifier() for part in key.split(".")):
        raise ParamsError(f"--set {text!r}: {key!r} is not a parameter name")
    try:
        value = load_yaml(raw) if raw.strip() else ""
    except yaml.YAMLError as err:
        raise ParamsError(f"--set {key}: cannot parse value {raw!r} ({err})") from None
    return key, value


def apply_overrides(data: dict[str, Any], overrides: list[tuple[str, Any]], model: type[PipelineParams],
                    prefix: str) -> dict[str, Any]:
    """Apply dotted overrides, refusing keys the model does not have (checked before validation so
    a typo is reported as unknown, not silently nested)."""
    out = copy.deepcopy(data)
    for key, value in overrides:
        _check_key_exists(model, key, prefix)
        _set(out, key, value)
    return out


def _check_key_exists(model: type[BaseModel], dotted: str, prefix: str) -> None:
    current: Any = model
    walked = []
    for part in dotted.split("."):
        walked.append(part)
        fields = getattr(current, "model_fields", None)
        if fields is None or part not in fields:
            known = ", ".join(sorted(fields)) if fields else "(no sub-keys)"
            raise ParamsError(f"{prefix}.{'.'.join(walked)}: unknown parameter; known keys here: {known}")
        annotation = fields[part].annotation
        current = annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None


def read_params_file(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise ParamsError(f"{path}: parameters file not found")
    try:
        data = load_yaml(path.read_text()) or {}
    except yaml.YAMLError as err:
        raise ParamsError(f"{path}: not valid YAML ({err})") from None
    if not isinstance(data, dict):
        raise ParamsError(f"{path}: expected a mapping of slug -> parameters, got {type(data).__name__}")
    return data


def check_sections(path: Path, known: list[str]) -> None:
    """Every top-level section of the parameters file names a pipeline (a typo is not silently ignored)."""
    unknown = [k for k in read_params_file(path) if k not in known]
    if unknown:
        raise ParamsError(f"{path}: unknown section(s) {unknown}; sections are pipeline slugs: {', '.join(known)}")


def load_section(model: type[PipelineParams], slug: str, path: Path,
                 overrides: list[tuple[str, Any]] = ()) -> PipelineParams:
    """Read ``slug``'s section of ``path``, apply overrides, validate. Raises :class:`ParamsError`."""
    data = read_params_file(path)
    if slug not in data:
        raise ParamsError(f"{path}: no section '{slug}'")
    section = data[slug] or {}
    if not isinstance(section, dict):
        raise ParamsError(f"{path}: section '{slug}' must be a mapping")
    section = apply_overrides(section, list(overrides), model, slug)
    return validate(model, section, slug)


def file_values(model: type[PipelineParams], slug: str, path: Path) -> PipelineParams | None:
    """The ``params.yaml`` values of ``slug`` (None when the file or its section is not valid)."""
    try:
        return load_section(model, slug, path)
    except ParamsError:
        return None


def at_file_values(params: PipelineParams, slug: str, path: Path) -> bool:
    """Whether ``params`` are exactly the ``params.yaml`` values: a run with them writes the DVC workspace."""
    found = file_values(type(params), slug, path)
    return found is not None and found.model_dump() == params.model_dump()


def flatten(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` → ``{"a.b": 1}`` (lists kept as values)."""
    flat: dict[str, Any] = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(flatten(value, name + "."))
        else:
            flat[name] = value
    return flat


# --------------------------------------------------------------------------------------------------
# data files named by parameters: declared once on the field, checked with the params before any work
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class DataFile:
    """Marks a path parameter and names the check that reads it: ``Annotated[str | None, DataFile(check)]``.

    ``check(path)`` reads enough of the file (or folder, ``folder=True``) to know it is in the expected
    format and raises ``ValueError`` (or ``OSError``) naming what is wrong: the row, the column, the key.
    Messages must not quote the file's contents beyond the offending field. The CLI (``run`` and
    ``stage``, hence ``dvc repro``) and the Prefect flow run every check of the parameters they are
    given before any work starts; relative paths are taken from the project root.
    """

    check: Callable[[Path], object]
    folder: bool = False
    description: str = "data file"
    # a folder's files as the official release names them (``{split}``-style names spelled out), relative to
    # the folder: what the check reads, shown to users and filled with hostile bytes by the tests
    layout: tuple[str, ...] = ()


def data_file_fields(model: type[PydanticModel], prefix: str = "") -> Iterator[tuple[str, DataFile]]:
    """``(dotted name, DataFile)`` for every path parameter of ``model``, nested sections included."""
    for name, info in model.model_fields.items():
        dotted = f"{prefix}{name}"
        for meta in info.metadata:
            if isinstance(meta, DataFile):
                yield dotted, meta
        for sub in _models_in(info.annotation):
            yield from data_file_fields(sub, dotted + ".")


def _models_in(annotation: Any) -> Iterator[type[PydanticModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation
        return
    for arg in typing.get_args(annotation):
        yield from _models_in(arg)


def resolve_data_path(value: str, root: Path) -> Path:
    path = Path(value).expanduser()
    return path if path.is_absolute() else root / path


def check_data_files(params: PipelineParams, root: Path, slug: str, groups: tuple[str, ...] | None = None
                     ) -> None:
    """Run the declared check of every data file the params name (only under ``groups`` when given).

    Raises :class:`ParamsError` naming the parameter, the path and the problem.
    """
    for dotted, spec in data_file_fields(type(params)):
        if groups is not None and dotted.split(".")[0] not in groups:
            continue
        value = _get(params, dotted, None)
        if value in (None, ""):
            continue
        path = resolve_data_path(str(value), root)
        key = f"{slug}.{dotted}"
        if spec.folder and not path.is_dir():
            raise ParamsError(f"{key}: no folder at {path} (expected a {spec.description})")
        if not spec.folder and not path.is_file():
            raise ParamsError(f"{key}: no file at {path} (expected a {spec.description})")
        try:
            spec.check(path)
        except (ValueError, OSError, KeyError) as err:
            detail = _first_line(err).removeprefix(f"{path}: ")  # readers often name the file themselves
            raise ParamsError(f"{key}: {path} is not a valid {spec.description}: {detail}") from None


def _first_line(err: BaseException) -> str:
    text = str(err).strip() or type(err).__name__
    return text.splitlines()[0][:500]
