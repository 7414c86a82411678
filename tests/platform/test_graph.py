"""``paperflows graph``: a pipeline's stages, artifacts and parameter groups drawn from the generated dvc.yaml,
as text, as Mermaid source and as an SVG laid out by our own code."""

from __future__ import annotations

import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

from paperflows import graph, registry
from paperflows.__main__ import main
from paperflows.dvcgen import stages_by_slug
from tests.conftest import REPO

SVG = "{http://www.w3.org/2000/svg}"

# three stages: an external data file, an input inside a folder an earlier stage writes, metrics and plots
DVC = {
    "stages": {
        "toy-prepare": {
            "cmd": "paperflows stage toy prepare",
            "desc": "Sample the <data> & split it.",
            "deps": ["components/data/toy.py", "pipelines/toy/pipeline.py", "outputs/toy/raw/input.csv"],
            "params": ["toy.scale", "toy.data"],
            "outs": ["outputs/toy/data/train.safetensors", "outputs/toy/models"],
        },
        "toy-train": {
            "cmd": "paperflows stage toy train",
            "desc": "Train per seed.",
            "deps": [
                "pipelines/toy/pipeline.py",
                "outputs/toy/data/train.safetensors",
                "outputs/toy/models/init.safetensors",
            ],
            "params": ["toy.scale", "toy.seeds", "toy.train.steps", "toy.train.lr"],
            "outs": ["outputs/toy/models/final"],
            "metrics": [{"outputs/toy/metrics/train.json": {"cache": False}}],
            "plots": ["outputs/toy/plots/loss.png", {"outputs/toy/plots/loss.csv": {"x": "step", "y": "loss"}}],
        },
        "toy": {
            "cmd": "paperflows stage toy report",
            "deps": ["pipelines/toy/report.py", "outputs/toy/data/train.safetensors", "outputs/toy/metrics/train.json"],
            "params": ["toy.seeds"],
            "outs": ["outputs/toy/report.json", "outputs/toy/report.md"],
        },
        "other-only": {"cmd": "paperflows stage other only", "deps": [], "outs": ["outputs/other/x.json"]},
    }
}


@pytest.fixture()
def toy(tmp_path: Path) -> graph.Graph:
    path = tmp_path / "dvc.yaml"
    path.write_text(yaml.safe_dump(DVC, sort_keys=False))
    found = graph.from_dvc(path, "toy")
    assert found is not None
    return found


def test_graph_reads_stages_inputs_outputs_and_params_from_dvc_yaml(toy: graph.Graph, tmp_path: Path) -> None:
    assert [(s.name, s.dvc_name) for s in toy.stages] == [
        ("prepare", "toy-prepare"),
        ("train", "toy-train"),
        ("report", "toy"),
    ]
    prepare, train, report = toy.stages
    assert prepare.inputs == ["raw/input.csv"] and toy.artifacts["raw/input.csv"].producer is None
    assert prepare.code == ["components/data/toy.py", "pipelines/toy/pipeline.py"]
    assert train.inputs == ["data/train.safetensors", "models"]  # a file inside the folder prepare writes
    assert train.params == ["scale", "seeds", "train.steps", "train.lr"]
    assert train.param_groups() == {"scale": [], "seeds": [], "train": ["steps", "lr"]}
    assert train.outputs == ["models/final", "metrics/train.json", "plots/loss.png", "plots/loss.csv"]
    assert [toy.artifacts[o].kind for o in train.outputs] == ["out", "metric", "plot", "plot"]
    assert toy.consumers("data/train.safetensors") == ["train", "report"]
    assert report.inputs == ["data/train.safetensors", "metrics/train.json"]
    assert graph.from_dvc(tmp_path / "dvc.yaml", "nosuch") is None
    assert graph.from_dvc(tmp_path / "missing.yaml", "toy") is None


def test_text_view_is_one_block_per_stage_with_arrows_between(toy: graph.Graph) -> None:
    text = graph.to_text(toy)
    blocks = text.split("    |\n    v\n")
    assert len(blocks) == 3
    assert "[1] prepare  (dvc stage toy-prepare)" in blocks[0]
    assert "raw/input.csv  <- external data" in blocks[0]
    assert "code:    2 files" in blocks[0] and "code:    1 file\n" in blocks[1]
    assert "data/train.safetensors  -> train, report" in blocks[0]
    assert re.search(r"in: +data/train\.safetensors  <- from prepare\n +models  <- from prepare", blocks[1])
    assert "metrics/train.json (metrics)  -> report" in blocks[1]
    assert "params:  scale, seeds, train (steps, lr)\n" in blocks[1]
    assert "[3] report  (dvc stage toy)" in blocks[2]


