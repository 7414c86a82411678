"""The stage contract: one declaration per stage → Prefect task, DVC stage and MLflow child run.

A :class:`Stage` names the function that does the work, the parameters it reads (whole groups such as
``"train"`` or single keys such as ``"train.so3_steps"``, so that changing a key reruns exactly the stages
that read it), the files it reads (``deps``) and writes (``outs``, ``metrics``, ``plots``; ``timings`` for
measurements of the machine that DVC does not track). From that one declaration :mod:`paperflows.dvcgen`
writes the DVC stage (``cmd: paperflows stage <slug> <stage>``) and :mod:`paperflows.engine` runs it (checks
inputs and outputs, the MLflow child run, seeding, fan-out staging) for the Prefect flow and for DVC alike.

A *fan-out* stage (``fan_out="seeds"``, ``"estimate.strategies"``, ...) does the same work once per item of a
list parameter: one LoRA per task, one seed per run, one strategy per evaluation. Each item is its own call
of the stage function (``ctx.item`` set), seeded from its own name and logged as its own MLflow child run,
so items are independent of each other and of their order. A fan-out stage declares only ``outs`` folders;
each item writes into its own sub-folder (``ctx.item_dir(out)``), staged beside the declared folder
(``<out>.partial/<item>/``) until every item has finished.

A :class:`StageContext` holds nothing tied to its process (the tracker builds its client where it is used,
the torch thread count travels as ``ctx.threads``), so an item can run on a Dask worker. A stage that trains
declares ``gpu=True``: each of its calls holds one slot of the GPU concurrency limit in a Prefect flow.

Stages pass paths, never objects. All paths are relative to the run's output root: the DVC workspace
``outputs/<slug>/`` for runs at the ``params.yaml`` defaults, ``runs/<slug>/<run>/`` otherwise, so a run
with edited parameters never overwrites what DVC tracks.
"""

from __future__ import annotations

import dataclasses
import importlib
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from paperflows.paper import Paper
from paperflows.params import ParamsError, PipelineParams, check_key_exists, flatten, resolve_data_path

REPORT_FILE = "report.json"  # written by every pipeline's last stage
#: a metric-name segment that names a seed (``seed3``, ``s3``): such curves are logged per seed, without it
SEED_SEGMENT = re.compile(r"(?:seed|s)(\d+)")
#: the headline table's cells and each claim's effect, interval and verdict, as DVC metrics of the report stage
CLAIM_METRICS = "metrics/claims.json"


class Tracker(Protocol):
    """What the engine and a stage need of run tracking: MLflow (:class:`paperflows.tracking.MlflowTracker`),
    the spool a DVC stage writes MLflow runs through later (:class:`paperflows.spool.SpoolTracker`), or a
    copy that travels to a Dask worker (:class:`paperflows.flows.PortableTracker`)."""

    def start(self, run_name: str, tags: dict[str, str], parent_id: str | None = None) -> str: ...
    def end(self, run_id: str, ok: bool, killed: bool = False) -> None: ...
    def set_tags(self, run_id: str, tags: dict[str, str]) -> None: ...
    def log_params(self, run_id: str, flat: dict[str, Any]) -> None: ...
    def log_metrics(self, run_id: str, metrics: dict[str, float], step: int | None = None) -> None: ...
    def log_artifact(self, run_id: str, path: Path, artifact_path: str | None = None) -> None: ...
    def flush(self, run_id: str) -> None: ...


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
    fan_out: str | None = None  # dotted name of a list parameter: the stage runs once per item
    gpu: bool = False  # the stage trains: each call holds one GPU slot when run by a flow
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


def stage(
    name: str | None = None,
    *,
    params: tuple[str, ...] = (),
    deps: tuple[str, ...] = (),
    outs: tuple[str, ...] = (),
    metrics: tuple[str, ...] = (),
    plots: tuple[Plot, ...] = (),
    fan_out: str | None = None,
    gpu: bool = False,
    timings: tuple[str, ...] = (),
    models: dict[str, str] | None = None,
) -> Callable[[Callable[[StageContext], None]], Stage]:
    """Declare a stage right above its function: ``@stage(params=("data",), outs=(TASKS,))``.

    The decorated name becomes the :class:`Stage` (still callable with a context), so the pipeline's
    ``stages=(prepare, pretrain, ...)`` lists the declarations in paper order.
    """

    def declare(func: Callable[[StageContext], None]) -> Stage:
        return Stage(
            name or func.__name__,
            func,
            params=tuple(params),
            deps=tuple(deps),
            outs=tuple(outs),
            metrics=tuple(metrics),
            plots=tuple(plots),
            fan_out=fan_out,
            gpu=gpu,
            timings=tuple(timings),
            models=tuple((models or {}).items()),
        )

    return declare


