"""Every verdict in every paper's report comes from the platform rule (``paperflows.claims.decide``).

Read from the source (no paper is imported): a paper module that builds a ``Claim`` itself, writes a verdict
string into one, or imports the rule's internals fails here.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAPER_MODULES = sorted((ROOT / "pipelines").glob("*/*.py"))
INTERNALS = {"_verdict", "_claim", "_p_values", "holm"}
VERDICT_WORDS = {"holds", "does not hold", "not resolved"}


def _problems(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "paperflows.claims":
            bad = sorted(a.name for a in node.names if a.name in INTERNALS)
            if bad:
                found.append(f"line {node.lineno}: imports {bad} from paperflows.claims")
        if isinstance(node, ast.Call):
            name = (
                node.func.id
                if isinstance(node.func, ast.Name)
                else node.func.attr
                if isinstance(node.func, ast.Attribute)
                else ""
            )
            if name == "Claim":
                found.append(f"line {node.lineno}: builds a Claim by hand")
            if name == "replace" and any(k.arg in ("verdict", "holm_verdict") for k in node.keywords):
                found.append(f"line {node.lineno}: replaces a claim's verdict")
            if any(k.arg in ("verdict", "holm_verdict") for k in node.keywords):
                found.append(f"line {node.lineno}: passes a verdict by hand")
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Attribute) and target.attr in ("verdict", "holm_verdict"):
                    found.append(f"line {node.lineno}: assigns a claim's verdict")
                if (
                    isinstance(target, ast.Subscript)
                    and isinstance(target.slice, ast.Constant)
                    and target.slice.value in ("verdict", "holm_verdict")
                ):
                    found.append(f"line {node.lineno}: writes a verdict into a dict")
    return found


@pytest.mark.parametrize("path", PAPER_MODULES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_no_paper_builds_a_verdict_itself(path: Path) -> None:
    assert not _problems(path), f"{path.relative_to(ROOT)}: {_problems(path)}"


def test_the_guard_catches_a_hand_built_verdict(tmp_path: Path) -> None:
    bad = tmp_path / "report.py"
    bad.write_text(
        "from paperflows.claims import Claim, holm\n"
        "def f(c):\n    c.verdict = 'holds'\n    return Claim(id='x', verdict='holds')\n"
    )
    problems = _problems(bad)
    assert any("imports" in p for p in problems) and any("assigns" in p for p in problems)
    assert any("builds a Claim" in p for p in problems) and any("passes a verdict" in p for p in problems)


@pytest.mark.parametrize("slug", sorted(p.parent.name for p in (ROOT / "pipelines").glob("*/report.py")))
def test_every_report_names_its_headline_claim(slug: str) -> None:
    """Each report module declares ``HEADLINE``: the one or two ClaimSpec constants of its headline claims."""
    import importlib

    from paperflows.claims import ClaimSpec

    module = importlib.import_module(f"pipelines.{slug}.report")
    headline = getattr(module, "HEADLINE", None)
    assert isinstance(headline, tuple) and 1 <= len(headline) <= 2, f"{slug}: HEADLINE must be 1-2 ClaimSpecs"
    assert all(isinstance(s, ClaimSpec) and s.headline for s in headline), f"{slug}: HEADLINE specs say headline=True"
