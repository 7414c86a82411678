"""The stage contract: one declaration per stage → Prefect task, DVC stage and MLflow child run.

A :class:`Stage` names the function that does the work, the parameters it reads (whole groups such as
``"train"`` or single keys such as ``"train.so3_steps"``, so that changing a key reruns exactly the stages
that read it), the files it reads (``deps``) and writes (``outs``, ``metrics``, ``plots``), and the source
folders it depends on.
From that one declaration:

* :mod:`paperflows.dvcgen` writes the DVC stage (``cmd: paperflows stage <slug> <stage>``);
* :mod:`paperflows.flows` wraps :func:`run_stage` into a Prefect task inside the paper's flow;
* :func:`run_stage` opens the MLflow child run, checks the inputs exist before the work starts,
  checks every declared output was written afterwards, and logs metrics, plots, tables and weights.

A *fan-out* stage (``fan_out="seeds"``, ``"estimate.strategies"``, ...) does the same work once per
item of a list parameter: one LoRA per task, one seed per run, one strategy per evaluation. Each item
is its own call of the stage function (``ctx.item`` set), seeded from its own name and logged as its own
MLflow child run, so items are independent of each other and of their order: the sequential run, the
DVC stage (which loops over the items) and a parallel task runner compute the same numbers. A fan-out
stage declares only ``outs`` folders; each item writes into its own sub-folder (``ctx.item_dir(out)``).
Items write beside the declared folder (``<out>.partial/<item>/``, emptied when the stage starts) and the
folder is swapped in only once every item has finished (:func:`gather_items`): a stage stopped between
two items leaves the previous complete set (or nothing), never a mix of items made with different
parameters for the next stage to consume.
A :class:`StageContext` holds nothing tied to its process (the tracker builds its MLflow client where it
is used, the torch thread count travels as ``ctx.threads``), so an item can run on a Dask worker.

A stage that trains declares ``gpu=True``: the Prefect flow runs each of its calls (each item of a
fan-out stage) inside one slot of a global concurrency limit, the GPU slot (:mod:`paperflows.flows`).

Stages pass paths, never objects. All paths are relative to the run's output root: the DVC workspace
``outputs/<slug>/`` for runs at the ``params.yaml`` defaults, ``runs/<slug>/<run>/`` otherwise, so a run
with edited parameters never overwrites what DVC tracks.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import importlib
import itertools
import json
import os
import shutil
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from components.io import load_json, save_json
from components.seeding import torch_threads
from paperflows.errors import (RunLockedError, RunTerminated, StageInputError, StageOutputError,  # noqa: F401 - re-exported
                               missing_input_error)
from paperflows.paper import Paper
from paperflows.params import ParamsError, PipelineParams, check_key_exists, flatten, resolve_data_path
from paperflows.seeds import seed_everything, stage_seed
from paperflows.settings import Settings


REPORT_FILE = "report.json"  # written by every pipeline's last stage
MAX_ARTIFACT_BYTES = 256 * 2**20  # larger outputs stay in DVC's cache only
MAX_PREVIEW_BYTES = 8 * 2**20  # Parquet tables up to this size also get a CSV copy MLflow can preview
FINAL_CURVES = ("loss", "val_loss", "accuracy", "val_accuracy")  # curves whose last value a stage summary shows


@contextlib.contextmanager
def terminate_as_exception() -> Iterator[None]:
    """Turn SIGTERM into :class:`RunTerminated` for the duration of a run, so that ``finally`` blocks
    close the MLflow runs (status KILLED) instead of leaving them RUNNING. Only in the main thread, and
    only where nobody else (an orchestrator) has installed a handler of its own."""
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return

    def _raise(signum: int, frame: Any) -> None:
        raise RunTerminated(f"terminated by signal {signum}")

    signal.signal(signal.SIGTERM, _raise)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


@dataclass(frozen=True)
class Plot:
    """A DVC plot: a CSV/JSON data file with x/y columns, or a PNG image (x/y left empty)."""

    path: str
    x: str | None = None
    y: str | None = None
    title: str | None = None
    template: str | None = None


@dataclass(frozen=True)
class Stage:
    """One step of a paper. Paths are relative to the run's output root; a path ending in '/' is a folder."""

    name: str
    run: Callable[[StageContext], None]
    params: tuple[str, ...] = ()  # keys of the params model the stage reads: a group or a dotted key
    deps: tuple[str, ...] = ()
    outs: tuple[str, ...] = ()
    metrics: tuple[str, ...] = ()
    plots: tuple[Plot, ...] = ()
    fan_out: str | None = None   # dotted name of a list parameter: the stage runs once per item
    gpu: bool = False            # the stage trains: each call holds one GPU slot when run by a flow
    # measurements of the machine (seconds): written and checked like outputs and logged to MLflow, but not
    # given to DVC, so a rerun with equal results leaves dvc.lock unchanged
    timings: tuple[str, ...] = ()
    # trained weights among the outs, as (role, path): registered in the MLflow model registry as
    # ``<slug>-<role>`` (safetensors + a config.json to rebuild them) by every tracked run
    models: tuple[tuple[str, str], ...] = ()

    @property
    def doc(self) -> str:
        return (self.run.__doc__ or "").strip().splitlines()[0] if self.run.__doc__ else ""

    def written(self) -> tuple[str, ...]:
        return self.outs + self.metrics + tuple(p.path for p in self.plots) + self.timings

    def __call__(self, ctx: StageContext) -> None:
        self.run(ctx)

    def __reduce__(self) -> Any:
        """A stage declared with ``@stage`` replaces its function's name in the module, so pickle (a Dask
        worker, a process pool) finds it there by reference instead of copying the function's code."""
        module, name = getattr(self.run, "__module__", None), getattr(self.run, "__qualname__", "")
        found = getattr(sys.modules.get(module or ""), name, None) if "." not in name else None
        if found is self:
            return _declared_stage, (module, name)
        return super().__reduce__()


