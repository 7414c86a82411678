"""Every parameter of a pipeline, read from its model: ``paperflows params <slug>`` and ``run --show``.

For each key (dotted, sections flattened) the model gives its type (``int``, ``list[float]``,
``'cpu' | 'paper'``, ``path or null``), its bounds (as the JSON schema states them: ``[1, 1000000]``,
``(0, 1]``, list lengths), its description, and ``PAPER_SCALE`` its paper value; ``params.yaml`` gives the
default a run gets. Only the paper's ``params.py`` is imported: no stage code, no torch.
"""

from __future__ import annotations

import json
import textwrap
import typing
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from paperflows.params import (
    Bounds,
    DataFile,
    PipelineParams,
    given_values,
    load_section,
    paper_scale_plan,
    parse_override,
    schema_bounds,
    show_number,
)
from paperflows.settings import Settings

WIDTH = 100
CHOICES_LISTED = 12  # a longer set of choices is listed as its first three, ..., its last, and its size


@dataclass(frozen=True)
class ParamDoc:
    """One parameter as ``paperflows params`` shows it."""

    key: str  # dotted: ``lora.r``
    section: str  # dotted section it belongs to, ``""`` at the top level
    type: str
    bounds: str
    value: Any  # what a run gets: params.yaml, the --set overrides, the paper preset
    default: Any  # the params.yaml value
    model_default: Any  # the model's own default (CPU scale)
    paper: Any  # the PAPER_SCALE value (None when the key has none: see in_paper_scale)
    in_paper_scale: bool
    description: str
    choices: list[Any] | None = None  # the values allowed (of each item, for a list), when they are a fixed set


# --------------------------------------------------------------------------------------------------
# walking a model
# --------------------------------------------------------------------------------------------------
def section_model(info: FieldInfo) -> type[BaseModel] | None:
    """The section model of a field that is a section, else None."""
    annotation = info.annotation
    return annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None


def leaf_fields(model: type[BaseModel], prefix: str = "") -> Iterator[tuple[str, FieldInfo]]:
    """``(dotted key, field)`` of every value of ``model`` in declaration order, sections flattened."""
    for name, info in model.model_fields.items():
        sub = section_model(info)
        if sub is None:
            yield f"{prefix}{name}", info
        else:
            yield from leaf_fields(sub, f"{prefix}{name}.")


def sections(model: type[BaseModel], prefix: str = "") -> Iterator[tuple[str, str]]:
    """``(dotted section, its description)`` of every section of ``model``, nested ones included."""
    for name, info in model.model_fields.items():
        sub = section_model(info)
        if sub is not None:
            yield f"{prefix}{name}", info.description or ""
            yield from sections(sub, f"{prefix}{name}.")


def field_at(model: type[BaseModel], dotted: str) -> FieldInfo | None:
    """The field a dotted key names, or None."""
    current: type[BaseModel] | None = model
    info = None
    for part in dotted.split("."):
        if current is None or part not in current.model_fields:
            return None
        info = current.model_fields[part]
        current = section_model(info)
    return info


def choices(info: FieldInfo) -> list[Any]:
    """The values a field can take when they are a fixed set (a ``Literal`` or a ``bool``), else ``[]``."""
    annotation = info.annotation
    if annotation is bool:
        return [True, False]
    if typing.get_origin(annotation) is typing.Literal:
        return list(typing.get_args(annotation))
    return []


def _properties(schema: dict[str, Any], model: type[BaseModel], prefix: str = "") -> dict[str, dict[str, Any]]:
    """Dotted key -> its JSON-schema property, sections resolved through ``$defs``."""
    defs = schema.get("$defs", {})

    def walk(node: dict[str, Any], current: type[BaseModel], pre: str) -> Iterator[tuple[str, dict[str, Any]]]:
        for name, info in current.model_fields.items():
            prop = node.get("properties", {}).get(name, {})
            sub = section_model(info)
            if sub is None:
                yield f"{pre}{name}", prop
            else:
                ref = prop.get("$ref") or next((b["$ref"] for b in prop.get("allOf", []) if "$ref" in b), "")
                yield from walk(defs.get(ref.rsplit("/", 1)[-1], {}), sub, f"{pre}{name}.")

    return dict(walk(schema, model, prefix))


