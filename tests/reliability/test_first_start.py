"""Several first runs at once share one creation of the embedded Prefect database (no migration race)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

PROBE = """
import sys, time
from paperflows.settings import pin_environment
pin_environment()
from paperflows import flows
started = time.monotonic()
flows.prepare_prefect_database()
print(f"ready after {time.monotonic() - started:.1f} s")
"""


@pytest.mark.slow
def test_concurrent_first_starts_create_the_database_once(tmp_path: Path) -> None:
    (tmp_path / "params.yaml").write_text("{}\n")
    home = tmp_path / "prefect-home"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PAPERFLOWS_", "MLFLOW_", "PREFECT_"))}
    env.update(PAPERFLOWS_ROOT=str(tmp_path), PREFECT_HOME=str(home), PREFECT_SERVER_ANALYTICS_ENABLED="false")
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", PROBE],
            env=env,
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for _ in range(3)
    ]
    outputs = [p.communicate(timeout=400)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs), "\n".join(o[-2000:] for o in outputs)
    assert all("ready after" in o for o in outputs)
    assert not any("duplicate column" in o or "Traceback" in o for o in outputs), "\n".join(outputs)
    assert (home / "prefect.db").is_file() and (home / ".paperflows-database-ready").is_file()
