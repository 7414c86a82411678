"""Sweeps: ``paperflows run <slug> --set lora.r=4,8,16 --set seeds=[0,1]`` runs every point of a grid.

A value with a comma outside brackets and quotes is a list of values to sweep (Hydra's multirun idea):
``lora.r=4,8,16`` sweeps three values, ``seeds=[0,1]`` stays one list, ``data.name='a,b'`` one string. Several
swept keys make a grid (their product). Every point is validated (parameters and data files) before anything
starts; a bad point refuses the whole sweep, naming it. Each point is a run of its own (its own folder under
``runs/<slug>/``, its own MLflow parent run tagged ``paperflows.sweep`` and ``paperflows.sweep.point``), ``-j N``
at a time on one local Prefect server; the sweep ends with one comparison table (the headline claim's verdict,
effect and interval per point) and a plot of the headline effect against the swept key, written under
``runs/<slug>/sweeps/<id>/``.
"""

from __future__ import annotations

import itertools
import json
import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from paperflows.params import ParamsError, load_yaml

SWEEP_ENV = "PAPERFLOWS_SWEEP_POINT"  # JSON {"id", "index", "values"} of the point a run belongs to
MAX_POINTS = 256


@dataclass(frozen=True)
class Sweep:
    """A grid of parameter points: the swept keys with their values, and the overrides every point shares."""

    id: str
    keys: list[str]
    points: list[dict[str, Any]]  # swept key -> value, one dict per point
    fixed: list[str]  # the other --set texts, shared by every point


def split_values(raw: str) -> list[str] | None:
    """The comma-separated values of ``raw`` at the top level (outside brackets, braces and quotes), or None when
    it holds no such comma (one value)."""
    depth, quote, parts, current = 0, "", [], []
    for char in raw:
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char in "[{(":
            depth += 1
        elif char in "]})":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append("".join(current))
            current = []
            continue
        current.append(char)
    if not parts:
        return None
    return [*parts, "".join(current)]


def plan(overrides: list[str]) -> Sweep | None:
    """The sweep ``overrides`` ask for (None when no value is a comma list). Refuses an empty or repeated value
    and grids beyond :data:`MAX_POINTS` points."""
    swept: dict[str, list[Any]] = {}
    fixed: list[str] = []
    for text in overrides:
        key, sep, raw = text.partition("=")
        values = split_values(raw) if sep else None
        if values is None:
            fixed.append(text)
            continue
        key = key.strip()
        if key in swept:
            raise ParamsError(f"--set {key}: swept twice")
        parsed = []
        for value in values:
            if not value.strip():
                raise ParamsError(f"--set {key}={raw}: an empty value in the sweep")
            parsed.append(load_yaml(value))
        if len({json.dumps(v, sort_keys=True, default=str) for v in parsed}) != len(parsed):
            raise ParamsError(f"--set {key}={raw}: a value repeats in the sweep")
        swept[key] = parsed
    if not swept:
        return None
    keys = list(swept)
    points = [dict(zip(keys, combo)) for combo in itertools.product(*(swept[k] for k in keys))]
    if len(points) > MAX_POINTS:
        raise ParamsError(f"the sweep has {len(points)} points (at most {MAX_POINTS}); narrow the grid")
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return Sweep(f"sweep-{stamp}-{os.getpid()}", keys, points, fixed)


def point_overrides(sweep: Sweep, index: int) -> list[str]:
    """The ``--set`` texts of one point: the shared ones, then the point's swept values (as JSON, valid YAML)."""
    return [*sweep.fixed, *(f"{k}={json.dumps(v)}" for k, v in sweep.points[index].items())]


def point_label(values: dict[str, Any]) -> str:
    return ", ".join(f"{k}={json.dumps(v)}" for k, v in values.items())


def point_env(sweep: Sweep, index: int) -> str:
    return json.dumps({"id": sweep.id, "index": index, "values": sweep.points[index]})


def current_point() -> dict[str, Any] | None:
    """The sweep point this process runs (set by the sweep's supervisor), or None."""
    raw = os.environ.get(SWEEP_ENV)
    if not raw:
        return None
    try:
        point = json.loads(raw)
    except json.JSONDecodeError:
        return None
    return point if isinstance(point, dict) and "id" in point else None


def point_tags() -> dict[str, str]:
    """MLflow tags of a sweep point's parent run (none outside a sweep)."""
    point = current_point()
    if point is None:
        return {}
    return {"paperflows.sweep": str(point["id"]), "paperflows.sweep.point": point_label(point.get("values", {}))}