class Pipeline:
    """A paper: its parameter model and its stages in paper order, the last one writing the report.

    ``stages`` are the method's stages (``pipeline.py``); ``report`` is the stage that writes the report, by
    reference (``"pipelines.<slug>.report:report"``, declared in the paper's ``report.py``, so that computing
    a result never imports how it is reported) or as a :class:`Stage`; it is resolved and the whole pipeline
    validated on first use of :attr:`stages`. Without ``report`` the last of ``stages`` writes the report.
    """

    def __init__(
        self,
        paper: Paper,
        params_model: type[PipelineParams],
        stages: tuple[Stage, ...],
        report: str | Stage | None = None,
    ) -> None:
        self.paper = paper
        self.params_model = params_model
        self._method = tuple(stages)
        self._report = report
        self._stages: tuple[Stage, ...] | None = None
        if not isinstance(report, str):
            self._resolve()

    @property
    def stages(self) -> tuple[Stage, ...]:
        """Every stage in paper order: the method's, then the report stage."""
        if self._stages is None:
            self._resolve()
        assert self._stages is not None
        return self._stages

    def _resolve(self) -> None:
        report = self._report
        if isinstance(report, str):
            module, _, name = report.partition(":")
            try:
                report = getattr(importlib.import_module(module), name)
            except (ImportError, AttributeError) as err:
                raise ValueError(f"{self.paper.slug}: report stage '{self._report}' not found ({err})") from None
            if not isinstance(report, Stage):
                raise ValueError(f"{self.paper.slug}: '{self._report}' is not a stage (declare it with @stage)")
            if CLAIM_METRICS not in report.metrics:
                # every report stage also gives DVC the claims as metrics (Report.save writes them): set on the
                # declared stage itself, which pickles by reference
                object.__setattr__(report, "metrics", (*report.metrics, CLAIM_METRICS))
        stages = self._method + ((report,) if report is not None else ())
        self._validate(stages)
        self._stages = stages

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_stages": self.stages}

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

    def _validate(self, stages: tuple[Stage, ...]) -> None:
        names = [s.name for s in stages]
        if len(set(names)) != len(names):
            raise ValueError(f"{self.slug}: duplicate stage names in {names}")
        produced: dict[str, str] = {}
        for stage in stages:
            self._check_params(stage)
            if stage.fan_out is not None:
                if not _under(stage.fan_out, stage.params):
                    raise ValueError(
                        f"{self.slug}.{stage.name}: fan_out '{stage.fan_out}' is not in the "
                        f"stage's params {stage.params}"
                    )
                files = [p for p in stage.outs if not p.endswith("/")]
                if files or stage.metrics or stage.plots or stage.timings:
                    raise ValueError(
                        f"{self.slug}.{stage.name}: a fan-out stage declares only outs folders "
                        f"(each item writes its own sub-folder); got {files + list(stage.metrics)}"
                        f"{' and plots' if stage.plots else ''}"
                    )
            for role, rel in stage.models:
                if rel not in stage.outs or not role.replace("_", "").isalnum():
                    raise ValueError(
                        f"{self.slug}.{stage.name}: model '{role}' must be a snake_case role naming "
                        f"one of the stage's outs {stage.outs}, got '{rel}'"
                    )
            for dep in stage.deps:
                if not any(covers(out, dep) for out in produced):
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
                raise ValueError(
                    f"{self.slug}.{stage.name}: params key '{key}' is not a key of {self.params_model.__name__} ({err})"
                ) from None
            wider = [other for other in stage.params if other != key and _under(key, (other,))]
            if wider:
                raise ValueError(
                    f"{self.slug}.{stage.name}: params key '{key}' is already covered by "
                    f"'{wider[0]}'; declare one of them"
                )

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


def covers(out: str, path: str) -> bool:
    return out == path or (out.endswith("/") and path.startswith(out))


def _under(key: str, declared: tuple[str, ...]) -> bool:
    """Whether the dotted ``key`` is one of ``declared`` or lies inside one of them (``train.lr`` in ``train``)."""
    return any(key == d or key.startswith(f"{d}.") for d in declared)


def staging_dir(root: Path, rel: str) -> Path:
    """Where the items of a fan-out stage write the declared folder ``rel`` until all of them finished."""
    return root / f"{rel.rstrip('/')}.partial"