# --------------------------------------------------------------------------------------------------
# types and bounds, readable
# --------------------------------------------------------------------------------------------------
def _literal(value: Any) -> str:
    return f"'{value}'" if isinstance(value, str) else json.dumps(value)


def type_label(prop: dict[str, Any], path: bool = False, shown: int | None = None) -> str:
    """A JSON-schema property as a short type: ``int``, ``list[float]``, ``'cpu' | 'paper'``, ``path or null``;
    ``shown``: at most that many choices of an enumeration, then ``...`` (none: ``choice``)."""
    branches = prop.get("anyOf")
    if branches:
        labels = [type_label(b, path, shown) for b in branches if b.get("type") != "null"]
        nullable = len(labels) < len(branches)
        return " | ".join(labels) + (" or null" if nullable else "")
    if "enum" in prop:
        values = [_literal(v) for v in prop["enum"]]
        if shown is None or shown >= len(values):
            return " | ".join(values)
        return " | ".join(values[:shown]) + " | ..." if shown else "choice"
    if "const" in prop:
        return _literal(prop["const"])
    kind = prop.get("type")
    if kind == "array":
        return f"list[{type_label(prop.get('items', {}), path, shown)}]"
    if kind == "string" and path:
        return "path"
    return {
        "integer": "int",
        "number": "float",
        "string": "str",
        "boolean": "bool",
        "null": "null",
        "object": "mapping",
    }.get(kind, "any")


def enum_of(prop: dict[str, Any]) -> list[Any] | None:
    """The allowed values of a property (of each item, for a list) when they are a fixed set."""
    for branch in [prop, *prop.get("anyOf", [])]:
        if "enum" in branch:
            return list(branch["enum"])
        if isinstance(branch.get("items"), dict) and "enum" in branch["items"]:
            return list(branch["items"]["enum"])
    return None


def choices_text(values: list[Any]) -> str:
    """``Choices: ta, ties, dare_ties.``; a long set as its first three, ..., its last and its size."""
    shown = [show_value(v) for v in values]
    if len(shown) > CHOICES_LISTED:
        shown = [*shown[:3], "...", f"{shown[-1]} ({len(values)} choices)"]
    return f"Choices: {', '.join(shown)}."


def _bound(value: float) -> str:
    return show_number(value).replace(",", "")


def interval(b: Bounds) -> str:
    """A number's bounds as an interval: ``[1, 1000000]``, ``(0, 1]``, ``>= 0`` (``""`` without bounds)."""
    if b.low is not None and b.high is not None:
        text = f"{'[' if b.low_inclusive else '('}{_bound(b.low)}, {_bound(b.high)}{']' if b.high_inclusive else ')'}"
    elif b.low is not None:
        text = f"{'>=' if b.low_inclusive else '>'} {_bound(b.low)}"
    elif b.high is not None:
        text = f"{'<=' if b.high_inclusive else '<'} {_bound(b.high)}"
    else:
        text = ""
    if b.multiple_of is not None:
        text = f"{text}, multiple of {_bound(b.multiple_of)}".lstrip(", ")
    return text


def bounds_label(b: Bounds) -> str:
    """Bounds of a value or a list: ``(0, 1]``; ``each [1, 10000]; len >= 1``; ``len 1-20``."""
    parts = []
    values = b.items
    while values is not None and values.items is not None:  # lists of lists: the numbers inside
        values = values.items
    if values is not None and interval(values):
        parts.append(f"each {interval(values)}")
    elif b.items is None and interval(b):
        parts.append(interval(b))
    lo, hi = b.min_items, b.max_items
    if lo is not None and hi is not None:
        parts.append(f"len {lo}" if lo == hi else f"len {lo}-{hi}")
    elif lo is not None:
        parts.append(f"len >= {lo}")
    elif hi is not None:
        parts.append(f"len <= {hi}")
    return "; ".join(parts)


def show_value(value: Any) -> str:
    """A value as it is written in params.yaml or after ``--set key=``: ``[0, 1, 2]``, ``null``, ``1.0e-05``."""
    text = yaml.safe_dump(value, default_flow_style=True, width=10**9, allow_unicode=True).strip()
    return text.removesuffix("\n...").strip()


