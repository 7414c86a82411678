"""Parameters: one pydantic model per pipeline, one ``params.yaml`` section per slug.

The same model is the Prefect flow's parameter (the UI renders it as a form with the field
descriptions, each ending with the field's range, and a dropdown for every fixed set of choices), the
schema that validates ``params.yaml`` and ``--set`` overrides, and the source of the DVC ``params:`` keys.
Unknown keys, wrong types and out-of-range values are errors that name the key, raised before any work
starts.

Overrides merge: ``--set train={steps: 5}`` changes ``train.steps`` and keeps the section's other
``params.yaml`` values, and :func:`merge_given` gives a deployment run started with a partial parameter
the same result.

Scales are one switch. ``scale: paper`` replaces every value that is still at its CPU default by the value
the paper (or its official code) uses, as listed in the model's ``PAPER_SCALE`` with its source in
``PAPER_SOURCE``; ``scale: evidence`` does the same with ``EVIDENCE_SCALE``, the smallest budget that decides
the paper's headline claim on 2 CPU cores (its reasoning in ``EVIDENCE_SOURCE``). Values the user changed
explicitly are kept. ``SCALE_COST`` states each scale's measured cost.

Types are strict, so what is refused is refused the same way from ``params.yaml``, ``--set`` and a
deployment's form: no ``true`` for a number, no ``4.0`` or ``"4"`` for a whole number, no ``nan`` or
``inf`` anywhere; seeds are distinct whole numbers in ``[0, 2**32)``. Numbers are read as YAML 1.2 reads
them (``1e-3`` is a float, not the string YAML 1.1 makes of it).
"""

from __future__ import annotations

import copy
import functools
import re
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

PydanticModel = BaseModel


Seed = Annotated[int, Field(ge=0, lt=2**32, description="A seed: a whole number in [0, 2**32).")]


class ParamsError(ValueError):
    """Bad parameters: the message names the key, the value and what was expected."""


# --------------------------------------------------------------------------------------------------
# bounds, read back from the JSON schema: stated in the form's descriptions and in `paperflows params`
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Bounds:
    """The limits of one parameter as its JSON schema states them: a number's range (inclusive or not), a
    multiple, a list's length, and the bounds of the list's items."""

    low: float | None = None
    low_inclusive: bool = True
    high: float | None = None
    high_inclusive: bool = True
    multiple_of: float | None = None
    min_items: int | None = None
    max_items: int | None = None
    items: Bounds | None = None

    @property
    def empty(self) -> bool:
        return (
            self.low is None
            and self.high is None
            and self.multiple_of is None
            and self.min_items is None
            and self.max_items is None
            and (self.items is None or self.items.empty)
        )


def schema_bounds(prop: dict[str, Any]) -> Bounds:
    """The :class:`Bounds` of a property of a JSON schema (through ``anyOf`` of a nullable value)."""
    branches = [b for b in prop.get("anyOf", []) if b.get("type") != "null"]
    if len(branches) == 1:
        return schema_bounds({**branches[0], **{k: v for k, v in prop.items() if k != "anyOf"}})
    low = prop.get("minimum", prop.get("exclusiveMinimum"))
    high = prop.get("maximum", prop.get("exclusiveMaximum"))
    items = schema_bounds(prop["items"]) if isinstance(prop.get("items"), dict) else None
    return Bounds(
        low=low,
        low_inclusive="minimum" in prop,
        high=high,
        high_inclusive="maximum" in prop,
        multiple_of=prop.get("multipleOf"),
        min_items=prop.get("minItems"),
        max_items=prop.get("maxItems"),
        items=None if items is None or items.empty else items,
    )