def _declared_stage(module: str, name: str) -> Stage:
    return getattr(importlib.import_module(module), name)


def stage(name: str | None = None, *, params: tuple[str, ...] = (), deps: tuple[str, ...] = (),
          outs: tuple[str, ...] = (), metrics: tuple[str, ...] = (), plots: tuple[Plot, ...] = (),
          fan_out: str | None = None, gpu: bool = False, timings: tuple[str, ...] = (),
          models: dict[str, str] | None = None) -> Callable[[Callable[[StageContext], None]], Stage]:
    """Declare a stage right above its function: ``@stage(params=("data",), outs=(TASKS,))``.

    The decorated name becomes the :class:`Stage` (still callable with a context), so the pipeline's
    ``stages=(prepare, pretrain, ...)`` lists the declarations in paper order.
    """

    def declare(func: Callable[[StageContext], None]) -> Stage:
        return Stage(name or func.__name__, func, params=tuple(params), deps=tuple(deps), outs=tuple(outs),
                     metrics=tuple(metrics), plots=tuple(plots), fan_out=fan_out, gpu=gpu, timings=tuple(timings),
                     models=tuple((models or {}).items()))

    return declare


@dataclass(frozen=True)
class Pipeline:
    """A paper: its parameter model and its stages in paper order (the last one writes the report)."""

    paper: Paper
    params_model: type[PipelineParams]
    stages: tuple[Stage, ...]

    @property
    def slug(self) -> str:
        return self.paper.slug

    @property
    def title(self) -> str:
        return self.paper.title

    @property
    def arxiv(self) -> str:
        return self.paper.arxiv

    @property
    def claim(self) -> str:
        return self.paper.claim

    def __post_init__(self) -> None:
        names = [s.name for s in self.stages]
        if len(set(names)) != len(names):
            raise ValueError(f"{self.slug}: duplicate stage names in {names}")
        produced: dict[str, str] = {}
        for stage in self.stages:
            self._check_params(stage)
            if stage.fan_out is not None:
                if not _under(stage.fan_out, stage.params):
                    raise ValueError(f"{self.slug}.{stage.name}: fan_out '{stage.fan_out}' is not in the "
                                     f"stage's params {stage.params}")
                files = [p for p in stage.outs if not p.endswith("/")]
                if files or stage.metrics or stage.plots or stage.timings:
                    raise ValueError(f"{self.slug}.{stage.name}: a fan-out stage declares only outs folders "
                                     f"(each item writes its own sub-folder); got {files + list(stage.metrics)}"
                                     f"{' and plots' if stage.plots else ''}")
            for role, rel in stage.models:
                if rel not in stage.outs or not role.replace("_", "").isalnum():
                    raise ValueError(f"{self.slug}.{stage.name}: model '{role}' must be a snake_case role naming "
                                     f"one of the stage's outs {stage.outs}, got '{rel}'")
            for dep in stage.deps:
                if not any(_covers(out, dep) for out in produced):
                    raise ValueError(f"{self.slug}.{stage.name}: dep '{dep}' is not written by an earlier stage")
            for out in stage.written():
                if out in produced:
                    raise ValueError(f"{self.slug}: '{out}' written by both {produced[out]} and {stage.name}")
                produced[out] = stage.name
        if REPORT_FILE not in produced:
            raise ValueError(f"{self.slug}: no stage writes the report '{REPORT_FILE}'")

    def _check_params(self, stage: Stage) -> None:
        """Every declared key exists in the params model, and no declared key lies under another one."""
        for key in stage.params:
            try:
                check_key_exists(self.params_model, key, self.slug)
            except ParamsError as err:
                raise ValueError(f"{self.slug}.{stage.name}: params key '{key}' is not a key of "
                                 f"{self.params_model.__name__} ({err})") from None
            wider = [other for other in stage.params if other != key and _under(key, (other,))]
            if wider:
                raise ValueError(f"{self.slug}.{stage.name}: params key '{key}' is already covered by "
                                 f"'{wider[0]}'; declare one of them")

    def stage(self, name: str) -> Stage:
        for s in self.stages:
            if s.name == name:
                return s
        raise KeyError(name)

    def dvc_name(self, stage: Stage) -> str:
        """The report stage is named after the slug, so ``dvc repro <slug>`` runs the whole paper."""
        return self.slug if stage is self.stages[-1] else f"{self.slug}-{stage.name}"

    def stage_params(self, stage: Stage) -> tuple[str, ...]:
        """The keys a stage depends on, as declared (groups or dotted keys), after ``scale`` (which can
        change any value). DVC lists them as ``<slug>.<key>``."""
        return tuple(dict.fromkeys(("scale", *stage.params)))

    def stage_param_values(self, stage: Stage, params: PipelineParams) -> dict[str, Any]:
        """The values of the keys ``stage`` depends on, flattened to dotted names (``train.lr``: ``2e-3``)."""
        dumped = params.model_dump(mode="json")
        values: dict[str, Any] = {}
        for key in self.stage_params(stage):
            value: Any = dumped
            for part in key.split("."):
                value = value[part]
            values.update(flatten(value, f"{key}.") if isinstance(value, dict) else {key: value})
        return values

    def items(self, stage: Stage, params: PipelineParams) -> list[str]:
        """The items a fan-out stage runs over (``[]`` for an ordinary stage)."""
        if stage.fan_out is None:
            return []
        value: Any = params
        for part in stage.fan_out.split("."):
            value = getattr(value, part)
        items = [str(v) for v in value]
        if len(set(items)) != len(items):
            raise ValueError(f"{self.slug}.{stage.name}: fan-out items of '{stage.fan_out}' repeat: {items}")
        return items