# --------------------------------------------------------------------------------------------------
# the documentation of one model
# --------------------------------------------------------------------------------------------------
def schema_properties(model: type[PipelineParams]) -> dict[str, dict[str, Any]]:
    """Dotted key -> the key's property in the model's JSON schema (what the Prefect form is built from)."""
    return _properties(model.model_json_schema(), model)


def document(
    model: type[PipelineParams],
    values: PipelineParams,
    defaults: PipelineParams,
    props: dict[str, dict[str, Any]] | None = None,
) -> list[ParamDoc]:
    """One :class:`ParamDoc` per key of ``model``: ``values`` is what a run gets, ``defaults`` the params.yaml
    values; ``props``: the :func:`schema_properties` of ``model`` when already computed."""
    props = schema_properties(model) if props is None else props
    cpu = model(scale="cpu").model_dump()
    resolved, from_file = values.model_dump(), defaults.model_dump()
    docs = []
    for key, info in leaf_fields(model):
        section = key.rpartition(".")[0]
        prop = props.get(key, {})
        is_path = any(isinstance(m, DataFile) for m in info.metadata)
        docs.append(
            ParamDoc(
                key=key,
                section=section,
                type=type_label(prop, path=is_path),
                bounds=bounds_label(schema_bounds(prop)),
                value=_at(resolved, key),
                default=_at(from_file, key),
                model_default=_at(cpu, key),
                paper=model.PAPER_SCALE.get(key),
                in_paper_scale=key in model.PAPER_SCALE,
                description=" ".join((info.description or "").split()),
                choices=enum_of(prop),
            )
        )
    return docs


def _at(tree: dict[str, Any], dotted: str) -> Any:
    for part in dotted.split("."):
        tree = tree[part]
    return tree


def resolve(
    slug: str, overrides: list[str], settings: Settings
) -> tuple[type[PipelineParams], PipelineParams, PipelineParams]:
    """(model, values with the overrides, params.yaml values) of one pipeline; :class:`ParamsError` when the
    params.yaml section or an override is not valid."""
    from paperflows import registry

    model = registry.params_model(slug)
    defaults = load_section(model, slug, settings.params_file)
    values = load_section(model, slug, settings.params_file, [parse_override(o) for o in overrides])
    return model, values, defaults


# --------------------------------------------------------------------------------------------------
# paperflows params <slug>
# --------------------------------------------------------------------------------------------------
_COLUMNS = ("key", "type", "range", "value", "paper")
_WIDEST = {"type": 30, "range": 24, "value": 24, "paper": 20}
_NARROWEST = {"type": 15, "value": 18, "paper": 8}  # a key is never wrapped, a range only between its parts
_SHRINK_FIRST = ("paper", "range", "value", "type")
_LAST_RESORT = {"type": 12, "value": 12, "paper": 7}  # when long keys and ranges leave no room at the narrowest


def _fit(natural: dict[str, int], narrowest: dict[str, int], width: int) -> dict[str, int]:
    """Column widths: the natural ones (capped), shrunk in the order of ``_SHRINK_FIRST`` down to their
    narrowest until a row fits ``width``."""
    widths = {n: natural[n] if n == "key" else max(narrowest[n], min(_WIDEST[n], natural[n])) for n in _COLUMNS}
    excess = sum(widths.values()) + 2 + 2 * (len(widths) - 1) - width
    for floor in (narrowest, {n: min(narrowest[n], _LAST_RESORT.get(n, narrowest[n])) for n in narrowest}):
        for name in _SHRINK_FIRST:
            cut = min(max(excess, 0), widths[name] - floor[name])
            widths[name] -= cut
            excess -= cut
    return widths


def _type_cell(doc: ParamDoc, prop_label: Any, width: int) -> tuple[str, bool]:
    """The type as it fits ``width``: an enumeration loses its last choices first; (text, shortened)."""
    full = prop_label(None)
    if len(full) <= width or not doc.choices:
        return full, False
    for shown in range(len(doc.choices) - 1, -1, -1):
        text = prop_label(shown)
        if len(text) <= width:
            return text, True
    return prop_label(0), True


_KEEP = "\xa0"  # a space the wrapping does not break at: an interval stays on one line


def _wrap(text: str, width: int) -> list[str]:
    return [line.replace(_KEEP, " ") for line in textwrap.wrap(text, width, break_on_hyphens=False)] or [""]