def test_mermaid_has_three_node_shapes_and_edges_through_artifacts(toy: graph.Graph) -> None:
    lines = graph.to_mermaid(toy).splitlines()
    assert lines[0] == "flowchart TD"
    nodes = {m[1]: (m[2], m[3]) for line in lines if (m := re.fullmatch(r"\s+(\w+)(\[\(|\[|\{\{)\"(.*)\".*", line))}
    stages = {label: n for n, (shape, label) in nodes.items() if shape == "["}
    artifacts = {label: n for n, (shape, label) in nodes.items() if shape == "[("}
    params = {label: n for n, (shape, label) in nodes.items() if shape == "{{"}
    assert list(stages) == ["prepare", "train", "report"]
    assert set(params) == {"scale", "data", "seeds", "train"}
    assert "models/final" in artifacts and "raw/input.csv" in artifacts
    edges = {line.strip() for line in lines if "-->" in line or "-.->" in line}
    data = artifacts["data/train.safetensors"]
    assert {
        f"{stages['prepare']} --> {data}",
        f"{data} --> {stages['train']}",
        f"{data} --> {stages['report']}",
        f"{params['seeds']} -.-> {stages['train']}",
    } <= edges


def test_mermaid_labels_are_escaped() -> None:
    hostile = graph.Graph(
        "x",
        [graph.StageNode('a"b<c>', "x-a", "", ["p#1"], [], ['o"ut'])],
        {'o"ut': graph.Artifact('o"ut', "out", 'a"b<c>')},
    )
    text = graph.to_mermaid(hostile)
    assert '"a#34;b#60;c#62;"' in text and '"p#35;1"' in text and '"o#34;ut"' in text


def _rects(root: ET.Element, cls: str) -> list[tuple[float, float, float, float]]:
    found = []
    for group in root.iter(f"{SVG}g"):
        if group.get("class") == cls:
            rect = group.find(f"{SVG}rect")
            found.append(tuple(float(rect.get(k)) for k in ("x", "y", "width", "height")))
    return found


def _overlap(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    return a[0] < b[0] + b[2] and b[0] < a[0] + a[2] and a[1] < b[1] + b[3] and b[1] < a[1] + a[3]


def test_svg_parses_and_draws_every_stage_artifact_and_input_arrow(toy: graph.Graph) -> None:
    root = ET.fromstring(graph.to_svg(toy).split("\n", 1)[1])
    assert root.tag == f"{SVG}svg"
    stages, artifacts = _rects(root, "stage"), _rects(root, "artifact")
    assert len(stages) == 3 and len(artifacts) == len(toy.artifacts)
    assert [s[1] for s in stages] == sorted(s[1] for s in stages)  # top to bottom, in order
    boxes = stages + artifacts
    assert not any(_overlap(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1 :])
    texts = ["".join(t.itertext()) for t in root.iter(f"{SVG}text")]
    assert {"1. prepare", "2. train", "3. report"} <= set(texts)
    assert {"scale", "seeds", "train (2)", "data"} <= set(texts)  # the parameter-group tags
    assert "raw/input.csv" in texts and "external data" in texts
    titles = ["".join(t.itertext()) for t in root.iter(f"{SVG}title")]
    assert "toy-prepare: Sample the <data> & split it." in titles and "train reads train (steps, lr)" in titles
    # one arrow into a stage per input, each ending on the right edge of its reader's box
    left = [p for p in root.iter(f"{SVG}polygon") if _points(p)[0][0] < _points(p)[1][0]]
    assert len(left) == sum(len(s.inputs) for s in toy.stages)
    for polygon in left:
        tip_x, tip_y = _points(polygon)[0]
        assert any(abs(tip_x - (x + w + 1)) < 0.2 and y <= tip_y <= y + h for x, y, w, h in stages)
    inline = graph.to_svg(toy, standalone=False)
    assert inline.startswith("<svg ") and "://" not in inline


def _points(polygon: ET.Element) -> list[tuple[float, float]]:
    return [tuple(map(float, p.split(","))) for p in polygon.get("points").split()]


def test_graph_command_draws_every_registered_pipeline(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shutil.copy(REPO / "dvc.yaml", project / "dvc.yaml")
    listed = stages_by_slug(project / "dvc.yaml")
    for slug in registry.slugs():
        assert main(["graph", slug]) == 0
        text = capsys.readouterr().out
        assert re.findall(r"^\[\s*\d+\] (\w+)", text, re.M) == listed[slug]
        assert main(["graph", slug, "--mermaid"]) == 0
        assert capsys.readouterr().out.startswith("flowchart TD\n")
        out = project / "graphs" / f"{slug}.svg"
        assert main(["graph", slug, "--svg", str(out)]) == 0
        assert capsys.readouterr().out.strip() == f"wrote {out}"
        root = ET.parse(out).getroot()
        assert len(_rects(root, "stage")) == len(listed[slug])


def test_graph_command_refuses_an_unknown_slug_or_a_missing_dvc_yaml(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["graph", "nosuch"]) == 2
    err = capsys.readouterr().err
    assert "unknown pipeline 'nosuch'" in err and ", ".join(registry.slugs()) in err
    assert main(["graph", "knots"]) == 2  # the project has no dvc.yaml yet
    assert "run `paperflows dvc-yaml`" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exited:
        main(["graph", "knots", "--mermaid", "--svg", "x.svg"])
    assert exited.value.code == 2 and "not allowed with argument" in capsys.readouterr().err
    assert not (project / "x.svg").exists()
