"""Tables for a terminal: columns fitted to its width, long cells wrapped at word boundaries.

``paperflows report`` prints Markdown when its output goes to a file or a pipe (a format other tools read) and
this table when it goes to a terminal. Columns keep their natural width while the table fits; otherwise the
widest columns give up width first, down to a floor, and their cells wrap: at spaces, and inside identifiers
after ``_``, ``-`` or ``/`` (``csa_beats_`` / ``contrastive``), never in the middle of a word unless the word alone
is wider than its column. A cell that would still take more than ``max_lines`` lines is cut with ``…``.
"""

from __future__ import annotations

import re
import shutil
import textwrap
from collections.abc import Callable, Sequence
from typing import Any

GAP = "  "
MIN_WIDTH = 8  # a column is never narrower than this (or its natural width, when that is smaller)
MAX_LINES = 6


class _Wrapper(textwrap.TextWrapper):
    """A wrapper that may also break after ``_``, ``/`` and ``-`` (identifiers and paths)."""

    wordsep_re = re.compile(r"(\s+|(?<=[_/\-])(?=[^\s_/\-]))")


SHORT = 14  # a column at most this wide is kept whole while the table can fit otherwise
MAX_PIECE = 18  # a longer unbreakable piece (a time-stamped folder name) may be cut inside


def _longest_piece(text: str) -> int:
    return max((len(p) for p in _Wrapper.wordsep_re.split(text) if p and not p.isspace()), default=0)


def terminal_width(default: int = 100) -> int:
    """The terminal's columns (``$COLUMNS`` first, as :func:`shutil.get_terminal_size` reads it)."""
    return max(40, shutil.get_terminal_size((default, 24)).columns)


def fit_widths(natural: Sequence[int], floors: Sequence[int], available: int) -> list[int]:
    """Column widths that sum to at most ``available``: each column gives up width in proportion to how far it is
    above its floor, never below it (when even the floors do not fit, the floors)."""
    widths = list(natural)
    excess = sum(widths) - available
    room = [max(n - f, 0) for n, f in zip(natural, floors)]
    if excess <= 0 or not sum(room):
        return widths
    if excess >= sum(room):
        return [min(n, f) for n, f in zip(natural, floors)]
    cuts = [excess * r // sum(room) for r in room]
    for i in sorted(range(len(room)), key=lambda i: -room[i]):  # what rounding left over, from the roomiest
        if sum(cuts) >= excess:
            break
        if cuts[i] < room[i]:
            cuts[i] += 1
    return [n - c for n, c in zip(natural, cuts)]


def wrap_cell(text: str, width: int, max_lines: int = MAX_LINES) -> list[str]:
    """``text`` in lines of at most ``width`` characters (see the module), at most ``max_lines`` of them."""
    if len(text) <= width:
        return [text]
    lines = _Wrapper(width=width, break_long_words=True, break_on_hyphens=True).wrap(text) or [""]
    if len(lines) > max_lines:
        lines = lines[:max_lines]
        lines[-1] = lines[-1][: max(width - 1, 0)].rstrip() + "…"
    return lines


def text_table(
    columns: Sequence[str],
    rows: Sequence[dict[str, Any]],
    width: int | None = None,
    show: Callable[[Any], str] = str,
    max_lines: int = MAX_LINES,
) -> str:
    """The rows as a plain-text table at most ``width`` columns wide (the terminal's by default); ``show`` turns a
    value into its text. Rows that wrap are set apart by a blank line."""
    width = width or terminal_width()
    cells = [[" ".join(show(row.get(c)).split()) for c in columns] for row in rows]
    natural = [max([len(c), *(len(r[i]) for r in cells)]) for i, c in enumerate(columns)]
    available = width - len(GAP) * (len(columns) - 1)
    pieces = [max([len(c), *(_longest_piece(r[i]) for r in cells)]) for i, c in enumerate(columns)]
    # short columns (a verdict, a count) stay whole while the long ones (ids, claims, paths) can give way; then
    # every column keeps its longest unbreakable piece (a word, an identifier's part); then the bare minimum
    whole = [min(n, max(MIN_WIDTH, min(p, MAX_PIECE), n if n <= SHORT else 0)) for n, p in zip(natural, pieces)]
    pieces_only = [min(n, max(MIN_WIDTH, min(p, MAX_PIECE))) for n, p in zip(natural, pieces)]
    bare = [min(n, MIN_WIDTH) for n in natural]  # headers wrap too
    floors = next((f for f in (whole, pieces_only) if sum(f) <= available), bare)
    widths = fit_widths(natural, floors, available)

    def render(values: list[str]) -> list[str]:
        wrapped = [wrap_cell(v, w, max_lines) for v, w in zip(values, widths)]
        height = max(len(w) for w in wrapped)
        return [
            GAP.join((w[k] if k < len(w) else "").ljust(widths[i]) for i, w in enumerate(wrapped)).rstrip()
            for k in range(height)
        ]

    head = render(list(columns))
    rule = GAP.join("─" * w for w in widths)
    body = [render(r) for r in cells]
    spaced = any(len(lines) > 1 for lines in body)
    out = [*head, rule]
    for index, lines in enumerate(body):
        if spaced and index:
            out.append("")
        out += lines
    return "\n".join(out)


__all__ = ["fit_widths", "terminal_width", "text_table", "wrap_cell"]