def show_number(value: float) -> str:
    """``1000000`` -> ``1,000,000``; ``0.01`` -> ``0.01``; a float is shown exactly (shortest repr)."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        value = int(value)
    return f"{value:,}" if isinstance(value, int) else repr(value)


def range_phrase(b: Bounds) -> str:
    """A number's range in words: ``1 to 1,000,000``, ``greater than 0, up to 1``, ``at least 0``."""
    low, high = (None if v is None else show_number(v) for v in (b.low, b.high))
    if low is not None and high is not None:
        phrase = {
            (True, True): f"{low} to {high}",
            (True, False): f"{low} to less than {high}",
            (False, True): f"greater than {low}, up to {high}",
            (False, False): f"greater than {low} and less than {high}",
        }[(b.low_inclusive, b.high_inclusive)]
    elif low is not None:
        phrase = f"at least {low}" if b.low_inclusive else f"greater than {low}"
    elif high is not None:
        phrase = f"at most {high}" if b.high_inclusive else f"less than {high}"
    else:
        phrase = ""
    if b.multiple_of is not None:
        phrase = (
            f"{phrase}, a multiple of {show_number(b.multiple_of)}"
            if phrase
            else f"a multiple of {show_number(b.multiple_of)}"
        )
    return phrase


def length_phrase(b: Bounds) -> str:
    """A list's length in words: ``at least 1``, ``1 to 20``, ``exactly 2`` (empty without bounds)."""
    lo, hi = b.min_items, b.max_items
    if lo is not None and hi is not None:
        return f"exactly {lo}" if lo == hi else f"{lo} to {hi}"
    if lo is not None:
        return f"at least {lo}"
    return f"at most {hi}" if hi is not None else ""


_STATES_RANGE = re.compile(r"Range:|[\[(]\s*-?\d[\w.*]*\s*,\s*-?\d[\w.*]*\s*[\])]")
_STATES_LENGTH = re.compile(r"\bItems:")


def bounds_sentences(b: Bounds, description: str = "") -> str:
    """The bounds as sentences appended to a description (``Range: 1 to 1,000,000.``, ``Items: at least 1.``),
    leaving out what the description already states (an interval such as ``(0, 10]``, or ``Range:``)."""
    parts = []
    values = b.items if b.items is not None else b
    while values.items is not None:  # a list of lists: the range of the innermost numbers
        values = values.items
    phrase = range_phrase(values)
    if phrase and not _STATES_RANGE.search(description):
        parts.append(f"Range{' of each item' if b.items is not None else ''}: {phrase}.")
    length = length_phrase(b)
    if length and not _STATES_LENGTH.search(description):
        parts.append(f"Items: {length}.")
    return " ".join(parts)


def _state_bounds_in_descriptions(schema: dict[str, Any], cls: type[BaseModel]) -> None:
    """JSON-schema hook of every section: each bounded field's description ends with its range, so the
    Prefect form (which shows descriptions, not ``minimum``/``maximum``) tells the user the limits."""
    for prop in schema.get("properties", {}).values():
        if "$ref" in prop or "enum" in prop:
            continue
        description = prop.get("description", "")
        extra = bounds_sentences(schema_bounds(prop), description)
        if extra:
            prop["description"] = f"{description.rstrip()} {extra}".strip()


# labels of the Prefect form: a field name read as words. Whole names first, then word by word
_TITLE_NAMES = {
    "lr": "learning rate",
    "emsize": "embedding size",
    "ff": "feed-forward width",
    "d_model": "model width",
    "d_ff": "feed-forward width",
    "d_head": "head width",
    "d_feat": "feature width",
    "timeout_s": "timeout (s)",
    "k_max": "maximum k",
    "c": "C",
}
_TITLE_WORDS = {
    "lr": "learning rate",
    "num": "number of",
    "max": "maximum",
    "min": "minimum",
    "len": "length",
    "dim": "dimension",
    "emb": "embedding",
    "prob": "probability",
    "tol": "tolerance",
    "eval": "evaluation",
    "ks": "k values",
}
_TITLE_ACRONYMS = {
    word: word.upper()
    for word in (
        "ai aca asif cot csv dare dcscore ddim dpo ecg ema fid fps gbm gin grf hrf id kl lac llm lm lora mlp mnist "
        "nfe ot pca pmi qa rag rf rmse sft svm tir tofu vit vqhbr wfdb"
    ).split()
} | {
    "lora": "LoRA",
    "knn": "kNN",
    "so3": "SO(3)",
    "nyuv2": "NYUv2",
    "qm9": "QM9",
    "pc15k": "PC15K",
    "tora": "ToRA",
    "w1": "W1",
}