def _covers(out: str, path: str) -> bool:
    return out == path or (out.endswith("/") and path.startswith(out))


def _under(key: str, declared: tuple[str, ...]) -> bool:
    """Whether the dotted ``key`` is one of ``declared`` or lies inside one of them (``train.lr`` in ``train``)."""
    return any(key == d or key.startswith(f"{d}.") for d in declared)


# --------------------------------------------------------------------------------------------------
# running one stage
# --------------------------------------------------------------------------------------------------
@dataclass
class StageContext:
    """What a stage function gets: its params, its declared paths, and logging hooks."""

    pipeline: Pipeline
    stage: Stage
    params: PipelineParams
    root: Path
    tracker: Any = None               # paperflows.tracking.Tracker, or None for untracked runs
    run_ids: tuple[str, ...] = ()     # child run first, then the parent run (metrics go to both)
    progress: bool = True
    item: str | None = None           # the item of a fan-out stage this call works on
    threads: int | None = None        # torch intra-op threads for the stage call; None: leave as is
    project: Path | None = None       # the project root: relative data paths in params are taken from it
    cache_dir: Path | None = None     # derived model files shared across runs (PAPERFLOWS_CACHE)
    latest: dict[str, float] = dataclasses.field(default_factory=dict)  # last value of every logged curve

    def data_path(self, value: str) -> Path:
        """A user-supplied data path from the params, resolved against the project root."""
        return resolve_data_path(value, self.project or Path.cwd())

    def path(self, rel: str) -> Path:
        """Absolute path of a declared dep or output; an undeclared path is a programming error."""
        declared = self.stage.deps + self.stage.written()
        if not any(_covers(d, rel) for d in declared):
            raise KeyError(f"{self.pipeline.slug}.{self.stage.name}: '{rel}' is not declared in deps/outs")
        target = self.root / rel
        if not rel.endswith("/") and rel in self.stage.written():
            target.parent.mkdir(parents=True, exist_ok=True)
        elif rel.endswith("/") and rel in self.stage.written():
            target.mkdir(parents=True, exist_ok=True)
        return target

    def item_dir(self, rel: str) -> Path:
        """This item's own sub-folder of the declared output folder ``rel`` (fan-out stages), inside the
        stage's staging folder until every item has finished."""
        if self.item is None or not rel.endswith("/") or rel not in self.stage.outs:
            raise KeyError(f"{self.pipeline.slug}.{self.stage.name}: item_dir needs a fan-out item and a "
                           f"declared outs folder, got item={self.item!r}, '{rel}'")
        target = staging_dir(self.root, rel) / self.item
        target.mkdir(parents=True, exist_ok=True)
        return target

    def log_metrics(self, metrics: dict[str, float], step: int | None = None) -> None:
        self.latest.update({k: float(v) for k, v in metrics.items() if v is not None})
        if self.tracker is None:
            return
        for run_id in self.run_ids:
            self.tracker.log_metrics(run_id, metrics, step=step)

    def metric_callback(self, prefix: str) -> Callable[[int, dict[str, float]], None]:
        """A ``callback(step, metrics)`` for the training loop that logs ``<prefix>/<name>`` curves."""

        def _log(step: int, metrics: dict[str, float]) -> None:
            self.log_metrics({f"{prefix}/{k}": v for k, v in metrics.items() if k != "step"}, step=step)

        return _log


