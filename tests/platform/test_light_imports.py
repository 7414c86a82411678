"""Validating parameters needs no torch: a refused ``paperflows run`` answers before torch could load.

One fresh interpreter imports every paper's ``params.py``, runs every data-file check it declares (on an empty
folder or JSON file, which each check refuses) and every paper's environment check at its defaults, watching
imports with a meta-path finder that records, for each heavy package, the project modules on the stack when it
was first imported.
"""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import REPO

PROBE = r'''
import json, sys, tempfile
from pathlib import Path

WATCHED = ("torch", "scipy", "sklearn", "pandas", "pyarrow")
PROJECT = ("components", "paperflows", "pipelines")
first = {}


class Watch:
    """Records who imports a watched package first; finds nothing itself."""

    def find_spec(self, fullname, path=None, target=None):
        top = fullname.partition(".")[0]
        if top in WATCHED and top not in first:
            frame, chain = sys._getframe(1), []
            while frame is not None:
                name = frame.f_globals.get("__name__", "")
                if name.partition(".")[0] in PROJECT and (not chain or chain[-1] != name):
                    chain.append(name)
                frame = frame.f_back
            first[top] = list(reversed(chain)) or ["(outside the project)"]
        return None


sys.meta_path.insert(0, Watch())
from paperflows import registry
from paperflows.params import data_file_fields

slugs = registry.slugs()
checks = []
for slug in slugs:
    checks += [(slug, dotted, spec) for dotted, spec in data_file_fields(registry.params_model(slug))]
at_import = dict(first)
with tempfile.TemporaryDirectory() as tmp:
    for slug, dotted, spec in checks:
        path = Path(tmp) / slug / (dotted if spec.folder else f"{dotted}.json")  # an empty folder or JSON file
        path.parent.mkdir(parents=True, exist_ok=True)
        if spec.folder:
            path.mkdir()
        else:
            path.write_text("")
        try:
            spec.check(path)
        except Exception:  # refused, as expected: only the imports matter here
            pass
after_checks = dict(first)
for slug in slugs:  # what every run asks before work: the environment at the default parameters
    registry.params_model(slug)().environment_problems()
print(json.dumps({"slugs": slugs, "checks": [f"{s}.{d}" for s, d, _ in checks], "at_import": at_import,
                  "after_checks": after_checks, "after_environment": first}))
'''


def run_probe() -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=REPO, capture_output=True, text=True, check=False, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def describe(first: dict[str, list[str]], package: str) -> str:
    chain = first[package]
    return f"{package} first imported by {chain[-1]} (import chain: {' > '.join(chain)})"


def test_params_and_data_file_checks_import_no_torch_or_other_heavy_libraries() -> None:
    found = run_probe()
    assert len(found["slugs"]) >= 7 and "knots" in found["slugs"]
    assert found["checks"], "no DataFile check found: the probe would test nothing of the checks"
    assert "torch" not in found["after_checks"], describe(found["after_checks"], "torch")
    assert "torch" not in found["after_environment"], describe(found["after_environment"], "torch")
    heavy = sorted(found["at_import"])
    assert not heavy, "; ".join(describe(found["at_import"], package) for package in heavy)


def test_the_supervising_run_process_imports_no_torch() -> None:
    """``paperflows run`` takes the output locks, asks DVC and starts the Prefect server before its child imports
    the stages: torch there would delay the server's start by a second (it did, through the engine's locks)."""
    probe = (
        "import sys\n"
        "import paperflows.__main__, paperflows.launcher, paperflows.locks, paperflows.dvcgen, paperflows.dvcstate\n"
        "print(sorted(m for m in ('torch', 'mlflow', 'prefect', 'pandas') if m in sys.modules))"
    )
    proc = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "[]", f"the supervisor's modules import {proc.stdout.strip()}"