def field_title(name: str, info: Any = None) -> str:
    """A field's label in the form, in words and sentence case: ``batch_size`` -> ``Batch size``, ``n_heads`` ->
    ``Number of heads``, ``lr`` -> ``Learning rate``, ``lora_r`` -> ``LoRA r``, ``d_model`` -> ``Model width``.
    A field given an explicit ``title=`` keeps it."""
    whole = _TITLE_NAMES.get(name) or _TITLE_NAMES.get(name.lower())
    if whole is not None:
        words = [whole]
    else:
        parts = [p for p in name.split("_") if p]
        words = []
        for index, part in enumerate(parts):
            lower = part.lower()
            if index == 0 and lower == "n" and len(parts) > 1:
                words.append("number of")
            elif lower in _TITLE_ACRONYMS:
                words.append(_TITLE_ACRONYMS[lower])
            elif part != lower:  # a name written with capitals (``C``) keeps them
                words.append(part)
            else:
                words.append(_TITLE_WORDS.get(lower, lower))
    text = " ".join(words) or name
    first = words[0] if words else ""
    keep = first in _TITLE_ACRONYMS.values() or first in _TITLE_NAMES.values() and first[:1].isupper()
    return text if keep or text[:1].isupper() else text[:1].upper() + text[1:]


class Section(BaseModel):
    """A group of parameters: no unknown keys, strict types, finite numbers, immutable once validated.

    Its JSON schema (the Prefect form) labels each field in words (:func:`field_title`) and states each field's
    bounds at the end of the field's description. A path parameter (``DataFile``) given as an empty string
    means no file, as ``null`` does: the form's text box for it can be left empty.
    """

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        validate_default=True,
        strict=True,
        allow_inf_nan=False,
        json_schema_extra=_state_bounds_in_descriptions,
        field_title_generator=field_title,
    )

    @model_validator(mode="before")
    @classmethod
    def _empty_path_means_none(cls, data: Any) -> Any:
        if isinstance(data, dict):
            empty = [name for name in _data_file_names(cls) if data.get(name) == ""]
            if empty:
                data = {**data, **dict.fromkeys(empty)}
        return data


@functools.cache
def _data_file_names(model: type[BaseModel]) -> frozenset[str]:
    """The fields of ``model`` itself that name a data file (``Annotated[str | None, DataFile(...)]``)."""
    return frozenset(
        name for name, info in model.model_fields.items() if any(isinstance(m, DataFile) for m in info.metadata)
    )


def distinct(value: list[Any], info: ValidationInfo | None = None) -> list[Any]:
    """A list field's validator: no entry twice (``"<field> repeat: [...]"``)."""
    if len(set(value)) != len(value):
        raise ValueError(f"{info.field_name if info and info.field_name else 'entries'} repeat: {value}")
    return value


class AttentionSection(Section):
    """A section describing an attention model: its ``n_heads`` must divide its width ``d_model``."""

    @model_validator(mode="after")
    def _heads_divide_width(self) -> AttentionSection:
        width, heads = self.d_model, self.n_heads
        if width % heads:
            raise ValueError(f"n_heads ({heads}) must divide d_model ({width})")
        return self