def check_inputs(pipeline: Pipeline, stage: Stage, root: Path) -> None:
    for dep in stage.deps:
        target = root / dep
        if not target.exists():
            producer = next((s for s in pipeline.stages if any(_covers(o, dep) for o in s.written())), None)
            raise missing_input_error(pipeline.slug, stage.name, target, producer.name if producer else "?",
                                      pipeline.dvc_name(producer) if producer else pipeline.slug)


def staging_dir(root: Path, rel: str) -> Path:
    """Where the items of a fan-out stage write the declared folder ``rel`` until all of them finished."""
    return root / f"{rel.rstrip('/')}.partial"


def _retired_dir(root: Path, rel: str) -> Path:
    return root / f"{rel.rstrip('/')}.old"


def begin_fan_out(pipeline: Pipeline, stage: Stage, root: Path) -> None:
    """Start a fan-out stage: inputs checked, an empty staging folder per declared output (items of an
    earlier, stopped attempt are dropped: they may have been made with other parameters)."""
    check_inputs(pipeline, stage, root)
    for rel in stage.outs:
        for leftover in (staging_dir(root, rel), _retired_dir(root, rel)):
            if leftover.exists():
                shutil.rmtree(leftover)
        staging_dir(root, rel).mkdir(parents=True)


def check_outputs(pipeline: Pipeline, stage: Stage, root: Path, item: str | None = None) -> None:
    if item is not None:
        missing = [f"{p}{item}/" for p in stage.outs if not any((staging_dir(root, p) / item).glob("*"))]
    else:
        missing = [p for p in stage.written() if not (root / p).exists()]
    if missing:
        raise StageOutputError(f"{pipeline.slug}.{stage.name}: finished without writing declared "
                               f"output(s) {missing} under {root}")