# --------------------------------------------------------------------------------------------------
# the comparison
# --------------------------------------------------------------------------------------------------
def collect(runs_folder: Path, sweep_id: str) -> list[dict[str, Any]]:
    """The finished runs of a sweep (their run.json and report.json), in point order."""
    from components.io import load_json
    from paperflows.report import read_report

    found = []
    for run_file in sorted(runs_folder.glob("*/run.json")):
        try:
            run = load_json(run_file)
        except ValueError:
            continue
        point = run.get("sweep") if isinstance(run, dict) else None
        if not isinstance(point, dict) or point.get("id") != sweep_id:
            continue
        report_file = run_file.parent / "report.json"
        report = read_report(report_file) if report_file.is_file() else {}
        found.append(
            {
                "index": point["index"],
                "values": point.get("values", {}),
                "run": run,
                "report": report,
                "folder": run_file.parent,
            }
        )
    return sorted(found, key=lambda r: r["index"])


def comparison_rows(sweep: Sweep, found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per point: the swept values, the headline claim's verdict, effect and interval, the claims held,
    the wall time and the run folder; a point without a finished run says so."""
    from paperflows.report import fmt

    by_index = {r["index"]: r for r in found}
    rows = []
    for index, values in enumerate(sweep.points):
        row: dict[str, Any] = {k: json.dumps(v) for k, v in values.items()}
        hit = by_index.get(index)
        claims = (hit or {}).get("report", {}).get("claims", [])
        heads = [c for c in claims if c.get("headline")]
        if not hit or not heads:
            row.update(
                {
                    "headline": "(no finished run)",
                    "verdict": "",
                    "effect [95% CI]": "",
                    "n": "",
                    "claims held": "",
                    "wall time": "",
                    "run": str(hit["folder"].name) if hit else "",
                }
            )
        else:
            head = heads[0]
            low, high = (head.get("ci") or [None, None])[:2]
            row.update(
                {
                    "headline": head["id"],
                    "verdict": head["verdict"],
                    "effect [95% CI]": f"{fmt(head.get('effect'), 3)} [{fmt(low, 3)}, {fmt(high, 3)}]",
                    "n": head.get("n"),
                    "claims held": f"{sum(c['verdict'] == 'holds' for c in claims)}/{len(claims)}",
                    "wall time": f"{hit['run'].get('seconds', float('nan')):.0f} s",
                    "run": hit["folder"].name,
                }
            )
        rows.append(row)
    return rows


def write_comparison(sweep: Sweep, runs_folder: Path) -> tuple[str, Path]:
    """The comparison table (Markdown, also CSV) and the plot, under ``<runs_folder>/sweeps/<id>/``; returns the
    table's text and the folder."""
    from components.io import save_csv, save_text
    from paperflows.report import markdown_table

    found = collect(runs_folder, sweep.id)
    rows = comparison_rows(sweep, found)
    folder = runs_folder / "sweeps" / sweep.id
    columns = list(rows[0]) if rows else []
    table = markdown_table(columns, rows)
    save_text(
        f"# {sweep.id}\n\nSwept: {', '.join(sweep.keys)}; shared: {' '.join(sweep.fixed) or '-'}\n\n{table}\n",
        folder / "comparison.md",
    )
    save_csv(rows, folder / "comparison.csv", columns=columns)
    _plot(sweep, found, folder / "headline_vs_swept.png")
    return table, folder


def _plot(sweep: Sweep, found: list[dict[str, Any]], path: Path) -> None:
    """The headline claim's effect with its interval against the (first) swept key, one point per run."""
    from components.io import save_figure
    from paperflows.plots import figure

    xs, ys, lows, highs, labels = [], [], [], [], []
    key = sweep.keys[0]
    for hit in found:
        heads = [c for c in hit["report"].get("claims", []) if c.get("headline")]
        if not heads or heads[0].get("effect") is None:
            continue
        head = heads[0]
        low, high = (head.get("ci") or [None, None])[:2]
        value = hit["values"].get(key)
        xs.append(value if isinstance(value, (int, float)) and not isinstance(value, bool) else len(xs))
        labels.append(point_label(hit["values"]))
        ys.append(head["effect"])
        lows.append(head["effect"] - low if low is not None else 0.0)
        highs.append(high - head["effect"] if high is not None else 0.0)
    if not ys:
        return
    fig, ax = figure()
    ax.errorbar(xs, ys, yerr=[lows, highs], fmt="o-", capsize=4)
    numeric = all(isinstance(hit["values"].get(key), (int, float)) for hit in found)
    if not numeric:
        ax.set_xticks(xs, labels, rotation=30, ha="right")
    ax.set_xlabel(key if numeric else "point")
    ax.set_ylabel(f"headline effect ({found[0]['report'].get('slug', '')})")
    ax.axhline(0.0, color="grey", linewidth=0.8)
    ax.set_title(f"{sweep.id}: headline effect [95% CI] per point", fontsize=9)
    save_figure(fig, path)
