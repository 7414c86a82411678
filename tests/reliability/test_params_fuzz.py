"""Generated bad values for every field of every pipeline's parameters: each is refused before any work.

For each leaf of a params model's JSON schema (what a deployment form shows), hypothesis draws values
the schema forbids: the wrong type (a bool for a number, a fraction for a whole number, text for a
number, a scalar for a list), a number outside the bounds, ``nan`` / ``inf``, a word outside an enum,
too few or too many list items, and bad list items. ``paperflows run <slug> --set key=value`` must exit
2 naming the key, start nothing and write nothing.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from paperflows import registry


def leaves(schema: dict[str, Any], defs: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """``(dotted key, schema)`` of every field that holds a value (sections are walked into)."""
    if "$ref" in schema:
        schema = defs[schema["$ref"].split("/")[-1]]
    if schema.get("type") == "object" and "properties" in schema:
        for name, sub in schema["properties"].items():
            yield from leaves(sub, defs, f"{prefix}{name}.")
        return
    yield prefix.rstrip("."), schema


def field_leaves(slug: str) -> list[tuple[str, dict[str, Any]]]:
    schema = registry.params_model(slug).model_json_schema()
    return list(leaves(schema, schema.get("$defs", {})))


def _options(schema: dict[str, Any]) -> list[dict[str, Any]]:
    return schema.get("anyOf", [schema])


def _nullable(schema: dict[str, Any]) -> bool:
    return any(o.get("type") == "null" for o in _options(schema))


def invalid(schema: dict[str, Any]) -> st.SearchStrategy[Any] | None:
    """Values no option of ``schema`` accepts, or None when the schema forbids nothing we can draw."""
    options = [o for o in _options(schema) if o.get("type") != "null"]
    if len(options) != 1:
        return None
    node, draws = options[0], []
    kind = node.get("type")
    if not _nullable(schema) and "default" in schema and kind is not None:
        draws.append(st.just(None))
    if kind in ("integer", "number"):
        draws.append(st.booleans())
        draws.append(st.text(alphabet="abcxyz", min_size=1, max_size=5))
        draws.append(st.sampled_from([math.nan, math.inf, -math.inf]))
        if kind == "integer":
            draws.append(st.floats(allow_nan=False, allow_infinity=False).filter(lambda v: not v.is_integer()))
        for bound, below in (
            ("minimum", True),
            ("exclusiveMinimum", True),
            ("maximum", False),
            ("exclusiveMaximum", False),
        ):
            if bound in node:
                edge = node[bound]
                step = 1 if kind == "integer" else max(1e-6, abs(edge) * 1e-6)
                exclusive = bound.startswith("exclusive")
                if below:
                    limit = edge if exclusive else edge - step
                    draws.append(
                        st.integers(max_value=math.floor(limit))
                        if kind == "integer"
                        else st.floats(max_value=limit, allow_nan=False, allow_infinity=False)
                    )
                else:
                    limit = edge if exclusive else edge + step
                    draws.append(
                        st.integers(min_value=math.ceil(limit))
                        if kind == "integer"
                        else st.floats(min_value=limit, allow_nan=False, allow_infinity=False)
                    )
    elif "enum" in node or "const" in node:
        allowed = node.get("enum", [node.get("const")])
        draws.append(st.text(alphabet="abcdefxyz_", min_size=1, max_size=8).filter(lambda v: v not in allowed))
        draws.append(st.booleans())
    elif kind == "boolean":
        draws.append(st.sampled_from([2, "maybe", 0.5]))
    elif kind == "array":
        draws.append(st.sampled_from([5, "text", True]))
        if "minItems" in node and node["minItems"] > 0:
            draws.append(st.just([]))
        if "maxItems" in node:
            draws.append(st.just([0] * (node["maxItems"] + 1)))
        item = invalid({"anyOf": [node["items"]]}) if "items" in node else None
        if item is not None:
            draws.append(st.lists(item, min_size=1, max_size=3))
    elif kind == "string" and "pattern" not in node:
        draws.append(st.sampled_from([3, True, [1]]))
    return st.one_of(draws) if draws else None


def yaml_text(value: Any) -> str:
    """The value as ``--set`` takes it: JSON (a subset of YAML), with YAML's spelling of nan and inf."""
    if isinstance(value, float) and not math.isfinite(value):
        return ".nan" if math.isnan(value) else (".inf" if value > 0 else "-.inf")
    if isinstance(value, list):
        return "[" + ", ".join(yaml_text(v) for v in value) + "]"
    if value is None:
        return "null"
    return json.dumps(value)


def bad_values(slug: str) -> st.SearchStrategy[tuple[str, Any]]:
    pairs = [(key, strategy) for key, schema in field_leaves(slug) if (strategy := invalid(schema)) is not None]
    return st.one_of([strategy.map(lambda v, key=key: (key, v)) for key, strategy in pairs])


def test_every_field_of_every_pipeline_can_be_fuzzed() -> None:
    """The generator covers the parameters (a schema it cannot read would silently test nothing)."""
    for slug in registry.slugs():
        found = field_leaves(slug)
        covered = [key for key, schema in found if invalid(schema) is not None]
        assert len(found) >= 10 and len(covered) >= 0.9 * len(found), (
            slug,
            sorted({k for k, _ in found} - set(covered)),
        )


@pytest.mark.parametrize("slug", registry.slugs())
def test_a_generated_bad_value_is_refused_naming_its_key(slug: str, refused) -> None:
    @settings(
        max_examples=40,
        deadline=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(bad_values(slug))
    def check(pair: tuple[str, Any]) -> None:
        key, value = pair
        outcome = refused(["run", slug, "--set", f"{key}={yaml_text(value)}"])
        assert outcome.code == 2, (key, value, outcome.output)
        assert f"{slug}.{key}" in outcome.output, (key, value, outcome.output)
        assert not outcome.traceback and outcome.reached == [] and outcome.changed == [], (key, value, outcome)

    check()


def test_every_number_has_a_lower_and_an_upper_bound() -> None:
    """An unbounded number lets a value through that crashes a stage (``lora.alpha=1e308`` gave a NaN loss):
    every int and float field, list items included, states both bounds in its schema (the form shows them)."""
    unbounded = []
    for slug in registry.slugs():
        for key, schema in field_leaves(slug):
            for option in _options(schema):
                node = option.get("items", {}) if option.get("type") == "array" else option
                if node.get("type") in ("integer", "number") and "enum" not in node and "const" not in node:
                    low = "minimum" in node or "exclusiveMinimum" in node
                    high = "maximum" in node or "exclusiveMaximum" in node
                    if not (low and high):
                        unbounded.append(f"{slug}.{key}")
    assert unbounded == []