def content_hash(path: Path) -> str:
    """sha256 of a file, or of a folder's relative names and contents (first 16 hex digits)."""
    digest = hashlib.sha256()
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    for f in files:
        digest.update(str(f.relative_to(path) if path.is_dir() else f.name).encode())
        with open(f, "rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
    return digest.hexdigest()[:16]


def _numeric_leaves(tree: Any, prefix: str = "") -> dict[str, float]:
    out: dict[str, float] = {}
    if isinstance(tree, dict):
        for k, v in tree.items():
            out.update(_numeric_leaves(v, f"{prefix}{k}/" if prefix or k else ""))
    elif isinstance(tree, (int, float)) and not isinstance(tree, bool):
        out[prefix.rstrip("/")] = float(tree)
    return out


def run_stage(ctx: StageContext, parent_run_id: str | None = None, entry_tags: dict[str, str] | None = None
              ) -> dict[str, Any]:
    """Run one stage with its MLflow child run; returns ``{"stage", "seconds", "metrics"}``.

    A fan-out stage called without an item runs all its items here, one after the other.
    """
    pipeline, stage, root = ctx.pipeline, ctx.stage, ctx.root
    if stage.fan_out is not None and ctx.item is None:
        begin_fan_out(pipeline, stage, root)
        results = [run_stage(dataclasses.replace(ctx, item=item), parent_run_id, entry_tags)
                   for item in pipeline.items(stage, ctx.params)]
        return gather_items(ctx, results)
    check_inputs(pipeline, stage, root)
    tracker = ctx.tracker
    child = None
    label = stage.name if ctx.item is None else f"{stage.name}[{ctx.item}]"
    if tracker is not None:
        # where the stage itself ran (a Dask worker for a fan-out item), not where the run was started
        tags = {"paperflows.stage": stage.name, "dvc.stage": pipeline.dvc_name(stage), **(entry_tags or {}),
                **({"paperflows.item": ctx.item} if ctx.item is not None else {}),
                **{f"deps.{dep.rstrip('/')}": content_hash(root / dep) for dep in stage.deps}}
        child = tracker.start(f"{pipeline.slug}.{label}", tags, parent_id=parent_run_id)
        ctx.run_ids = (child,) + ((parent_run_id,) if parent_run_id else ())
        tracker.log_params(child, pipeline.stage_param_values(stage, ctx.params))
    # every stage starts from the same RNG state whatever ran before it in this process, so a stage run
    # by `dvc repro` (own process) and by the Prefect flow (after other stages) computes the same thing
    seed_everything(stage_seed(pipeline.slug, label))
    ctx.latest = {}  # this call's own curves (items of a fan-out stage are copies of one context)
    started = time.perf_counter()
    ok = killed = False
    metrics: dict[str, float] = {}
    try:
        # CPU kernels reduce in a thread-count dependent order: the same count gives the same bits
        with torch_threads(ctx.threads):
            stage.run(ctx)
        check_outputs(pipeline, stage, root, ctx.item)
        for rel in stage.metrics:
            if rel.endswith(".json"):
                metrics.update(_numeric_leaves(load_json(root / rel)))
        ok = True
    except BaseException as err:
        killed = not isinstance(err, Exception)  # a signal (SIGTERM, Ctrl-C, Prefect's termination)
        if tracker is not None and child is not None:
            tracker.set_tags(child, {"paperflows.error": traceback.format_exc(limit=3)[-4000:]})
        raise
    finally:
        seconds = time.perf_counter() - started
        if tracker is not None and child is not None:
            tracker.log_metrics(child, {"stage_seconds": seconds, **(metrics if ok else {})})
            if ok:
                _log_stage_files(ctx, child)
            tracker.end(child, ok, killed=killed)
    if tracker is not None and parent_run_id:
        if metrics:
            tracker.log_metrics(parent_run_id, {f"{label}/{k}": v for k, v in metrics.items()})
        # curves logged to the parent run too: written now, since this process may be a Dask worker
        # that never sees the parent run end
        tracker.flush(parent_run_id)
    final = {k: v for k, v in ctx.latest.items() if k.rsplit("/", 1)[-1] in FINAL_CURVES}
    return {"stage": stage.name, "item": ctx.item, "seconds": seconds, "metrics": metrics, "run_id": child,
            "final": final}


def gather_items(ctx: StageContext, results: list[dict[str, Any]]) -> dict[str, Any]:
    """Close a fan-out stage once all its items ran (in any order, anywhere): the staged folders replace
    the declared ones, outputs checked, one summary."""
    root = ctx.root
    items = ctx.pipeline.items(ctx.stage, ctx.params)
    for rel in ctx.stage.outs:
        staged, final, retired = staging_dir(root, rel), root / rel, _retired_dir(root, rel)
        present = sorted(p.name for p in staged.iterdir()) if staged.is_dir() else []
        if present != sorted(items):
            raise StageOutputError(f"{ctx.pipeline.slug}.{ctx.stage.name}: staged {rel} holds items {present}, "
                                   f"expected {sorted(items)}; the stage must be rerun as a whole")
        if final.exists():
            final.rename(retired)
        staged.rename(final)
        if retired.exists():
            shutil.rmtree(retired)
    check_outputs(ctx.pipeline, ctx.stage, root)
    return {"stage": ctx.stage.name, "item": None, "seconds": sum(r["seconds"] for r in results),
            "metrics": {}, "items": results}


def _log_stage_files(ctx: StageContext, run_id: str) -> None:
    """Metric files, plots, tables and weights of a finished stage, as artifacts of its run."""
    from paperflows.tracking import artifact_folder, log_csv_copy  # MLflow loads only where runs are written

    tracker, root = ctx.tracker, ctx.root
    for rel in ctx.stage.metrics:
        tracker.log_artifact(run_id, root / rel, "metrics")
    for rel in ctx.stage.timings:
        tracker.log_artifact(run_id, root / rel, "timings")
        if rel.endswith(".json"):
            tracker.log_metrics(run_id, {f"timings/{k}": v for k, v in _numeric_leaves(load_json(root / rel)).items()})
    for plot in ctx.stage.plots:
        tracker.log_artifact(run_id, root / plot.path, "plots")
    for rel in ctx.stage.outs:
        path = root / rel if ctx.item is None else staging_dir(root, rel) / ctx.item
        files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        for f in files:
            if f.stat().st_size <= MAX_ARTIFACT_BYTES:
                tracker.log_artifact(run_id, f, artifact_folder(f))
            if f.suffix == ".parquet" and f.stat().st_size <= MAX_PREVIEW_BYTES:
                log_csv_copy(tracker, run_id, f)  # MLflow previews CSV, not Parquet


# --------------------------------------------------------------------------------------------------
# running a whole pipeline
# --------------------------------------------------------------------------------------------------
HELD_LOCKS_ENV = "PAPERFLOWS_HELD_LOCKS"  # output folders whose lock the supervising `paperflows run` holds


def _lock_path(settings: Settings, root: Path) -> Path:
    project, folder = settings.root.resolve(), root.resolve()
    rel = str(folder.relative_to(project)) if folder.is_relative_to(project) else str(folder)
    return settings.root / ".paperflows" / "locks" / (rel.strip("/").replace("/", "__") + ".lock")


@contextlib.contextmanager
def output_lock(settings: Settings, root: Path) -> Iterator[None]:
    """Refuse to let two processes write the same output folder at once (:class:`RunLockedError`).

    A process started by a supervisor that already holds the lock of ``root`` (listed in
    ``$PAPERFLOWS_HELD_LOCKS``) does not take it again.
    """
    lock_path = _lock_path(settings, root)
    if str(lock_path) in os.environ.get(HELD_LOCKS_ENV, "").split(os.pathsep):
        yield
        return
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RunLockedError(f"another run is writing {root}; wait for it to finish") from None
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextlib.contextmanager
def hold_output_locks(settings: Settings, roots: list[Path]) -> Iterator[dict[str, str]]:
    """Take the lock of every folder in ``roots`` (all or none) and yield the environment that tells child
    processes they hold them. A lock that is taken raises :class:`RunLockedError` before anything starts."""
    with contextlib.ExitStack() as stack:
        for root in roots:
            stack.enter_context(output_lock(settings, root))
        yield {HELD_LOCKS_ENV: os.pathsep.join(str(_lock_path(settings, r)) for r in roots)}


def new_run_folder(settings: Settings, slug: str, run_name: str | None = None) -> Path:
    """A new, empty folder of its own under ``runs/<slug>/`` (created here, so two runs started in the same
    second never share one); a run folder needs no lock."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    name = f"{stamp}-{run_name}" if run_name else stamp
    settings.runs(slug).mkdir(parents=True, exist_ok=True)
    for suffix in itertools.count():
        folder = settings.runs(slug) / (f"{name}-{suffix}" if suffix else name)
        try:
            folder.mkdir()
        except FileExistsError:
            continue
        return folder
    raise AssertionError("unreachable")


@dataclass
class RunSummary:
    slug: str
    root: Path
    run_id: str | None
    seconds: float
    stages: list[dict[str, Any]]
    report: dict[str, Any]
    workspace: bool


StageRunner = Callable[[StageContext, str | None, dict[str, str]], dict[str, Any]]


def skip_stage(ctx: StageContext, parent_run_id: str | None = None, entry_tags: dict[str, str] | None = None
               ) -> dict[str, Any]:
    """A stage that DVC found up to date: not run; its MLflow child run says so and carries the ``dvc.lock``
    hashes of the results it stands for. Returns the summary a run stage returns, with ``skipped``."""
    from paperflows.dvcstate import lock_hashes

    pipeline, stage = ctx.pipeline, ctx.stage
    child = None
    if ctx.tracker is not None:
        tags = {"paperflows.stage": stage.name, "dvc.stage": pipeline.dvc_name(stage), **(entry_tags or {}),
                "paperflows.skipped": "up to date in dvc.lock", **lock_hashes(ctx.project or ctx.root,
                                                                            pipeline.dvc_name(stage))}
        child = ctx.tracker.start(f"{pipeline.slug}.{stage.name}", tags, parent_id=parent_run_id)
        ctx.tracker.end(child, True)
    return {"stage": stage.name, "item": None, "seconds": 0.0, "metrics": {}, "run_id": child, "final": {},
            "skipped": True}


def execute(pipeline: Pipeline, params: PipelineParams, settings: Settings, root: Path, *,
            entry: str, tags: dict[str, str] | None = None, tracker: Any = None,
            stage_runner: StageRunner = run_stage, progress: bool = True,
            workspace: bool = False, freshness: Any = None, skip_runner: StageRunner = skip_stage) -> RunSummary:
    """Run the stages of ``pipeline`` into ``root`` under one MLflow parent run.

    With ``freshness`` (a :class:`~paperflows.dvcstate.Freshness`: a workspace run whose stages DVC found up
    to date), a fresh stage is skipped (``skip_runner``) unless a stage before it ran and changed its inputs;
    the summary lists which stages ran. SIGTERM (from a terminal, a cancelled deployment run, a stopped
    worker) ends the run's MLflow runs as KILLED instead of leaving them RUNNING.
    """
    with terminate_as_exception():
        return _execute(pipeline, params, settings, root, entry=entry, tags=tags, tracker=tracker,
                        stage_runner=stage_runner, progress=progress, workspace=workspace, freshness=freshness,
                        skip_runner=skip_runner)


def _execute(pipeline: Pipeline, params: PipelineParams, settings: Settings, root: Path, *,
             entry: str, tags: dict[str, str] | None, tracker: Any, stage_runner: StageRunner, progress: bool,
             workspace: bool, freshness: Any, skip_runner: StageRunner) -> RunSummary:
    started = time.perf_counter()
    root.mkdir(parents=True, exist_ok=True)
    parent = None
    entry_tags = {"paperflows.entry": entry}
    ok = killed = False
    stages: list[dict[str, Any]] = []
    dumped = params.model_dump(mode="json")
    changed: dict[str, Any] | None = None
    try:
        if tracker is not None:
            from paperflows.params import file_values
            from paperflows.tracking import changed_params, run_name

            base = file_values(type(params), pipeline.slug, settings.params_file)
            changed = changed_params(dumped, base.model_dump(mode="json") if base is not None else None)
            name = run_name(pipeline.slug, changed, (tags or {}).get("prefect.flow_run_name", ""))
            parent = tracker.start(name, {**(tags or {}), "paperflows.output_root": _shown_path(root, settings),
                                          "paperflows.changed": "(no params.yaml section)" if changed is None
                                          else ", ".join(changed) or "(none)"})
            tracker.log_params(parent, flatten(dumped))
        record = run_record(pipeline.slug, entry, params, parent, settings)
        save_json(record, root / "run.json")
        ran = False
        for stage in pipeline.stages:
            ctx = StageContext(pipeline=pipeline, stage=stage, params=params, root=root, tracker=tracker,
                               progress=progress, threads=settings.torch_threads, project=settings.root,
                               cache_dir=settings.cache_dir)
            if freshness is not None and freshness.skips(pipeline.dvc_name(stage), upstream_ran=ran):
                stages.append(skip_runner(ctx, parent, {**entry_tags, **(tags or {})}))
                continue
            stages.append(stage_runner(ctx, parent, {**entry_tags, **(tags or {})}))
            ran = True
            if freshness is not None:
                freshness.invalidate()
        report = load_json(root / REPORT_FILE)
        ok = True
        save_json({**record, "seconds": round(time.perf_counter() - started, 1),
                   "finished": datetime.now(timezone.utc).isoformat()}, root / "run.json")
    except BaseException as err:
        killed = not isinstance(err, Exception)  # a signal, not a failure of the work
        raise
    finally:
        seconds = time.perf_counter() - started
        if tracker is not None and parent is not None:
            tracker.log_metrics(parent, {"pipeline_seconds": seconds})
            if ok:
                from paperflows.tracking import log_outcome

                log_outcome(tracker, parent, pipeline, params, root, report, changed,
                            f"`paperflows run` through Prefect ({entry})")
            tracker.end(parent, ok, killed=killed)
    return RunSummary(slug=pipeline.slug, root=root, run_id=parent, seconds=seconds, stages=stages,
                      report=report, workspace=workspace)


def params_digest(params: PipelineParams) -> str:
    """A short digest of the resolved parameters: two runs with the same digest ran the same values."""
    text = json.dumps(params.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def run_record(slug: str, entry: str, params: PipelineParams, mlflow_run_id: str | None, settings: Settings
               ) -> dict[str, Any]:
    """What ``run.json`` holds from the start of a run: the parameters (and their digest and scale), how it
    was started, the commit it ran, the torch thread count (a result-changing setting) and the MLflow run;
    the engine adds ``seconds`` and ``finished`` when the run completes."""
    from paperflows.tracking import git_commit

    return {"slug": slug, "entry": entry, "params": params.model_dump(mode="json"),
            "scale": getattr(params, "scale", "cpu"), "params_digest": params_digest(params),
            "commit": git_commit(settings.root), "torch_threads": settings.torch_threads,
            "mlflow_run_id": mlflow_run_id, "started": datetime.now(timezone.utc).isoformat()}


def _shown_path(root: Path, settings: Settings) -> str:
    """A run folder relative to the project (the checkout can move), absolute when it lies outside."""
    try:
        return root.resolve().relative_to(settings.root.resolve()).as_posix()
    except ValueError:
        return str(root)


def summary_json(summary: RunSummary) -> str:
    return json.dumps({"slug": summary.slug, "root": str(summary.root), "mlflow_run_id": summary.run_id,
                       "seconds": round(summary.seconds, 2), "workspace": summary.workspace,
                       "claims": summary.report.get("claims", [])}, indent=2)
