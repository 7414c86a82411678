"""A pipeline's graph drawn from the generated ``dvc.yaml``: stages in order, the artifacts they pass, their
parameter groups (``paperflows graph <slug>``).

The graph is read back from the one declaration that ``paperflows dvc-yaml`` wrote, so drawing it imports
no paper code and no torch. Three views of the same :class:`Graph`:

* :func:`to_text`: one block per stage (its inputs with the stage that wrote each, its outputs, its
  parameter groups, how many code files it depends on), arrows between the blocks;
* :func:`to_mermaid`: Mermaid ``flowchart`` source (stages as boxes, artifacts as cylinders, parameter
  groups as hexagons; edges stage -> artifact -> stage, parameter groups dotted);
* :func:`to_svg`: an SVG drawn here (no Graphviz, no script): stages top to bottom with their parameter
  groups as tags, each stage's outputs beside it, and every input as an arrow from the artifact to the
  stage that reads it, routed through lanes on the right. ``paperflows report --html`` embeds the same SVG.

Artifact paths are shown relative to the pipeline's workspace ``outputs/<slug>/``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from xml.sax.saxutils import escape, quoteattr

from paperflows.dvcgen import paper_stages, read_stages
from paperflows.settings import WORKSPACE_DIR

ArtifactKind = Literal["out", "metric", "plot", "external"]
_KINDS: tuple[tuple[str, ArtifactKind], ...] = (("outs", "out"), ("metrics", "metric"), ("plots", "plot"))
CODE_SUFFIXES = (".py",)


@dataclass(frozen=True)
class Artifact:
    """A file or folder passed between stages; ``producer`` is ``None`` for data no stage writes."""

    path: str
    kind: ArtifactKind
    producer: str | None


@dataclass
class StageNode:
    """One stage as ``dvc.yaml`` declares it (paths relative to the workspace)."""

    name: str
    dvc_name: str
    desc: str
    params: list[str]
    inputs: list[str]
    outputs: list[str]
    code: list[str] = field(default_factory=list)

    def param_groups(self) -> dict[str, list[str]]:
        """``group -> the keys read inside it`` (``[]`` when the stage reads the whole group or a top-level
        value): ``model.depths``, ``model.hidden``, ``seeds`` -> ``{"model": ["depths", "hidden"], "seeds": []}``."""
        groups: dict[str, list[str]] = {}
        for key in self.params:
            group, _, rest = key.partition(".")
            groups.setdefault(group, [])
            if rest:
                groups[group].append(rest)
        return groups


def _group_label(group: str, keys: list[str]) -> str:
    return f"{group} ({', '.join(keys)})" if keys else group


@dataclass
class Graph:
    """The stages of one pipeline in paper order, and every artifact they read or write."""

    slug: str
    stages: list[StageNode]
    artifacts: dict[str, Artifact]

    def consumers(self, path: str) -> list[str]:
        """The stages that read ``path``, in order."""
        return [s.name for s in self.stages if path in s.inputs]


def _path(item: Any) -> str:
    """A ``dvc.yaml`` list item: a path, or ``{path: options}``."""
    return next(iter(item)) if isinstance(item, dict) else str(item)


def from_dvc(dvc_file: Path, slug: str) -> Graph | None:
    """The graph of ``slug`` from a generated ``dvc.yaml`` (``None`` when the file has no stage of it)."""
    return all_from_dvc(dvc_file).get(slug)


def all_from_dvc(dvc_file: Path) -> dict[str, Graph]:
    """``slug -> Graph`` of every pipeline in a generated ``dvc.yaml`` (read once; empty when it is missing)."""
    by_slug: dict[str, list[tuple[str, str, dict[str, Any]]]] = {}
    for name, slug, stage, entry in paper_stages(read_stages(dvc_file)):
        by_slug.setdefault(slug, []).append((name, stage, entry))
    return {slug: _graph(slug, entries) for slug, entries in by_slug.items()}


def _graph(slug: str, entries: list[tuple[str, str, dict[str, Any]]]) -> Graph:
    """One pipeline's graph from its ``(DVC name, stage, entry)`` list, in ``dvc.yaml`` order.

    An input inside a folder another stage writes is drawn as that folder; an input that is neither code
    (``*.py`` outside the workspace) nor written by a stage is external data.
    """
    prefix = f"{WORKSPACE_DIR}/{slug}/"

    def short(path: str) -> str:
        return path[len(prefix) :] if path.startswith(prefix) else path

    artifacts: dict[str, Artifact] = {}
    for _, stage, entry in entries:
        for key, kind in _KINDS:
            for item in entry.get(key, []):
                rel = short(_path(item))
                artifacts.setdefault(rel, Artifact(rel, kind, stage))
    written = sorted(artifacts, key=len, reverse=True)  # the innermost folder that holds an input wins
    stages = []
    for name, stage, entry in entries:
        inputs, code = [], []
        for dep in entry.get("deps", []):
            dep = str(dep)
            if not dep.startswith(prefix) and dep.endswith(CODE_SUFFIXES):
                code.append(dep)
                continue
            rel = short(dep)
            holder = next((a for a in written if rel == a or rel.startswith(a.rstrip("/") + "/")), None)
            if holder is None:
                artifacts.setdefault(rel, Artifact(rel, "external", None))
                holder = rel
            if holder not in inputs:
                inputs.append(holder)
        params = [str(p).removeprefix(f"{slug}.") for p in entry.get("params", [])]
        outputs = [short(_path(item)) for key, _ in _KINDS for item in entry.get(key, [])]
        stages.append(
            StageNode(
                name=stage,
                dvc_name=name,
                desc=str(entry.get("desc", "")),
                params=params,
                inputs=inputs,
                outputs=list(dict.fromkeys(outputs)),
                code=code,
            )
        )
    return Graph(slug=slug, stages=stages, artifacts=artifacts)


# --------------------------------------------------------------------------------------------------
# text
# --------------------------------------------------------------------------------------------------
def _kind_note(artifact: Artifact) -> str:
    return {"metric": " (metrics)", "plot": " (plot)"}.get(artifact.kind, "")


def _files(count: int, what: str = "") -> str:
    return f"{count} {what}file" + ("" if count == 1 else "s")


def to_text(graph: Graph) -> str:
    """One block per stage: inputs (with the stage that writes each), outputs, parameter groups, code files."""
    lines = [
        f"{graph.slug}: {len(graph.stages)} stages (paths under {WORKSPACE_DIR}/{graph.slug}/; "
        f"params under '{graph.slug}' in params.yaml)",
        "",
    ]
    width = len(str(len(graph.stages)))
    for i, stage in enumerate(graph.stages, 1):
        if i > 1:
            lines += ["    |", "    v"]
        lines.append(
            f"[{i:>{width}}] {stage.name}" + (f"  (dvc stage {stage.dvc_name})" if stage.dvc_name != stage.name else "")
        )
        if stage.desc:
            lines.append(f"      {stage.desc}")
        groups = [_group_label(g, keys) for g, keys in stage.param_groups().items()]
        lines.append(f"      params:  {', '.join(groups) or '(none)'}")
        if stage.inputs:
            for j, rel in enumerate(stage.inputs):
                artifact = graph.artifacts[rel]
                origin = f"from {artifact.producer}" if artifact.producer else "external data"
                lines.append(f"      {'in:' if j == 0 else '':<8} {rel}  <- {origin}")
        else:
            lines.append(f"      {'in:':<8} (none)")
        for j, rel in enumerate(stage.outputs):
            readers = graph.consumers(rel)
            to = f"  -> {', '.join(readers)}" if readers else ""
            lines.append(f"      {'out:' if j == 0 else '':<8} {rel}{_kind_note(graph.artifacts[rel])}{to}")
        lines.append(f"      code:    {_files(len(stage.code))}")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------------------
# Mermaid
# --------------------------------------------------------------------------------------------------
def _mermaid_label(text: str) -> str:
    """A quoted Mermaid label: quotes and the characters Mermaid reads as markup as entity codes."""
    return '"' + "".join(f"#{ord(c)};" if c in '"#<>&' else c for c in text) + '"'


def to_mermaid(graph: Graph) -> str:
    """Mermaid ``flowchart TD`` source: stages as boxes, artifacts as cylinders, parameter groups as hexagons."""
    stage_id = {s.name: f"s{i}" for i, s in enumerate(graph.stages)}
    artifact_id = {rel: f"a{i}" for i, rel in enumerate(graph.artifacts)}
    groups = list(dict.fromkeys(g for s in graph.stages for g in s.param_groups()))
    param_id = {p: f"p{i}" for i, p in enumerate(groups)}
    lines = ["flowchart TD"]
    lines += [f"    {stage_id[s.name]}[{_mermaid_label(s.name)}]" for s in graph.stages]
    lines += [f"    {artifact_id[rel]}[({_mermaid_label(rel)})]" for rel in graph.artifacts]
    lines += [f"    {param_id[p]}{{{{{_mermaid_label(p)}}}}}" for p in groups]
    for stage in graph.stages:
        lines += [f"    {artifact_id[rel]} --> {stage_id[stage.name]}" for rel in stage.inputs]
        lines += [f"    {stage_id[stage.name]} --> {artifact_id[rel]}" for rel in stage.outputs]
        lines += [f"    {param_id[g]} -.-> {stage_id[stage.name]}" for g in stage.param_groups()]
    lines += [
        "    classDef stage fill:#e8f0fe,stroke:#3b6fd8,color:#111",
        "    classDef artifact fill:#f4f4f4,stroke:#888,color:#111",
        "    classDef param fill:#fff4d6,stroke:#c9a227,color:#111",
    ]
    for cls, ids in (("stage", stage_id.values()), ("artifact", artifact_id.values()), ("param", param_id.values())):
        if ids:
            lines.append(f"    class {','.join(ids)} {cls}")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------------------
# SVG
# --------------------------------------------------------------------------------------------------
FONT = 'font-family="DejaVu Sans, Helvetica, Arial, sans-serif"'
CHAR_W, TAG_CHAR_W = 7.0, 6.4  # average advance of the 12 px and 10.5 px text (no font metrics here)
MARGIN, STAGE_W, GAP_X, LANE_GAP = 16, 250, 44, 9
ART_H, ART_GAP, ENTRY_GAP, BAND_GAP = 20, 6, 8, 22
TAG_H, TAG_GAP = 16, 4
COLOURS = {
    "stage": ("#e8f0fe", "#3b6fd8"),
    "out": ("#f4f4f4", "#8a8a8a"),
    "metric": ("#e9f7ee", "#3c9a5f"),
    "plot": ("#f3ecfb", "#8856c4"),
    "external": ("#fff", "#8a8a8a"),
    "tag": ("#fff4d6", "#c9a227"),
}
EDGE = "#5b6b80"


@dataclass
class _Box:
    x: float
    y: float
    w: float
    h: float


def _tag_rows(stage: StageNode) -> list[list[tuple[str, str, float]]]:
    """The stage's parameter-group tags wrapped into rows that fit inside its box: ``(label, keys, width)``.

    A group the stage reads in part is labelled with the number of its keys (``model (6)``), which are
    listed on hover."""
    rows: list[list[tuple[str, str, float]]] = [[]]
    used = 0.0
    for group, keys in stage.param_groups().items():
        label = f"{group} ({len(keys)})" if keys else group
        width = len(label) * TAG_CHAR_W + 10
        if rows[-1] and used + width > STAGE_W - 16:
            rows.append([])
            used = 0.0
        rows[-1].append((label, f"{stage.name} reads {_group_label(group, keys)}", width))
        used += width + TAG_GAP
    return rows if rows[0] else []


def _arrowhead(x: float, y: float, direction: Literal["left", "right"]) -> str:
    d = -1 if direction == "left" else 1
    return (
        f'<polygon points="{x:.1f},{y:.1f} {x - 7 * d:.1f},{y - 3.5:.1f} {x - 7 * d:.1f},{y + 3.5:.1f}" fill="{EDGE}"/>'
    )


def to_svg(graph: Graph, standalone: bool = True) -> str:
    """The graph as SVG: a layered drawing, stages top to bottom, outputs beside their stage, inputs as arrows.

    Each stage is a band: the stage box (name, parameter-group tags, code-file count) on the left, its
    outputs stacked on the right. External inputs form a first band. An artifact read by later stages gets a
    vertical lane right of the artifacts; at each reader the lane turns left into the stage box, in the
    band's top gutter (kept free of artifacts, so no arrow crosses a box). ``standalone=False`` leaves out
    the XML declaration and namespace, for an ``<svg>`` inside an HTML page. Hovering a box shows its details.
    """
    external = [rel for rel, a in graph.artifacts.items() if a.producer is None]
    art_w = max([len(rel) * CHAR_W + 18 for rel in graph.artifacts] + [120])
    art_x = MARGIN + STAGE_W + GAP_X
    boxes: dict[str, _Box] = {}
    stage_boxes: list[_Box] = []
    entries: dict[tuple[str, str], float] = {}  # (artifact, reader) -> y where its arrow enters the reader
    labels: list[str] = []
    y = float(MARGIN)
    if external:
        labels.append(f'<text x="{art_x}" y="{y + 10:.1f}" font-size="11" fill="#666" {FONT}>external data</text>')
        y += 16
        for rel in external:
            boxes[rel] = _Box(art_x, y, art_w, ART_H)
            y += ART_H + ART_GAP
        y += BAND_GAP - ART_GAP
    for stage in graph.stages:
        gutter = ENTRY_GAP * (len(stage.inputs) + 1)
        tags = _tag_rows(stage)
        stage_h = max(30 + len(tags) * (TAG_H + TAG_GAP) + 16, gutter + ART_H + 4)
        box = _Box(MARGIN, y, STAGE_W, stage_h)
        stage_boxes.append(box)
        for j, rel in enumerate(stage.inputs):
            entries[(rel, stage.name)] = y + ENTRY_GAP * (j + 1)
        out_y = y + gutter
        for rel in stage.outputs:
            boxes.setdefault(rel, _Box(art_x, out_y, art_w, ART_H))
            out_y += ART_H + ART_GAP
        y = max(y + stage_h, out_y - ART_GAP) + BAND_GAP
    # lanes: one per artifact that is read, reused once an earlier lane's last arrow lies above its start
    lane_of: dict[str, int] = {}
    lane_end: list[float] = []
    read = [rel for rel in graph.artifacts if graph.consumers(rel) and rel in boxes]
    for rel in sorted(read, key=lambda r: boxes[r].y):
        start = boxes[rel].y + ART_H / 2
        end = max(entries[(rel, reader)] for reader in graph.consumers(rel))
        free = next((i for i, last in enumerate(lane_end) if last < start - 4), None)
        if free is None:
            lane_end.append(end)
            free = len(lane_end) - 1
        lane_end[free] = end
        lane_of[rel] = free
    lanes_x = art_x + art_w + 18
    width = lanes_x + LANE_GAP * max(len(lane_end), 1) + MARGIN
    height = y - BAND_GAP + MARGIN

    edges: list[str] = []
    bus_x = art_x - 14
    for stage, box in zip(graph.stages, stage_boxes):  # stage -> a short bus -> each of its outputs
        if not stage.outputs:
            continue
        first, last = (boxes[stage.outputs[k]].y + ART_H / 2 for k in (0, -1))
        edges.append(
            f'<path d="M{box.x + box.w:.1f},{first:.1f} H{bus_x:.1f} V{last:.1f}" fill="none" '
            f'stroke="{EDGE}" stroke-width="1.2"/>'
        )
        for rel in stage.outputs:
            mid = boxes[rel].y + ART_H / 2
            edges.append(
                f'<line x1="{bus_x:.1f}" y1="{mid:.1f}" x2="{art_x - 1:.1f}" y2="{mid:.1f}" '
                f'stroke="{EDGE}" stroke-width="1.2"/>'
            )
            edges.append(_arrowhead(art_x - 1, mid, "right"))
    for rel, lane in lane_of.items():  # artifact -> lane -> each reader
        src = boxes[rel]
        x = lanes_x + LANE_GAP * lane
        y0 = src.y + ART_H / 2
        readers = graph.consumers(rel)
        y1 = max(entries[(rel, r)] for r in readers)
        edges.append(
            f'<path d="M{src.x + src.w:.1f},{y0:.1f} H{x:.1f} V{y1:.1f}" fill="none" '
            f'stroke="{EDGE}" stroke-width="1.2"><title>{escape(rel)} read by '
            f"{escape(', '.join(readers))}</title></path>"
        )
        for reader in readers:
            entry_y = entries[(rel, reader)]
            edges.append(
                f'<line x1="{x:.1f}" y1="{entry_y:.1f}" x2="{MARGIN + STAGE_W + 1:.1f}" '
                f'y2="{entry_y:.1f}" stroke="{EDGE}" stroke-width="1.2"/>'
            )
            edges.append(_arrowhead(MARGIN + STAGE_W + 1, entry_y, "left"))
            edges.append(f'<circle cx="{x:.1f}" cy="{entry_y:.1f}" r="2" fill="{EDGE}"/>')

    nodes: list[str] = []
    for i, (stage, box) in enumerate(zip(graph.stages, stage_boxes), 1):
        fill, stroke = COLOURS["stage"]
        info = f"{stage.dvc_name}: {stage.desc}" if stage.desc else stage.dvc_name
        nodes.append(
            f'<g class="stage"><title>{escape(info)}</title>'
            f'<rect x="{box.x}" y="{box.y:.1f}" width="{box.w}" height="{box.h:.1f}" rx="5" '
            f'fill="{fill}" stroke="{stroke}" stroke-width="1.5"/>'
            f'<text x="{box.x + 10}" y="{box.y + 19:.1f}" font-size="13" font-weight="bold" '
            f'fill="#111" {FONT}>{i}. {escape(stage.name)}</text>'
        )
        ty = box.y + 28
        for row in _tag_rows(stage):
            tx = box.x + 8
            for label, info, w in row:
                t_fill, t_stroke = COLOURS["tag"]
                nodes.append(
                    f'<g class="param"><title>{escape(info)}</title>'
                    f'<rect x="{tx:.1f}" y="{ty:.1f}" width="{w:.1f}" height="{TAG_H}" rx="8" '
                    f'fill="{t_fill}" stroke="{t_stroke}"/><text x="{tx + 5:.1f}" y="{ty + 11.5:.1f}" '
                    f'font-size="10.5" fill="#5a4700" {FONT}>{escape(label)}</text></g>'
                )
                tx += w + TAG_GAP
            ty += TAG_H + TAG_GAP
        nodes.append(
            f'<text x="{box.x + 10}" y="{box.y + box.h - 6:.1f}" font-size="10" fill="#666" {FONT}>'
            f"{_files(len(stage.code), 'code ')}</text></g>"
        )
    for rel, box in boxes.items():
        artifact = graph.artifacts[rel]
        fill, stroke = COLOURS[artifact.kind]
        origin = f"written by {artifact.producer}" if artifact.producer else "external data"
        readers = graph.consumers(rel)
        info = f"{rel} ({artifact.kind}; {origin}" + (f"; read by {', '.join(readers)})" if readers else ")")
        dash = ' stroke-dasharray="4 3"' if artifact.kind == "external" else ""
        nodes.append(
            f'<g class="artifact"><title>{escape(info)}</title>'
            f'<rect x="{box.x}" y="{box.y:.1f}" width="{box.w:.1f}" height="{box.h}" rx="10" '
            f'fill="{fill}" stroke="{stroke}"{dash}/><text x="{box.x + 9}" y="{box.y + 14:.1f}" '
            f'font-size="12" fill="#222" {FONT}>{escape(rel)}</text></g>'
        )

    namespace = ' xmlns="http://www.w3.org/2000/svg"' if standalone else ""
    head = '<?xml version="1.0" encoding="UTF-8"?>\n' if standalone else ""
    label = quoteattr(f"pipeline graph of {graph.slug}: {len(graph.stages)} stages")
    return (
        f'{head}<svg{namespace} width="{width:.0f}" height="{height:.0f}" '
        f'viewBox="0 0 {width:.0f} {height:.0f}" role="img" aria-label={label}>'
        f'<rect width="100%" height="100%" fill="#fff"/>'
        + "".join(edges)
        + "".join(nodes)
        + "".join(labels)
        + "</svg>\n"
    )
