"""Fixed cost of the command line: what a user waits for before any work, side by side with its floor.

Times, in one process and interleaved over repeats, in a throwaway project:

* ``python -c pass`` (the interpreter alone: the floor) and ``python -c "import torch"`` (what every
  stage of a torch paper needs: the floor of a stage; ``import torch, mlflow`` for comparison);
* ``paperflows --help``, ``paperflows list``, ``paperflows report``, ``paperflows params knots``,
  ``paperflows graph knots`` (targets: <= 1 s each) and ``paperflows report --html`` (target: <= 5 s);
* a refused run: ``paperflows run <slug> --set seeds=abc`` for every paper, which validates the parameters
  and exits 2 before any work (target: <= 1.5 s; one row, the median over papers and repeats, and the
  slowest paper's median);
* ``paperflows stage knots merge`` on a tiny knots run made first: its fixed cost is the wall time minus
  the seconds the stage itself reports (target: <= 1.5 s); its MLflow run is spooled. The pipeline's last
  stage, ``paperflows stage knots report``, also writes the spooled runs to MLflow (reported apart);
* ``paperflows run knots --force`` on the tiny run: its start-up, from the command's start to its first stage
  (``startup_seconds`` in ``run.json``: a local Prefect server, the child's imports, MLflow's parent run; target
  <= 5 s), and its tail, what the command takes beyond start-up and the flow's own seconds (MLflow's outcome
  and models, the server's stop; this throwaway project has no DVC repository, so no ``dvc commit``).

    python benchmarks/cli_startup.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from paperflows import registry

REPO = Path(__file__).resolve().parents[1]
TINY_KNOTS = {
    "seeds": [0],
    "data": {"tasks": ["mnist", "fashion"]},
    "base": {"steps": 30},
    "lora": {"steps": 20, "head_steps": 20},
    "merge": {"lambdas": [0.5, 1.0], "top_ks": [20.0, 100.0]},
}
REFUSED = "a refused run (--set seeds=abc)"


def _merge(base: dict, update: dict) -> dict:
    return {**base, **{k: _merge(base[k], v) if isinstance(v, dict) else v for k, v in update.items()}}


def _timed(cmd: list[str], env: dict[str, str], cwd: Path, expect: int = 0) -> tuple[float, str]:
    started = time.perf_counter()
    proc = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    if proc.returncode != expect:
        raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}, expected {expect}: {proc.stderr[-2000:]}")
    return seconds, proc.stdout + proc.stderr


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    project = Path(tempfile.mkdtemp(prefix="paperflows-cli-"))
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    params["knots"] = _merge(params["knots"], TINY_KNOTS)
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    (project / "dvc.yaml").write_text((REPO / "dvc.yaml").read_text())
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PAPERFLOWS_", "MLFLOW_", "PREFECT_"))}
    env.update(PAPERFLOWS_ROOT=str(project), PAPERFLOWS_PROGRESS="0")
    cli = [sys.executable, "-m", "paperflows"]
    for stage in ("prepare", "pretrain", "finetune", "merge", "report"):  # the tiny run the stage timing reads
        _timed([*cli, "stage", "knots", stage], env, project)

    commands = {
        "python -c pass (floor)": [sys.executable, "-c", "pass"],
        "import torch (stage floor)": [sys.executable, "-c", "import torch"],
        "import torch, mlflow": [sys.executable, "-c", "import torch, mlflow"],
        "paperflows --help": [*cli, "--help"],
        "paperflows list": [*cli, "list"],
        "paperflows report": [*cli, "report"],
        "paperflows report --html": [*cli, "report", "--html"],
        "paperflows params knots": [*cli, "params", "knots"],
        "paperflows graph knots": [*cli, "graph", "knots"],
        "paperflows stage knots merge": [*cli, "stage", "knots", "merge"],
        "paperflows stage knots report (+ MLflow)": [*cli, "stage", "knots", "report"],
    }
    refused = {slug: [*cli, "run", slug, "--set", "seeds=abc"] for slug in registry.slugs()}  # exit 2, no work
    times: dict[str, list[float]] = {name: [] for name in [*commands, REFUSED]}
    work: dict[str, list[float]] = {name: [] for name in commands}
    per_paper: dict[str, list[float]] = {slug: [] for slug in refused}
    for _ in range(args.repeats):
        for name, cmd in commands.items():
            seconds, out = _timed(cmd, env, project)
            times[name].append(seconds)
            if name.startswith("paperflows stage"):
                work[name].append(float(re.search(r"done in ([0-9.]+)s", out).group(1)))
        for slug, cmd in refused.items():
            seconds, _ = _timed(cmd, env, project, expect=2)
            per_paper[slug].append(seconds)
            times[REFUSED].append(seconds)
    run_cmd = [*cli, "run", "knots", "--force", "--no-progress"]
    startup, tail = [], []
    for _ in range(args.repeats):
        seconds, _ = _timed(run_cmd, env, project)
        record = json.loads((project / "outputs" / "knots" / "run.json").read_text())
        startup.append(record["startup_seconds"])
        tail.append(seconds - record["startup_seconds"] - record["seconds"])
    floor = statistics.median(times["python -c pass (floor)"])
    print(f"{'command':<36} {'median s':>9} {'min s':>7} {'x floor':>8}")
    for name, values in times.items():
        med = statistics.median(values)
        print(f"{name:<36} {med:9.2f} {min(values):7.2f} {med / floor:8.1f}")
    for name in ("paperflows stage knots merge", "paperflows stage knots report (+ MLflow)"):
        fixed = [t - w for t, w in zip(times[name], work[name])]
        print(f"{name}: fixed cost (wall - stage work) median {statistics.median(fixed):.2f} s, min {min(fixed):.2f} s")
    print(
        f"paperflows run knots --force: start-up before the first stage median {statistics.median(startup):.2f} s, "
        f"min {min(startup):.2f} s (target <= 5 s); after the flow median {statistics.median(tail):.2f} s"
    )
    slowest = max(per_paper, key=lambda slug: statistics.median(per_paper[slug]))
    print(f"{REFUSED}: slowest paper {slowest}, median {statistics.median(per_paper[slowest]):.2f} s (target <= 1.5 s)")
    print(f"stage floor (import torch): {statistics.median(times['import torch (stage floor)']):.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