def retired_dir(root: Path, rel: str) -> Path:
    return root / f"{rel.rstrip('/')}.old"


@dataclass
class StageContext:
    """What a stage function gets: its params, its declared paths, and logging hooks."""

    pipeline: Pipeline
    stage: Stage
    params: PipelineParams
    root: Path
    tracker: Tracker | None = None  # run tracking (MLflow, or its spool), None for untracked runs
    run_ids: tuple[str, ...] = ()  # child run first, then the parent run (metrics go to both)
    progress: bool = True
    item: str | None = None  # the item of a fan-out stage this call works on
    threads: int | None = None  # torch intra-op threads for the stage call; None: leave as is
    project: Path | None = None  # the project root: relative data paths in params are taken from it
    cache_dir: Path | None = None  # derived model files shared across runs (PAPERFLOWS_CACHE)
    latest: dict[str, float] = dataclasses.field(default_factory=dict)  # last value of every logged curve
    seed_runs: dict[str, str] = dataclasses.field(default_factory=dict)  # seed -> its run under the stage's run

    def data_path(self, value: str) -> Path:
        """A user-supplied data path from the params, resolved against the project root."""
        return resolve_data_path(value, self.project or Path.cwd())

    def path(self, rel: str) -> Path:
        """Absolute path of a declared dep or output; an undeclared path is a programming error."""
        declared = self.stage.deps + self.stage.written()
        if not any(covers(d, rel) for d in declared):
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
            raise KeyError(
                f"{self.pipeline.slug}.{self.stage.name}: item_dir needs a fan-out item and a "
                f"declared outs folder, got item={self.item!r}, '{rel}'"
            )
        target = staging_dir(self.root, rel) / self.item
        target.mkdir(parents=True, exist_ok=True)
        return target

    def log_metrics(self, metrics: dict[str, float], step: int | None = None) -> None:
        """Log to the stage's run and the pipeline's parent run. A metric whose name holds a seed segment
        (``train/er/seed0/loss``, ``pretrain/s1/loss``) goes instead to a run of that seed under the stage's run,
        without the segment (``train/er/loss``): MLflow then overlays the seeds' curves of one name."""
        self.latest.update({k: float(v) for k, v in metrics.items() if v is not None})
        if self.tracker is None:
            return
        plain: dict[str, float] = {}
        by_seed: dict[str, dict[str, float]] = {}
        for name, value in metrics.items():
            parts = name.split("/")
            seeds = [i for i, part in enumerate(parts) if SEED_SEGMENT.fullmatch(part)]
            if seeds and self.run_ids:
                seed = SEED_SEGMENT.fullmatch(parts[seeds[-1]]).group(1)  # type: ignore[union-attr]
                by_seed.setdefault(seed, {})["/".join(parts[: seeds[-1]] + parts[seeds[-1] + 1 :])] = value
            else:
                plain[name] = value
        if plain:
            for run_id in self.run_ids:
                self.tracker.log_metrics(run_id, plain, step=step)
        for seed, values in by_seed.items():
            self.tracker.log_metrics(self._seed_run(seed), values, step=step)

    def _seed_run(self, seed: str) -> str:
        if seed not in self.seed_runs:
            assert self.tracker is not None
            label = self.stage.name if self.item is None else f"{self.stage.name}[{self.item}]"
            self.seed_runs[seed] = self.tracker.start(
                f"{self.pipeline.slug}.{label} · seed {seed}",
                {
                    "paperflows.stage": self.stage.name,
                    "paperflows.seed": seed,
                    **({"paperflows.item": self.item} if self.item is not None else {}),
                },
                parent_id=self.run_ids[0],
            )
        return self.seed_runs[seed]

    def end_seed_runs(self, ok: bool, killed: bool = False) -> None:
        """End the per-seed runs this stage call opened (the engine calls it when the stage ends)."""
        if self.tracker is not None:
            for run_id in self.seed_runs.values():
                self.tracker.flush(run_id)
                self.tracker.end(run_id, ok, killed=killed)
        self.seed_runs = {}

    def metric_callback(self, prefix: str) -> Callable[[int, dict[str, float]], None]:
        """A ``callback(step, metrics)`` for the training loop that logs ``<prefix>/<name>`` curves."""

        def _log(step: int, metrics: dict[str, float]) -> None:
            self.log_metrics({f"{prefix}/{k}": v for k, v in metrics.items() if k != "step"}, step=step)

        return _log