def _notes(doc: ParamDoc, overridden: bool, shortened: bool) -> str:
    notes = [choices_text(doc.choices)] if shortened and doc.choices else []
    if overridden and doc.value != doc.default:
        notes.append(f"params.yaml: {show_value(doc.default)}")
    if doc.default != doc.model_default:
        notes.append(f"model default: {show_value(doc.model_default)}")
    if not notes:
        return ""
    head, extra = (notes[0], notes[1:]) if shortened and doc.choices else ("", notes)
    return (f" {head}" if head else "") + (f" ({'; '.join(extra)})" if extra else "")


def _unbroken(bounds: str) -> str:
    """Bounds with the spaces inside each part kept (``each [0, 10]; len >= 1`` wraps only after ``;``)."""
    return "; ".join(part.replace(" ", _KEEP) for part in bounds.split("; "))


def render(
    intro: list[str],
    docs: list[ParamDoc],
    labels: dict[str, Any],
    section_titles: dict[str, str],
    overridden: bool = False,
    width: int = WIDTH,
) -> str:
    """The table of ``paperflows params`` after the ``intro`` paragraphs, grouped by section under the
    section's description, each key's description wrapped under it; fits ``width`` columns. ``labels``:
    key -> ``shown -> type label``."""
    value_header = "value" if overridden else "default"
    cells = [
        {
            "key": d.key,
            "type": d.type,
            "range": _unbroken(d.bounds),
            "value": show_value(d.value),
            "paper": show_value(d.paper) if d.in_paper_scale else "",
        }
        for d in docs
    ]
    headers = {"key": "key", "type": "type", "range": "range", "value": value_header, "paper": "paper"}
    natural = {name: max([len(headers[name])] + [len(c[name]) for c in cells]) for name in _COLUMNS}
    narrowest = {
        **_NARROWEST,
        "key": natural["key"],
        "paper": min(_NARROWEST["paper"], natural["paper"]),
        "range": max([5] + [len(part) + 1 for c in cells for part in c["range"].split("; ")]),
    }
    widths = _fit(natural, narrowest, width)
    shortened = {}
    for doc, cell in zip(docs, cells):
        cell["type"], shortened[doc.key] = _type_cell(doc, labels[doc.key], widths["type"])
    indent = " " * (2 + widths["key"] + 2)

    def row(values: dict[str, str]) -> list[str]:
        wrapped = {name: _wrap(values[name], widths[name]) for name in widths}
        height = max(len(lines) for lines in wrapped.values())
        lines = []
        for i in range(height):
            parts = [(wrapped[n][i] if i < len(wrapped[n]) else "").ljust(widths[n]) for n in widths]
            lines.append(("  " + "  ".join(parts)).rstrip())
        return lines

    out = [line for paragraph in intro for line in [*_wrap(paragraph, width), ""]]
    groups: dict[str, list[tuple[ParamDoc, dict[str, str]]]] = {}
    for doc, cell in zip(docs, cells):
        groups.setdefault(doc.section, []).append((doc, cell))
    for section, members in groups.items():
        heading = f"{section}: {section_titles.get(section, '')}".rstrip(": ") if section else "top level"
        out += _wrap(heading, width)
        out += row(headers)
        for doc, cell in members:
            out += row(cell)
            text = doc.description + _notes(doc, overridden, shortened[doc.key])
            if text:
                out += textwrap.wrap(
                    text, width, initial_indent=indent, subsequent_indent=indent, break_on_hyphens=False
                )
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def params_text(slug: str, overrides: list[str], settings: Settings, as_json: bool = False) -> str:
    """What ``paperflows params <slug> [--set ...] [--json]`` prints."""
    from paperflows import registry

    model, values, defaults = resolve(slug, overrides, settings)
    props = schema_properties(model)
    docs = document(model, values, defaults, props)
    if as_json:
        return json.dumps([asdict(d) for d in docs], indent=2) + "\n"
    paper = registry.paper(slug)
    intro = [
        f"{slug}: {paper.title} ({paper.reference})",
        (
            f"Defaults are the params.yaml section '{slug}'; change one with `paperflows run {slug} --set "
            f"KEY=VALUE`. `--set scale=paper` switches every value still at its default to the paper column."
        ),
    ]
    if model.PAPER_SOURCE:
        intro.append(f"Paper values: {model.PAPER_SOURCE}")
    if model.EVIDENCE_SCALE:
        shown = ", ".join(f"{k}={show_value(v)}" for k, v in model.EVIDENCE_SCALE.items())
        intro.append(
            f"`--set scale=evidence` (the smallest budget that decides the headline claim on 2 CPU cores) "
            f"sets {shown}. {model.EVIDENCE_SOURCE}".rstrip()
        )
    costs = scale_costs(model)
    if costs:
        intro.append("Measured cost per scale: " + "; ".join(f"{k}: {v}" for k, v in costs.items()) + ".")
    labels = {d.key: _labeller(props.get(d.key, {}), d.type.startswith("path")) for d in docs}
    return render(intro, docs, labels, dict(sections(model)), overridden=bool(overrides))


