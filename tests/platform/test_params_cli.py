"""Parameters outside the UI: ``paperflows params``, ``run --show``, merging overrides, the form's enums and
ranges, and shell completion, as a user meets them."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from paperflows import registry
from paperflows.__main__ import main
from paperflows.paramdoc import leaf_fields
from paperflows.params import DataFile, ParamsError, PipelineParams, Section, given_values, load_section, merge_given
from tests.conftest import REPO

# a params.yaml whose knots section differs from the model defaults, so that merging and replacing differ
KNOTS_EDITS = {"lora": {"r": 8, "lr": 0.001}, "merge": {"dare_p": 0.3}}


def _edited_params_yaml(root: Path, edits: dict[str, dict[str, dict[str, Any]]]) -> Path:
    data = yaml.safe_load((REPO / "params.yaml").read_text())
    for slug, sections in edits.items():
        for section, values in sections.items():
            data[slug][section].update(values)
    path = root / "params.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.fixture()
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project root with the repository's params.yaml, knots edited by KNOTS_EDITS."""
    _edited_params_yaml(tmp_path, {"knots": KNOTS_EDITS})
    monkeypatch.setenv("PAPERFLOWS_ROOT", str(tmp_path))
    return tmp_path


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def paperflows(*args: str, root: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PAPERFLOWS_ROOT": str(root), "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    return subprocess.run(
        [sys.executable, "-m", "paperflows", *args],
        cwd=root,
        env=env,
        capture_output=True,
        check=False,
        text=True,
        timeout=120,
    )


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.name != "params.yaml")


# --------------------------------------------------------------------------------------------------
# paperflows params
# --------------------------------------------------------------------------------------------------
def _row(out: str, key: str) -> str:
    rows = [line for line in out.splitlines() if line.startswith(f"  {key} ")]
    assert len(rows) == 1, f"no single row for {key}"
    return rows[0]


