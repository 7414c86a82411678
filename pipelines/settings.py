"""Where paperflows keeps things, and the environment it pins before Prefect or MLflow load.

Everything has a default inside the project folder so that a laptop run needs no set-up; every
default can be replaced by an environment variable, which is how the same code moves to a Prefect
server, an MLflow tracking server or another output disk (settings only, no code change).

| variable                 | default                                    |
|--------------------------|--------------------------------------------|
| PAPERFLOWS_ROOT          | the folder holding ``params.yaml`` (searched upward from the cwd) |
| MLFLOW_TRACKING_URI      | ``sqlite:///<root>/mlflow.db``             |
| PAPERFLOWS_MLFLOW_ARTIFACTS | ``<root>/mlruns`` (used only with a local SQLite store) |
| PREFECT_HOME             | ``<root>/.paperflows/prefect``             |
| PAPERFLOWS_PROGRESS      | ``1``; ``0`` hides the training progress bars |
| PAPERFLOWS_CACHE         | ``$XDG_CACHE_HOME/paperflows`` (``~/.cache/paperflows``): derived model files such as the fp32 copy of a GGUF LLM, shared by every checkout |
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

PARAMS_FILE = "params.yaml"
DVC_FILE = "dvc.yaml"
WORKSPACE_DIR = "outputs"   # DVC-tracked outputs of the default-parameter runs
RUNS_DIR = "runs"           # outputs of runs with edited parameters, one folder per run


def find_root(start: Path | None = None) -> Path:
    """The project root: ``$PAPERFLOWS_ROOT`` or the nearest folder upward holding params.yaml."""
    env = os.environ.get("PAPERFLOWS_ROOT")
    if env:
        return Path(env).resolve()
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / PARAMS_FILE).is_file() and (folder / "pipelines").is_dir():
            return folder
    return here


@dataclass(frozen=True)
class Settings:
    root: Path
    tracking_uri: str
    artifact_root: Path
    prefect_home: Path
    cache_dir: Path = field(default_factory=lambda: default_cache_dir())

    @property
    def params_file(self) -> Path:
        return self.root / PARAMS_FILE

    @property
    def dvc_file(self) -> Path:
        return self.root / DVC_FILE

    def workspace(self, slug: str) -> Path:
        return self.root / WORKSPACE_DIR / slug

    def runs(self, slug: str) -> Path:
        return self.root / RUNS_DIR / slug

    @property
    def local_tracking(self) -> bool:
        return self.tracking_uri.startswith("sqlite:") or self.tracking_uri.startswith("file:")


def load_settings() -> Settings:
    root = find_root()
    return Settings(
        root=root,
        tracking_uri=os.environ.get("MLFLOW_TRACKING_URI", f"sqlite:///{root / 'mlflow.db'}"),
        artifact_root=Path(os.environ.get("PAPERFLOWS_MLFLOW_ARTIFACTS", root / "mlruns")),
        prefect_home=Path(os.environ.get("PREFECT_HOME", root / ".paperflows" / "prefect")),
        cache_dir=Path(os.environ.get("PAPERFLOWS_CACHE") or default_cache_dir()),
    )


def default_cache_dir() -> Path:
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "paperflows"


def pin_environment(settings: Settings | None = None) -> Settings:
    """Set the variables Prefect, MLflow and Hugging Face read, unless the user already set them.

    Must run before ``import prefect`` (Prefect reads its settings at import time).
    """
    s = settings or load_settings()
    defaults = {
        "MLFLOW_TRACKING_URI": s.tracking_uri,
        "PREFECT_HOME": str(s.prefect_home),
        # offline machines: no telemetry, no hub downloads, patient ephemeral start-up (the first
        # start on a new database runs migrations, measured up to ~75 s on a slow container)
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "180",
        "MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING": "false",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "GIT_PYTHON_REFRESH": "quiet",
    }
    for key, value in defaults.items():
        os.environ.setdefault(key, value)
    Path(os.environ["PREFECT_HOME"]).mkdir(parents=True, exist_ok=True)  # Prefect does not create it
    return s