def scale_costs(model: type[PipelineParams]) -> dict[str, str]:
    """Each scale's measured cost as the model states it, in the order cpu, evidence, paper."""
    return {scale: model.SCALE_COST[scale] for scale in ("cpu", "evidence", "paper") if scale in model.SCALE_COST}


def _labeller(prop: dict[str, Any], path: bool) -> Any:
    return lambda shown: type_label(prop, path=path, shown=shown)


# --------------------------------------------------------------------------------------------------
# paperflows run --show
# --------------------------------------------------------------------------------------------------
def show_run(resolved: dict[str, PipelineParams], settings: Settings, force: bool = False) -> str:
    """What ``paperflows run ... --show`` prints: per pipeline the parameters the run would get (YAML), what
    the paper preset changed or kept, and the folder the run would write to."""
    from paperflows.params import file_values

    out = []
    for slug, params in resolved.items():
        out.append(f"== {slug}: the parameters the run gets")
        out.append(
            yaml.dump(
                {slug: params.model_dump(mode="json")},
                Dumper=_FlowListDumper,
                sort_keys=False,
                width=WIDTH,
                allow_unicode=True,
            ).rstrip()
        )
        plan = paper_scale_plan(type(params), given_values(params))
        scale = params.scale
        if plan.changed:
            out.append(f"scale={scale} changed {len(plan.changed)} key(s) to the {scale} preset's value:")
            out += [f"  {c.key}: {show_value(c.value)} -> {show_value(c.paper)}" for c in plan.changed]
        if plan.kept:
            out.append(f"scale={scale} kept {len(plan.kept)} key(s) that were set explicitly:")
            out += [f"  {c.key}: {show_value(c.value)} ({scale}: {show_value(c.paper)})" for c in plan.kept]
        cost = type(params).SCALE_COST.get(scale)
        if cost:
            out.append(f"measured cost at scale={scale}: {cost}")
        on_file = file_values(type(params), slug, settings.params_file)
        differ = _differences(on_file, params) if on_file is not None else {}
        if differ:
            out.append(f"differs from params.yaml in {len(differ)} key(s):")
            out += [f"  {key}: {show_value(was)} -> {show_value(now)}" for key, (was, now) in differ.items()]
        if on_file is not None and not differ:
            where = (
                f"writes to: {_relative(settings.workspace(slug), settings.root)}/ (the DVC workspace: the "
                f"values equal params.yaml)"
            )
            if not force:
                where += "; skipped when DVC finds those outputs up to date (--force reruns)"
        else:
            where = (
                f"writes to: {_relative(settings.runs(slug), settings.root)}/<UTC time>-<flow run name>/ (a "
                f"new folder: the values differ from params.yaml; the DVC outputs are untouched)"
            )
        out += textwrap.wrap(where, WIDTH, subsequent_indent="  ", break_on_hyphens=False, break_long_words=False)
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def _differences(before: PipelineParams, after: PipelineParams) -> dict[str, tuple[Any, Any]]:
    """Dotted key -> (params.yaml value, run value) for every key whose value differs."""
    from paperflows.params import flatten

    old, new = flatten(before.model_dump()), flatten(after.model_dump())
    return {key: (old.get(key), value) for key, value in new.items() if old.get(key) != value}


class _FlowListDumper(yaml.SafeDumper):
    """Sections as block mappings, lists on one line: ``seeds: [0, 1, 2]``."""


_FlowListDumper.add_representer(
    list, lambda dumper, value: dumper.represent_sequence("tag:yaml.org,2002:seq", value, flow_style=True)
)


def _relative(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)