def test_params_table_shows_every_key_with_type_range_default_paper_and_description(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = cli(capsys, "params", "knots")
    assert code == 0
    model = registry.params_model("knots")
    for key, _ in leaf_fields(model):
        _row(out, key)
    assert all(len(line) <= 100 for line in out.splitlines())
    assert "lora: Per-task LoRA fine-tuning." in out.splitlines()
    r = _row(out, "lora.r").split()
    assert r == ["lora.r", "int", "[1,", "256]", "8", "16"]  # type, bounds, params.yaml value, paper value
    assert _row(out, "lora.lr").split()[1:4] == ["float", "(0,", "1]"]
    flowing = " ".join(out.split())
    assert "LoRA rank. (model default: 4)" in flowing  # params.yaml differs from the model there
    assert "LoRA learning rate. (model default: 0.0005)" in flowing and "LoRA dropout. (" not in flowing
    assert "list[choice]" in _row(out, "data.tasks")  # shortened to fit; the choices follow in full
    assert "upsampled to 28x28). Choices: mnist, fashion, animal, digits." in flowing
    assert "'tiny' | ..." in _row(out, "base.encoder")
    assert "each (0, 10]" in out and "len >= 1" in out
    head = out.splitlines()[:20]
    assert any("gstoica27/KnOTS" in line for line in head)  # where the paper values come from


def test_params_json_with_set_shows_resolved_values_next_to_params_yaml(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = cli(capsys, "params", "knots", "--json", "--set", "scale=paper", "--set", "lora={steps: 50}")
    assert code == 0
    docs = {d["key"]: d for d in json.loads(out)}
    assert set(docs) == {key for key, _ in leaf_fields(registry.params_model("knots"))}
    steps, r, alpha = docs["lora.steps"], docs["lora.r"], docs["lora.alpha"]
    assert (steps["value"], steps["default"], steps["model_default"], steps["paper"]) == (50, 200, 200, 2000)
    assert (r["value"], r["default"], r["model_default"], r["paper"]) == (8, 8, 4, 16)  # set, so the preset kept it
    assert (alpha["value"], alpha["default"]) == (16.0, 4.0)  # at its default, so the preset switched it
    assert docs["lora.lr"]["value"] == 0.001  # the mapping merged into params.yaml's lora
    assert docs["lora.lr"]["bounds"] == "(0, 1]" and docs["lora.r"]["type"] == "int"
    assert docs["merge.lambdas"]["bounds"] == "each (0, 10]; len >= 1"
    assert docs["data.tasks"]["choices"] == ["mnist", "fashion", "animal", "digits"]
    assert docs["lora.head_lr"]["in_paper_scale"] is False and docs["lora.head_lr"]["paper"] is None
    assert docs["seeds"]["bounds"] == "each [0, 4294967296); len 1-20"


def test_params_types_of_paths_and_nullable_values(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(capsys, "params", "nutribench", "--json")
    assert code == 0
    docs = {d["key"]: d for d in json.loads(out)}
    assert docs["data.path"]["type"] == "path or null"
    assert docs["estimate.llm_meals"]["type"] == "int or null" and docs["estimate.llm_meals"]["paper"] is None
    assert docs["estimate.llm_meals"]["in_paper_scale"] is True
    assert docs["risk.patients"]["type"].startswith("list['adolescent#001' | ")
    code, out, _ = cli(capsys, "params", "nutribench")
    assert all(len(line) <= 100 for line in out.splitlines())
    assert "(30 choices)" in out  # a long set of choices is shortened in the table, and counted


def test_params_refuses_a_bad_override_naming_the_key(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = cli(capsys, "params", "knots", "--set", "lora.r=0")
    assert code == 2 and "knots.lora.r: Input should be greater than or equal to 1" in err
    code, _, err = cli(capsys, "params", "nosuch")
    assert code == 2 and "unknown pipeline 'nosuch'" in err


def test_params_imports_no_torch(root: Path) -> None:
    probe = (
        "import sys; from paperflows.__main__ import main; "
        "code = main(['params', 'knots']); "
        "print({'code': code, 'heavy': sorted(m for m in ('torch', 'prefect', 'mlflow', 'pandas') "
        "if m in sys.modules)})"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=root,
        env={**os.environ, "PAPERFLOWS_ROOT": str(root)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "{'code': 0, 'heavy': []}"


# --------------------------------------------------------------------------------------------------
# paperflows run --show
# --------------------------------------------------------------------------------------------------
def _shown_yaml(out: str, slug: str) -> dict[str, Any]:
    block = out.split(f"== {slug}: the parameters the run gets\n", 1)[1]
    lines = []
    for line in block.splitlines():
        if lines and not line.startswith(" "):
            break
        lines.append(line)
    return yaml.safe_load("\n".join(lines))[slug]


def test_show_prints_the_resolved_section_the_preset_changes_and_the_folder_and_writes_nothing(root: Path) -> None:
    result = paperflows("run", "knots", "--show", "--set", "scale=paper", "--set", "lora={steps: 50}", root=root)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    expected = load_section(
        registry.params_model("knots"), "knots", root / "params.yaml", [("scale", "paper"), ("lora", {"steps": 50})]
    )
    assert _shown_yaml(out, "knots") == expected.model_dump(mode="json")
    assert _shown_yaml(out, "knots")["lora"]["lr"] == 0.001  # merged, not replaced
    changed = out.split("scale=paper changed", 1)[1].split("scale=paper kept", 1)[0]
    assert "  base.encoder: tiny -> vit_s14" in changed and "  lora.alpha: 4.0 -> 16.0" in changed
    assert "lora.r" not in changed and "lora.steps" not in changed
    kept = out.split("scale=paper kept", 1)[1]
    assert "  lora.r: 8 (paper: 16)" in kept and "  lora.steps: 50 (paper: 2000)" in kept
    assert "writes to: runs/knots/<UTC time>" in out
    assert _files(root) == []  # no run folder, no Prefect home, no MLflow database


def test_show_at_the_params_yaml_values_names_the_dvc_workspace_for_every_pipeline(root: Path) -> None:
    result = paperflows("run", "all", "--show", root=root)
    assert result.returncode == 0, result.stderr
    for slug in registry.slugs():
        assert f"== {slug}: the parameters the run gets" in result.stdout
        assert f"writes to: outputs/{slug}/ (the DVC workspace" in result.stdout
    assert "scale=paper changed" not in result.stdout and "differs from params.yaml" not in result.stdout
    assert _files(root) == []


# --------------------------------------------------------------------------------------------------
# merging: --set section={...} and a deployment run's partial parameter
# --------------------------------------------------------------------------------------------------
def test_set_with_a_mapping_merges_into_the_params_yaml_section_and_other_values_replace(root: Path) -> None:
    model = registry.params_model("knots")
    params = load_section(model, "knots", root / "params.yaml", [("lora", {"steps": 5})])
    assert (params.lora.steps, params.lora.r, params.lora.lr) == (5, 8, 0.001)
    params = load_section(model, "knots", root / "params.yaml", [("merge.lambdas", [0.5])])
    assert params.merge.lambdas == [0.5] and params.merge.dare_p == 0.3
    with pytest.raises(ParamsError, match=r"knots\.lora: Input should be a valid dictionary"):
        load_section(model, "knots", root / "params.yaml", [("lora", 5)])
    with pytest.raises(ParamsError, match=r"knots\.lora\.rank: Extra inputs are not permitted"):
        load_section(model, "knots", root / "params.yaml", [("lora", {"rank": 5})])


class _Inner(Section):
    a: int = 1
    b: int = 2


class _Outer(Section):
    inner: _Inner = _Inner()
    c: int = 3


class _Nested(PipelineParams):
    outer: _Outer = _Outer()


def test_set_with_a_mapping_merges_recursively(tmp_path: Path) -> None:
    path = tmp_path / "params.yaml"
    path.write_text("nested:\n  outer:\n    inner: {a: 10, b: 20}\n    c: 30\n")
    params = load_section(_Nested, "nested", path, [("outer", {"inner": {"b": 5}})])
    assert (params.outer.inner.a, params.outer.inner.b, params.outer.c) == (10, 5, 30)


def test_merge_given_overlays_exactly_the_fields_of_a_partial_deployment_parameter(tmp_path: Path) -> None:
    model = registry.params_model("oc_flow")
    path = _edited_params_yaml(tmp_path, {"oc_flow": {"train": {"lr": 0.001}, "guidance": {"iterations": 7}}})
    base = load_section(model, "oc_flow", path)
    partial = model.model_validate({"train": {"steps": 500}})  # what Prefect makes of {"train": {"steps": 500}}
    assert partial.train.lr == 0.002  # the model default, not params.yaml's
    merged = merge_given(partial, base)
    assert (merged.train.steps, merged.train.lr, merged.guidance.iterations) == (500, 0.001, 7)
    assert merge_given(model.model_validate({}), base) == base
    # scale=paper applies after merging: params.yaml's own iterations=7 is kept, values at their default switch
    paper = merge_given(model.model_validate({"scale": "paper", "guidance": {"lr": 0.3}}), base)
    assert (paper.guidance.iterations, paper.guidance.lr, paper.guidance.n_steps, paper.so3.lr) == (7, 0.3, 50, 1.5)
    assert paper == load_section(model, "oc_flow", path, [("scale", "paper"), ("guidance.lr", 0.3)])


def test_merge_given_refuses_values_that_are_only_invalid_together_naming_the_key(tmp_path: Path) -> None:
    model = registry.params_model("nsot")
    base = load_section(model, "nsot", _edited_params_yaml(tmp_path, {"nsot": {"data": {"n_train": 64}}}))
    partial = model.model_validate({"train": {"batch_size": 100}})  # valid against the model default n_train
    with pytest.raises(ParamsError, match=r"nsot: Value error, train\.batch_size \(100\) must be <= data\.n_train"):
        merge_given(partial, base, prefix="nsot")


def test_values_the_paper_preset_fills_in_are_not_given() -> None:
    model = registry.params_model("knots")
    params = model.model_validate({"scale": "paper", "lora": {"r": 8}})
    assert params.base.encoder == "vit_s14" and params.lora.r == 8
    assert given_values(params) == {"scale": "paper", "lora": {"r": 8}}
    assert model.model_validate({"seeds": [0]}) == model.model_validate({"seeds": [0], "lora": {}})


# --------------------------------------------------------------------------------------------------
# the form: enums and bounds in the JSON schema
# --------------------------------------------------------------------------------------------------
def _leaf_schemas(model: type[PipelineParams]) -> dict[str, dict[str, Any]]:
    schema = model.model_json_schema()
    defs = schema.get("$defs", {})
    out: dict[str, dict[str, Any]] = {}

    def walk(node: dict[str, Any], prefix: str) -> None:
        for name, prop in node.get("properties", {}).items():
            if "$ref" in prop:
                walk(defs[prop["$ref"].rsplit("/", 1)[-1]], f"{prefix}{name}.")
            else:
                out[f"{prefix}{name}"] = prop

    walk(schema, "")
    return out


@pytest.mark.parametrize(
    ("slug", "key", "values"),
    [
        ("knots", "data.tasks", ["mnist", "fashion", "animal", "digits"]),
        ("nsot", "data.categories", ["ellipsoid", "torus", "cylinder", "chair", "table", "lamp"]),
        ("mm_ego", "qa.qtypes", ["last_put", "pick_after", "count_open"]),
    ],
)
def test_fixed_choices_are_enums_in_the_schema_and_still_distinct(slug: str, key: str, values: list[str]) -> None:
    model = registry.params_model(slug)
    assert _leaf_schemas(model)[key]["items"]["enum"] == values
    section, name = key.split(".")
    with pytest.raises(ParamsError, match=rf"{slug}\.{section}\.{name}\.0: Input should be '{values[0]}'"):
        load_section(model, slug, REPO / "params.yaml", [(key, ["nosuch"])])
    if slug != "nsot":  # a repeated task or question type would repeat a model
        with pytest.raises(ParamsError, match=rf"{slug}\.{section}\.{name}: Value error"):
            load_section(model, slug, REPO / "params.yaml", [(key, [values[0], values[0]])])


def test_every_text_parameter_is_a_path_or_a_fixed_choice() -> None:
    for slug in registry.slugs():
        model = registry.params_model(slug)
        paths = {key for key, info in leaf_fields(model) if any(isinstance(m, DataFile) for m in info.metadata)}
        for key, prop in _leaf_schemas(model).items():
            branches = [prop, *prop.get("anyOf", [])]
            items = [b.get("items", {}) for b in branches]
            free_text = any(
                b.get("type") == "string" and "enum" not in b and "pattern" not in b for b in branches + items
            )
            assert not free_text or key in paths, (
                f"{slug}.{key} is free text: make it a Literal, a DataFile path or a name with a pattern"
            )
    nutribench = _leaf_schemas(registry.params_model("nutribench"))
    assert nutribench["risk.plot_patient"]["enum"][:2] == ["adolescent#001", "adolescent#002"]


def test_the_schema_states_each_bound_in_the_description() -> None:
    props = _leaf_schemas(registry.params_model("knots"))
    assert props["lora.r"]["description"] == "LoRA rank. Range: 1 to 256."
    assert props["base.steps"]["description"].endswith(" Range: 1 to 1,000,000.")
    assert props["lora.lr"]["description"].endswith(" Range: greater than 0, up to 1.")
    assert props["lora.dropout"]["description"].endswith(" Range: 0 to less than 1.")
    assert props["data.tasks"]["description"].endswith(" Items: at least 2.")
    lambdas = props["merge.lambdas"]["description"]  # states "each in (0, 10]" itself: no second range
    assert "Range" not in lambdas and lambdas.endswith(" Items: at least 1.")
    assert props["seeds"]["description"].endswith(
        "claims are evaluated over all of them. Range of each item: 0 to less than 4,294,967,296. Items: 1 to 20."
    )
    assert "Range" not in props["base.encoder"]["description"]  # an enum: the dropdown shows the choices
    so3 = _leaf_schemas(registry.params_model("oc_flow"))
    assert so3["model.time_dim"]["description"].endswith(" Range: 2 to 512, a multiple of 2.")
    nb = _leaf_schemas(registry.params_model("nutribench"))
    assert nb["estimate.llm_meals"]["description"].endswith(" Range: 1 to 200,000.")  # through anyOf null
    for slug in registry.slugs():
        for key, prop in _leaf_schemas(registry.params_model(slug)).items():
            bounded = any(
                k in b
                for b in [prop, *prop.get("anyOf", []), prop.get("items", {})]
                for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
            )
            text = prop.get("description", "")
            assert not bounded or "Range" in text or "[" in text or "(" in text, f"{slug}.{key}: {text!r}"


# --------------------------------------------------------------------------------------------------
# shell completion
# --------------------------------------------------------------------------------------------------
def _complete_bash(*words: str, cword: int | None = None) -> list[str]:
    """What the generated bash function puts in COMPREPLY for these COMP_WORDS."""
    cword = len(words) - 1 if cword is None else cword
    quoted = " ".join("'" + w.replace("'", "'\\''") + "'" for w in words)
    script = (
        f"source <(paperflows completion bash) && COMP_WORDS=({quoted}) && COMP_CWORD={cword} && "
        "_paperflows && printf '%s\\n' \"${COMPREPLY[@]}\""
    )
    env = {**os.environ, "PAPERFLOWS_ROOT": str(REPO), "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    proc = subprocess.run(
        ["bash", "--norc", "-c", script], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr
    return [line for line in proc.stdout.splitlines() if line]


def test_bash_completes_commands_slugs_stages_and_options() -> None:
    commands = _complete_bash("paperflows", "")
    assert {"run", "params", "stage", "completion", "list"} <= set(commands) and "_complete" not in commands
    assert _complete_bash("paperflows", "run", "kn") == ["knots"]
    assert "all" in _complete_bash("paperflows", "run", "")
    assert _complete_bash("paperflows", "run", "knots,n") == ["knots,nsot", "knots,nutribench"]
    assert _complete_bash("paperflows", "stage", "knots", "") == ["prepare", "pretrain", "finetune", "merge", "report"]
    assert _complete_bash("paperflows", "stage", "knots", "merge", "") == []
    assert _complete_bash("paperflows", "params", "knots", "--") == ["--help", "--json", "--set"]
    assert _complete_bash("paperflows", "completion", "") == ["bash", "zsh"]
    assert "knots" not in _complete_bash("paperflows", "serve", "knots", "")


def test_bash_completes_set_keys_and_enumerated_values() -> None:
    assert _complete_bash("paperflows", "run", "knots", "--set", "lora.r") == ["lora.r="]
    keys = _complete_bash("paperflows", "params", "knots", "--set", "")
    assert keys == [f"{key}=" for key, _ in leaf_fields(registry.params_model("knots"))]
    assert "knots.lora.r=" in _complete_bash("paperflows", "run", "all", "--set", "knots.lo")
    # bash splits key=value at "=": the candidates are what follows it
    assert _complete_bash("paperflows", "run", "knots", "--set", "base.encoder", "=") == ["tiny", "vit_s14"]
    assert _complete_bash("paperflows", "run", "knots", "--set", "base.encoder", "=", "v") == ["vit_s14"]
    assert _complete_bash("paperflows", "run", "knots", "--set", "scale", "=", "") == ["cpu", "evidence", "paper"]
    assert _complete_bash("paperflows", "run", "knots", "--jobs", "") == []


def test_bash_completion_through_readline() -> None:
    """A real interactive bash: TAB after ``key=`` lists the choices, TAB after a key prefix adds ``=``."""
    env = {
        **os.environ,
        "PAPERFLOWS_ROOT": str(REPO),
        "PS1": "$ ",
        "TERM": "dumb",
        "INPUTRC": "/dev/null",
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
    }
    pid, fd = pty.fork()
    if pid == 0:  # the child: an interactive bash without the user's start-up files
        try:
            os.execvpe("bash", ["bash", "--norc", "--noprofile", "-i"], env)
        finally:
            os._exit(127)

    def read_until(text: str, timeout: float = 30.0) -> str:
        seen, end = "", time.monotonic() + timeout
        while text not in seen and time.monotonic() < end:
            if select.select([fd], [], [], 0.1)[0]:
                seen += os.read(fd, 4096).decode(errors="replace")
        return seen

    try:
        os.write(fd, b"source <(paperflows completion bash); echo loaded\n")
        assert "loaded" in read_until("loaded\r\n$ ")
        os.write(fd, b"paperflows run knots --set base.encoder=\t\t")
        assert re.search(r"tiny +vit_s14", read_until("vit_s14"))
        os.write(fd, b"\x15paperflows run knots --set lora.head_l\t")  # \x15: clear the line first
        assert "lora.head_lr=" in read_until("lora.head_lr=")
    finally:
        os.write(fd, b"\x15exit\n")
        os.waitpid(pid, 0)
        os.close(fd)


@pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh is not installed")
def test_zsh_completion_adds_the_candidates() -> None:
    script = (
        "autoload -Uz compinit && compinit -u -D && source <(paperflows completion zsh) && "
        'compadd() { print -r -- "ADD $*" } && '
        "words=(paperflows run knots --set base.encoder=v) && CURRENT=5 && _paperflows && "
        "words=(paperflows run knots --set lora.head_l) && CURRENT=5 && _paperflows && "
        "words=(paperflows stage knots fi) && CURRENT=4 && _paperflows"
    )
    env = {**os.environ, "PAPERFLOWS_ROOT": str(REPO), "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    proc = subprocess.run(["zsh", "-fc", script], env=env, capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["ADD -- base.encoder=vit_s14", "ADD -S  -- lora.head_lr=", "ADD -- finetune"]


def test_complete_query_is_light() -> None:
    probe = (
        "import sys; from paperflows.__main__ import main; "
        "code = main(['_complete', '4', 'paperflows', 'run', 'knots', '--set', 'lo']); "
        "print(sorted(m for m in ('torch', 'prefect', 'mlflow', 'dvc') if m in sys.modules))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe],
        env={**os.environ, "PAPERFLOWS_ROOT": str(REPO)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    lora_keys = [f"{key}=" for key, _ in leaf_fields(registry.params_model("knots")) if key.startswith("lo")]
    assert proc.stdout.splitlines() == [*lora_keys, "[]"]  # the keys, and no heavy module imported
