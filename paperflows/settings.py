"""Where paperflows keeps things, and the environment it pins before Prefect or MLflow load.

Everything has a default inside the project folder so that a laptop run needs no set-up; every
default can be replaced by an environment variable, which is how the same code moves to a Prefect
server, an MLflow tracking server or another output disk (settings only, no code change).

The variables and their defaults:

PAPERFLOWS_ROOT
    the folder holding ``params.yaml`` (searched upward from the cwd)

MLFLOW_TRACKING_URI
    ``sqlite:///<root>/mlflow.db``

PAPERFLOWS_MLFLOW_ARTIFACTS
    ``<root>/mlruns`` (used only with a local SQLite store)

PAPERFLOWS_MLFLOW_UI_URL
    ``http://127.0.0.1:5000`` (what ``mlflow ui`` serves): where the MLflow run links in Prefect logs and artifacts
    point when ``MLFLOW_TRACKING_URI`` is not itself a server

PREFECT_HOME
    ``<root>/.paperflows/prefect``

PAPERFLOWS_PROGRESS
    ``1``: progress bars on a terminal (none when the output is not one: logs get a line per 10% of a loop instead);
    ``0`` hides them

PAPERFLOWS_CACHE
    ``$XDG_CACHE_HOME/paperflows`` (``~/.cache/paperflows``): derived model files such as the fp32 copy of a GGUF LLM,
    shared by every checkout

PAPERFLOWS_TASK_RUNNER
    ``sequential``: fan-out items run one after the other in the flow process; ``dask``: they are submitted to a Dask
    cluster through prefect-dask and run concurrently (needs a Prefect server, ``PREFECT_API_URL``)

PAPERFLOWS_DASK_ADDRESS
    unset: with ``dask``, a LocalCluster of worker processes with 1 thread each, started and stopped by the flow;
    ``tcp://host:8786``: an existing ``dask scheduler``

PAPERFLOWS_DASK_WORKERS
    unset (Dask's choice: one per CPU core): worker processes of that LocalCluster

PAPERFLOWS_TORCH_THREADS
    ``1``: every stage and fan-out item of a run uses ``N`` torch intra-op threads (the one thread setting; params have
    none). CPU results are bit-identical across entry points only at the same thread count

PAPERFLOWS_GPU_LIMIT
    ``gpu``: the Prefect global concurrency limit that training stages (``Stage(gpu=True)``) hold one slot of while they
    run, when a Prefect server (``PREFECT_API_URL``) has that limit (``prefect gcl create gpu --limit <GPUs>``); no-op
    otherwise

PAPERFLOWS_MODEL_VERSIONS
    ``20``: versions of each registered model ``<slug>-<role>`` kept in MLflow's registry; registering a new one deletes
    the oldest beyond that (never one that has an alias). The runs keep their weights as artifacts

PREFECT_API_URL
    unset: embedded (ephemeral) Prefect server per process; ``http://host:4200/api``: a running server (required by
    ``dask``)

DVC remotes are settings too: ``.dvc/config`` names the local default remote
(``<root>/.paperflows/dvc-remote``); ``infra/dvc-remote.sh`` points a checkout at an S3-compatible store
from ``PAPERFLOWS_DVC_REMOTE_URL`` (``s3://bucket/prefix``) and ``PAPERFLOWS_DVC_S3_ENDPOINT`` (MinIO-style
endpoint), written to the git-ignored ``.dvc/config.local``; credentials stay in the environment
(``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``) and are never written to a file.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

PARAMS_FILE = "params.yaml"
DVC_FILE = "dvc.yaml"
WORKSPACE_DIR = "outputs"  # DVC-tracked outputs of the default-parameter runs
RUNS_DIR = "runs"  # outputs of runs with edited parameters, one folder per run
TASK_RUNNERS = ("sequential", "dask")
DEFAULT_GPU_LIMIT = "gpu"
# the small models of the CPU-scale runs are fastest on one thread, and two pipelines can then share two
# cores; results are bit-identical across entry points at equal thread counts
DEFAULT_TORCH_THREADS = 1
DEFAULT_MODEL_VERSIONS = 20


class SettingsError(ValueError):
    """An environment variable holds a value paperflows cannot use (the message names the variable)."""


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
    task_runner: str = "sequential"  # how a flow runs the items of a fan-out stage (TASK_RUNNERS)
    dask_address: str | None = None  # an existing Dask scheduler; None: a LocalCluster per flow run
    dask_workers: int | None = None  # worker processes of that LocalCluster; None: Dask's default
    torch_threads: int = DEFAULT_TORCH_THREADS  # torch intra-op threads of every stage call
    gpu_limit: str = DEFAULT_GPU_LIMIT  # Prefect global concurrency limit held by training stages
    model_versions_kept: int = DEFAULT_MODEL_VERSIONS  # registry versions kept per registered model

    def __post_init__(self) -> None:
        if self.task_runner not in TASK_RUNNERS:
            raise SettingsError(
                f"PAPERFLOWS_TASK_RUNNER must be one of {', '.join(TASK_RUNNERS)}; got {self.task_runner!r}"
            )
        if self.dask_address is not None and "://" not in self.dask_address:
            raise SettingsError(
                f"PAPERFLOWS_DASK_ADDRESS must be a scheduler address such as "
                f"tcp://10.0.0.5:8786; got {self.dask_address!r}"
            )
        if not self.gpu_limit.strip():
            raise SettingsError("PAPERFLOWS_GPU_LIMIT must name a Prefect global concurrency limit; got ''")

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
        task_runner=os.environ.get("PAPERFLOWS_TASK_RUNNER") or "sequential",
        dask_address=os.environ.get("PAPERFLOWS_DASK_ADDRESS") or None,
        dask_workers=_positive_int("PAPERFLOWS_DASK_WORKERS"),
        torch_threads=_positive_int("PAPERFLOWS_TORCH_THREADS") or DEFAULT_TORCH_THREADS,
        gpu_limit=os.environ.get("PAPERFLOWS_GPU_LIMIT") or DEFAULT_GPU_LIMIT,
        model_versions_kept=_positive_int("PAPERFLOWS_MODEL_VERSIONS") or DEFAULT_MODEL_VERSIONS,
    )


def _positive_int(name: str) -> int | None:
    """An optional whole-number variable (>= 1); unset or empty gives None."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return None
    if not raw.isdigit() or int(raw) < 1:
        raise SettingsError(f"{name} must be a whole number >= 1; got {raw!r}")
    return int(raw)


