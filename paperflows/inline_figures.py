"""Figures inside a markdown text, as ``data:`` URIs: a Prefect artifact that shows its figures with nothing else
running.

``report.md`` links its figures relative to the run folder (``![scaling](plots/scaling.png)``). A Prefect
markdown artifact is rendered by the Prefect UI alone, so relative links resolve nowhere and links to the MLflow UI
break whenever that UI is not up on the recorded port. Both Prefect UIs render ``data:image/png`` sources (the
Vue UI puts the link into the ``img`` as it is; the React UI's sanitiser allows ``data:image/`` for ``img``).

The artifact is stored in Prefect's database and sent to every browser that opens it, so the figures are
bounded: a figure over ``per_figure`` bytes is scaled down (PNG, at most ``max_width`` pixels wide, then smaller
until it fits), and once ``total`` bytes are used, or when a figure cannot be made small enough, it is replaced by a
line that says so and where the figure is (the run folder, the MLflow run).
"""

from __future__ import annotations

import base64
import io
import re
from dataclasses import dataclass, field
from pathlib import Path

PER_FIGURE = 350_000  # bytes of PNG (before base64, which adds a third)
TOTAL = 2_500_000
MAX_WIDTH = 1200  # pixels: wider than an artifact pane, and a figure scaled to it is still sharp

# ![caption](relative/path.png): an image link that is neither absolute nor already a data URI
_IMAGE = re.compile(r"!\[(?P<alt>[^\]]*)\]\((?P<src>(?![a-z][a-z0-9+.-]*:|/)[^)\s]+\.png)\)", re.IGNORECASE)


@dataclass
class Embedded:
    """What :func:`embed_figures` did: the text, and each figure's fate (``path -> note``)."""

    text: str
    embedded: dict[str, int] = field(default_factory=dict)  # relative path -> bytes embedded
    skipped: dict[str, str] = field(default_factory=dict)  # relative path -> why not


def png_within(data: bytes, limit: int, max_width: int = MAX_WIDTH) -> bytes | None:
    """``data`` (a PNG) as it is when it fits ``limit`` bytes, else scaled down until it does (None when even a
    figure 300 pixels wide does not, or the bytes are no image)."""
    if len(data) <= limit:
        return data
    from PIL import Image, UnidentifiedImageError

    try:
        image = Image.open(io.BytesIO(data))
        image.load()
    except (UnidentifiedImageError, OSError):
        return None
    if image.mode not in ("RGB", "RGBA", "L", "LA", "P"):
        image = image.convert("RGBA")
    width = min(image.width, max_width)
    while width >= 300:
        height = max(1, round(image.height * width / image.width))
        scaled = image.resize((width, height), Image.Resampling.LANCZOS) if width < image.width else image
        if scaled.mode == "RGBA" or scaled.mode == "RGB":  # 256 colours: plots have few, and the file shrinks
            scaled = scaled.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT)
        out = io.BytesIO()
        scaled.save(out, format="PNG", optimize=True)
        if out.tell() <= limit:
            return out.getvalue()
        width = int(width * 0.75)
    return None


def embed_figures(
    text: str, root: Path, *, per_figure: int = PER_FIGURE, total: int = TOTAL, elsewhere: str = "in the run folder"
) -> Embedded:
    """``text`` with each relative PNG image link (resolved under ``root``) replaced by a ``data:`` URI, within the
    byte budgets; a figure left out is replaced by an italic note naming it, its size and ``elsewhere``."""
    result = Embedded(text)
    used = 0

    def replace(match: re.Match[str]) -> str:
        nonlocal used
        alt, rel = match.group("alt"), match.group("src")
        path = root / rel
        try:
            data = path.read_bytes() if path.resolve().is_relative_to(root.resolve()) else None
        except OSError:
            data = None
        if data is None:
            result.skipped[rel] = "missing"
            return f"*(figure `{rel}`: not found)*"
        fitted = png_within(data, min(per_figure, total - used)) if used < total else None
        if fitted is None:
            why = "the artifact's figure budget is used up" if used >= total else f"{len(data) / 1e6:.1f} MB"
            result.skipped[rel] = why
            return f"*(figure `{rel}` not shown here ({why}): {elsewhere})*"
        used += len(fitted)
        result.embedded[rel] = len(fitted)
        return f"![{alt}](data:image/png;base64,{base64.b64encode(fitted).decode('ascii')})"

    result.text = _IMAGE.sub(replace, text)
    return result


__all__ = ["MAX_WIDTH", "PER_FIGURE", "TOTAL", "Embedded", "embed_figures", "png_within"]