class PipelineParams(Section):
    """Base of every pipeline's parameter model."""

    scale: Literal["cpu", "evidence", "paper"] = Field(
        "cpu",
        description="'cpu' runs the laptop-sized defaults (minutes); 'evidence' switches every value still at "
        "its CPU default to the smallest budget that decides the paper's headline claim on 2 CPU cores (at most "
        "15 minutes; EVIDENCE_SCALE in the pipeline's params module); 'paper' to the paper's setting (PAPER_SCALE, "
        "GPU-sized).",
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
    #: the smallest budget that decides the headline claim on 2 CPU cores (empty: no evidence preset yet)
    EVIDENCE_SCALE: ClassVar[dict[str, Any]] = {}
    EVIDENCE_SOURCE: ClassVar[str] = ""
    #: each scale's measured cost: ``{"cpu": "115 s on 2 cores (one torch thread)", "evidence": ..., "paper": ...}``
    SCALE_COST: ClassVar[dict[str, str]] = {}

    # the values as given to the validation (before the paper preset), see :func:`given_values`
    _given: dict[str, Any] | None = PrivateAttr(default=None)

    def __eq__(self, other: object) -> bool:
        """Parameters are equal when their values are, however they were given."""
        if not isinstance(other, BaseModel):
            return NotImplemented
        return type(self) is type(other) and self.__dict__ == other.__dict__

    def environment_problems(self, groups: tuple[str, ...] | None = None) -> list[str]:
        """What the run with these parameters needs from its environment and lacks (settings such as the
        endpoint of an external judge, named by the variables to set); checked with the data files, before
        any work. ``groups``: only for a stage that reads these parameter groups (None: the whole run).
        Nothing by default."""
        return []

    def data_problems(self, files: dict[str, CheckedData]) -> list[str]:
        """What is wrong with the data files and these parameters together (a file's rows against a count
        asked for, its classes against a model's width, one file against another), checked after every
        file's own check and before any work; each problem starts with the dotted key it concerns.

        ``files`` maps the dotted key of every data-path parameter that was checked (only those a stage reads,
        for a stage) to its :class:`CheckedData`, whose ``path`` is None when the parameter names no file (the
        pipeline's offline data); a rule whose key is absent is not checked. A stage that would refuse the
        same input later calls the same function as the rule. Nothing by default."""
        return []

    @field_validator("seeds")
    @classmethod
    def _distinct_seeds(cls, value: list[int]) -> list[int]:
        repeated = sorted({s for s in value if value.count(s) > 1})
        if repeated:
            raise ValueError(f"seeds must be distinct (a repeated seed repeats the same run), {repeated} repeat")
        return value

    @model_validator(mode="wrap")
    @classmethod
    def _apply_paper_scale(cls, data: Any, handler: ModelWrapValidatorHandler[PipelineParams]) -> PipelineParams:
        if not isinstance(data, dict):
            return handler(data)
        given = _plain(data)
        if given.get("scale") == "evidence" and not cls.EVIDENCE_SCALE:
            raise ValueError(
                "scale 'evidence': this pipeline has no evidence preset yet (EVIDENCE_SCALE is empty); "
                "use 'cpu' or 'paper'"
            )
        plan = paper_scale_plan(cls, given)
        if plan.changed:
            data = copy.deepcopy(data)
            for change in plan.changed:
                _set(data, change.key, change.paper)
        params = handler(data)
        params._given = given
        return params


_MISSING = object()


@dataclass(frozen=True)
class PresetChange:
    """One key of a preset (``PAPER_SCALE``, ``EVIDENCE_SCALE``): its value before the preset, and the
    preset's value (``paper``)."""

    key: str
    value: Any
    paper: Any


@dataclass(frozen=True)
class PaperScalePlan:
    """What ``scale: paper`` does to given values: the keys it switches to the paper's value (they were
    missing or at their CPU default) and the keys it keeps because they were set to something else."""

    changed: list[PresetChange]
    kept: list[PresetChange]


SCALES = ("cpu", "evidence", "paper")


def preset(model: type[PipelineParams], scale: str) -> dict[str, Any]:
    """The values a scale switches to (``{}`` for ``cpu``)."""
    return {"paper": model.PAPER_SCALE, "evidence": model.EVIDENCE_SCALE}.get(scale, {})


def paper_scale_plan(model: type[PipelineParams], data: dict[str, Any]) -> PaperScalePlan:
    """The scale preset's effect on ``data`` (a section as given, before validation): ``scale: paper`` or
    ``scale: evidence``; nothing for ``cpu``. Keys whose CPU value already is the preset's are in neither
    list."""
    changed: list[PresetChange] = []
    kept: list[PresetChange] = []
    values = preset(model, str(data.get("scale", "cpu")))
    if not values:
        return PaperScalePlan(changed, kept)
    defaults = _cpu_defaults(model)
    for dotted, paper_value in values.items():
        default = _get(defaults, dotted, _MISSING)
        current = _get(data, dotted, _MISSING)
        if current is _MISSING or current == default:
            if default != paper_value:
                changed.append(PresetChange(dotted, default if current is _MISSING else current, paper_value))
        elif current != paper_value:
            kept.append(PresetChange(dotted, current, paper_value))
    return PaperScalePlan(changed, kept)


def _plain(tree: Any) -> Any:
    """A deep copy of given parameter data with sections as dicts of the fields they were given."""
    if isinstance(tree, PipelineParams) and tree._given is not None:
        return copy.deepcopy(tree._given)
    if isinstance(tree, BaseModel):
        return tree.model_dump(exclude_unset=True)
    if isinstance(tree, dict):
        return {key: _plain(value) for key, value in tree.items()}
    if isinstance(tree, (list, tuple)):
        return [_plain(value) for value in tree]
    return copy.deepcopy(tree)


def given_values(params: PipelineParams) -> dict[str, Any]:
    """The values ``params`` were validated from, before the paper preset: a ``params.yaml`` section with
    its ``--set`` overrides, or the (possibly partial) dict a Prefect deployment run was started with.

    Falls back to pydantic's ``model_fields_set``, recursively into the sections, for a model that was not
    validated (``model_construct``)."""
    if params._given is not None:
        return copy.deepcopy(params._given)
    return params.model_dump(exclude_unset=True)


def merge_given(params: PipelineParams, base: PipelineParams, prefix: str = "") -> PipelineParams:
    """``base`` overlaid with exactly the values that were given to ``params``, validated again.

    A deployment run started with a partial parameter (``{"train": {"steps": 500}}``) is validated by
    Prefect into the full model, its missing fields at the model defaults; merged into ``base`` (the
    ``params.yaml`` values), it gets what ``paperflows run --set train.steps=500`` gets: the other keys of
    ``train`` keep their ``params.yaml`` values, and ``scale: paper`` applies to the merged values.
    Raises :class:`ParamsError` (naming ``prefix``.key) when the merged values are not valid.
    """
    merged = merge_trees(given_values(base), given_values(params))
    return validate(type(base), merged, prefix)


def merge_trees(base: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    """``update`` merged into a copy of ``base``: mappings merge key by key, recursively; any other value
    replaces what ``base`` has."""
    out = copy.deepcopy(base)
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge_trees(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


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


# PyYAML's safe loader (its C parser when built, ~10x faster) with YAML 1.2's floats: ``1e-3`` and ``1E5`` are
# numbers (YAML 1.1 wants a dot)
_Loader = type("_Loader", (getattr(yaml, "CSafeLoader", yaml.SafeLoader),), {})
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(
        r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
                  |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
                  |\.[0-9_]+(?:[eE][-+]?[0-9]+)?
                  |[-+]?\.(?:inf|Inf|INF)
                  |\.(?:nan|NaN|NAN))$""",
        re.X,
    ),
    list("-+0123456789."),
)


def load_yaml(text: str) -> Any:
    """Parse YAML safely (no tags that build objects), numbers as YAML 1.2 reads them."""
    return yaml.load(text, Loader=_Loader)  # noqa: S506 - _Loader is a safe loader


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


def apply_overrides(
    data: dict[str, Any], overrides: list[tuple[str, Any]], model: type[PipelineParams], prefix: str
) -> dict[str, Any]:
    """Apply dotted overrides, refusing keys the model does not have (checked before validation so
    a typo is reported as unknown, not silently nested).

    A mapping given for a section (``train={steps: 5}``) merges into the section's values, recursively;
    any other value replaces the key's value."""
    out = copy.deepcopy(data)
    for key, value in overrides:
        section = check_key_exists(model, key, prefix)
        if section is not None and isinstance(value, dict):
            current = _get(out, key, None)
            value = merge_trees(current if isinstance(current, dict) else {}, value)
        _set(out, key, value)
    return out


def check_key_exists(model: type[BaseModel], dotted: str, prefix: str) -> type[BaseModel] | None:
    """Raise :class:`ParamsError` unless ``dotted`` names a field of ``model``; returns the field's section
    model when it is a section (None for a value)."""
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
    return current


def read_params_file(path: Path) -> dict[str, Any]:
    """The parameters file as a mapping (a fresh copy; parsed once per content of the file)."""
    if not path.is_file():
        raise ParamsError(f"{path}: parameters file not found")
    return copy.deepcopy(_parsed_params(path.read_text(), str(path)))


@functools.lru_cache(maxsize=8)
def _parsed_params(text: str, shown: str) -> dict[str, Any]:
    try:
        data = load_yaml(text) or {}
    except yaml.YAMLError as err:
        raise ParamsError(f"{shown}: not valid YAML ({err})") from None
    if not isinstance(data, dict):
        raise ParamsError(f"{shown}: expected a mapping of slug -> parameters, got {type(data).__name__}")
    return data


def check_sections(path: Path, known: list[str]) -> None:
    """Every top-level section of the parameters file names a pipeline (a typo is not silently ignored)."""
    unknown = [k for k in read_params_file(path) if k not in known]
    if unknown:
        raise ParamsError(f"{path}: unknown section(s) {unknown}; sections are pipeline slugs: {', '.join(known)}")


def load_section(
    model: type[PipelineParams], slug: str, path: Path, overrides: list[tuple[str, Any]] = ()
) -> PipelineParams:
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

    ``check(path)`` reads the file (or folder, ``folder=True``) as the stage will, with its size limits applied
    before anything is allocated (array headers, JSON nesting and integer size, label values), and raises
    ``ValueError`` (or ``OSError``) naming what is wrong: the row, the column, the key. Messages must not quote
    the file's contents beyond the offending field. Whatever else escapes a check is still a refusal (exit 2),
    marked as the reader's defect (:data:`UNEXPECTED_READ_ERROR`). What ``check`` returns (a row count, the
    classes, a size) is handed to :meth:`PipelineParams.data_problems`, the rules over the files and the params
    together. The CLI (``run`` and ``stage``, hence ``dvc repro``) and the Prefect flow run every check of the
    parameters they are given before any work starts; relative paths are taken from the project root.
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


EMPTY_PATH_NOTE = "Leave empty for the pipeline's own offline data."


def form_schema(schema: dict[str, Any], model: type[PydanticModel], parameter: str = "params") -> dict[str, Any]:
    """A flow's parameter schema as the Prefect form should draw it: each path parameter (``DataFile``) a plain
    text field instead of a "str / None" choice, its description saying that empty means no file.

    The property loses its ``anyOf`` with ``null`` and its ``default: null``; Prefect's server, validating a run's
    values, reads a property without a default as optional and still accepts ``null`` for it (as
    ``params.yaml`` and ``--param`` give it), and the model reads an empty string as ``null``. The deployment's
    stored values hold ``""`` there (:func:`form_values`), as does the parameter's default in the schema. The schema is
    walked from ``parameter`` (the flow's argument holding ``model``) through the ``$ref`` of each section;
    ``schema`` is not modified."""
    out = copy.deepcopy(schema)
    definitions = out.get("definitions") or out.get("$defs") or {}

    def resolve(prop: dict[str, Any]) -> dict[str, Any] | None:
        for node in (prop, *prop.get("allOf", []), *prop.get("anyOf", [])):
            ref = node.get("$ref") if isinstance(node, dict) else None
            if ref:
                return definitions.get(ref.rsplit("/", 1)[-1])
        return prop if "properties" in prop else None

    def walk(node: dict[str, Any] | None, current: type[PydanticModel], seen: set[int]) -> None:
        if node is None or id(node) in seen:
            return
        seen.add(id(node))
        properties = node.get("properties", {})
        for name, info in current.model_fields.items():
            prop = properties.get(name)
            if not isinstance(prop, dict):
                continue
            if any(isinstance(m, DataFile) for m in info.metadata):
                described = prop.get("description", "").rstrip()
                properties[name] = {
                    **{k: v for k, v in prop.items() if k not in ("anyOf", "default", "type")},
                    "type": "string",
                    "description": f"{described} {EMPTY_PATH_NOTE}".strip(),
                }
                continue
            for sub in _models_in(info.annotation):
                walk(resolve(prop), sub, seen)

    root = out.get("properties", {}).get(parameter)
    if isinstance(root, dict):
        walk(resolve(root), model, set())
        if isinstance(root.get("default"), dict):
            root["default"] = form_values(root["default"], model)
    return out


def form_values(values: dict[str, Any], model: type[PydanticModel]) -> dict[str, Any]:
    """Parameter values as the form (and a deployment's stored parameters) hold them: a path parameter that names
    no file is ``""`` rather than ``null``, the value :func:`form_schema`'s text box holds when left empty (Prefect
    checks a deployment's parameters against the schema without reading a property as nullable)."""
    out = dict(values)
    for name, info in model.model_fields.items():
        if name not in out:
            continue
        if any(isinstance(m, DataFile) for m in info.metadata):
            out[name] = "" if out[name] is None else out[name]
            continue
        for sub in _models_in(info.annotation):
            if isinstance(out[name], dict):
                out[name] = form_values(out[name], sub)
    return out


def resolve_data_path(value: str, root: Path) -> Path:
    path = Path(value).expanduser()
    return path if path.is_absolute() else root / path


@dataclass(frozen=True)
class CheckedData:
    """A data-path parameter after its check: the resolved ``path`` (None: the parameter names no file, so the
    pipeline reads its offline data) and what the check returned (``summary``: a row count, the classes, ...)."""

    path: Path | None
    summary: Any = None


# what a data file's check raises for a malformed file; anything else escaping a check is a reader's defect,
# still refused (exit 2, the key and the file named) but marked as such
_EXPECTED_READ_ERRORS = (ValueError, OSError, KeyError)
UNEXPECTED_READ_ERROR = "the reader failed unexpectedly"


def _read_problem(err: Exception) -> str:
    if isinstance(err, _EXPECTED_READ_ERRORS):
        return _first_line(err)
    return f"{UNEXPECTED_READ_ERROR} ({type(err).__name__}: {_first_line(err)})"


def check_data_files(
    params: PipelineParams, root: Path, slug: str, groups: tuple[str, ...] | None = None
) -> dict[str, CheckedData]:
    """Run the declared check of every data file the params name (only under ``groups`` when given: a
    group such as ``data`` or a dotted key such as ``data.path``, as a stage declares them), then the rules
    that need the files and the params together (:meth:`PipelineParams.data_problems`), then ask the params
    what the run needs from its environment (:meth:`PipelineParams.environment_problems`).

    One contract for every data file: whatever a check raises (a reader's own ``ValueError``, a decoder's
    ``RecursionError``, a ``MemoryError``, a damaged archive's error) becomes a :class:`ParamsError`, so the
    CLI exits 2 with one line naming the parameter, the path and the problem (or the missing setting).
    Returns what was checked, by dotted key.
    """
    files: dict[str, CheckedData] = {}
    for dotted, spec in data_file_fields(type(params)):
        if groups is not None and not any(dotted == g or dotted.startswith(f"{g}.") for g in groups):
            continue
        value = _get(params, dotted, None)
        if value in (None, ""):
            files[dotted] = CheckedData(None)
            continue
        path = resolve_data_path(str(value), root)
        key = f"{slug}.{dotted}"
        if spec.folder and not path.is_dir():
            raise ParamsError(f"{key}: no folder at {path} (expected a {spec.description})")
        if not spec.folder and not path.is_file():
            raise ParamsError(f"{key}: no file at {path} (expected a {spec.description})")
        try:
            summary = spec.check(path)
        except Exception as err:  # noqa: BLE001 (the contract: any failure of a check is a refusal, exit 2)
            detail = _read_problem(err).removeprefix(f"{path}: ")  # readers often name the file themselves
            raise ParamsError(f"{key}: {path} is not a valid {spec.description}: {detail}") from None
        files[dotted] = CheckedData(path, summary)
    try:
        problems = params.data_problems(files)
    except Exception as err:  # noqa: BLE001 (a rule that cannot read what it compares is a refusal too)
        raise ParamsError(
            f"{slug}: the data files cannot be checked against the parameters: {_read_problem(err)}"
        ) from None
    for problem in problems:
        raise ParamsError(f"{slug}.{problem}")
    for problem in params.environment_problems(groups):
        raise ParamsError(f"{slug}: {problem}")
    return files


def _first_line(err: BaseException) -> str:
    text = str(err).strip() or type(err).__name__
    return text.splitlines()[0][:500]