def default_cache_dir() -> Path:
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "paperflows"


def pin_environment(settings: Settings | None = None, prefect: bool = True) -> Settings:
    """Set the variables Prefect, MLflow and Hugging Face read, unless the user already set them.

    Must run before ``import prefect`` (Prefect reads its settings at import time). ``prefect=False``: the
    process starts no Prefect (a DVC stage), so no Prefect home folder is made for it.
    """
    s = settings or load_settings()
    defaults = {
        "MLFLOW_TRACKING_URI": s.tracking_uri,
        "PREFECT_HOME": str(s.prefect_home),
        # offline machines: no telemetry, no hub downloads, patient ephemeral start-up (the first
        # start on a new database runs migrations, measured up to ~75 s on a slow container)
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        # the client side of it: Prefect's SDK (and MLflow, Hugging Face) honour DO_NOT_TRACK, so the first
        # interactive run prints no "Prefect collects anonymous usage data" notice and sends nothing
        "DO_NOT_TRACK": "1",
        "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "180",
        "MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING": "false",
        # logging a pyfunc model reads its artifacts back: no tqdm bar per model in the run's log lines
        "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "GIT_PYTHON_REFRESH": "quiet",
        # records of the `paperflows.*` loggers (training progress) reach a Prefect run's log
        "PREFECT_LOGGING_EXTRA_LOGGERS": "paperflows",
        "PREFECT_LOGGING_TO_API_WHEN_MISSING_FLOW": "ignore",  # outside a run they only go to the console
    }
    for key, value in defaults.items():
        os.environ.setdefault(key, value)
    if prefect:
        Path(os.environ["PREFECT_HOME"]).mkdir(parents=True, exist_ok=True)  # Prefect does not create it
    return s


PREFECT_DATABASE_READY = ".paperflows-database-ready"  # in PREFECT_HOME once the embedded database is migrated


@contextlib.contextmanager
def first_prefect_start(home: Path) -> Iterator[bool]:
    """Around the start of a Prefect server on the embedded database in ``home``: yields False straight away
    once the database exists; the first time, holds a file lock (so that several processes started together
    do not migrate one new ``prefect.db`` at once: a server dies on ``duplicate column``) and yields True,
    and the caller starts its server inside; the database then counts as created."""
    home.mkdir(parents=True, exist_ok=True)
    marker = home / PREFECT_DATABASE_READY
    if marker.is_file():
        yield False
        return
    with open(home / ".database.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        if marker.is_file():
            yield False
            return
        yield True
        marker.write_text("the embedded Prefect database was created and migrated by paperflows\n")
