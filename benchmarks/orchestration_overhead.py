"""Orchestration and tracking overhead: one pipeline run bare, with MLflow only, and through Prefect + MLflow.

All runs happen in this one process, side by side, on the same parameters, in a throwaway project
folder. "bare" calls the stage functions in order with no tracking; "mlflow" adds the MLflow parent and
child runs, metric curves and artifacts; "prefect+mlflow" is the Prefect flow as `paperflows run` uses
it. Prefect's temporary server start-up is paid once per process and is reported separately.

    python benchmarks/orchestration_overhead.py [--slug knots] [--repeats 2] [--set key=value ...]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slug", default="knots")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="paperflows-bench-"))
    os.environ["PAPERFLOWS_ROOT"] = str(workdir)
    os.environ["MLFLOW_TRACKING_URI"] = f"sqlite:///{workdir / 'mlflow.db'}"
    os.environ["PREFECT_HOME"] = str(workdir / "prefect")
    os.environ["PAPERFLOWS_PROGRESS"] = "0"

    from paperflows import registry
    from paperflows.engine import execute
    from paperflows.params import apply_overrides, parse_override, validate
    from paperflows.settings import load_settings, pin_environment
    from paperflows.tracking import MlflowTracker

    settings = pin_environment(load_settings())
    pipeline = registry.get(args.slug)
    data = apply_overrides({}, [parse_override(o) for o in args.overrides], pipeline.params_model, args.slug)
    params = validate(pipeline.params_model, data, args.slug)

    started = time.perf_counter()
    from paperflows import flows  # imports prefect

    import_seconds = time.perf_counter() - started
    # first flow call pays the temporary server start: measure it on a flow of its own
    from prefect import flow

    @flow(name="warm-up")
    def warm_up() -> None:
        return None

    started = time.perf_counter()
    warm_up()
    server_seconds = time.perf_counter() - started
    started = time.perf_counter()
    MlflowTracker(settings, pipeline.slug)  # creates the MLflow database and experiment (once per store)
    mlflow_setup_seconds = time.perf_counter() - started

    times: dict[str, list[float]] = {"bare": [], "mlflow": [], "prefect+mlflow": []}
    for i in range(args.repeats):
        for mode in times:
            started = time.perf_counter()
            if mode == "bare":
                execute(pipeline, params, settings, workdir / f"bare{i}", entry="bench", progress=False)
            elif mode == "mlflow":
                execute(
                    pipeline,
                    params,
                    settings,
                    workdir / f"mlflow{i}",
                    entry="bench",
                    tracker=MlflowTracker(settings, pipeline.slug),
                    progress=False,
                )
            else:
                flows.FLOWS[pipeline.slug](params=params)
            times[mode].append(time.perf_counter() - started)
            print(f"  run {i + 1}/{args.repeats} {mode:<15} {times[mode][-1]:7.2f} s", flush=True)

    bare = statistics.median(times["bare"])
    print(f"\n{pipeline.slug}: median of {args.repeats} runs each (same process, same parameters)")
    print(f"{'mode':<16}{'median s':>10}{'min s':>10}{'overhead vs bare (median)':>28}")
    for mode, values in times.items():
        median = statistics.median(values)
        print(f"{mode:<16}{median:>10.2f}{min(values):>10.2f}{100 * (median - bare) / bare:>27.1f}%")
    print(f"{'import prefect':<16}{import_seconds:>10.2f}   (once per process)")
    print(f"{'server start':<16}{server_seconds:>10.2f}   (once per process, embedded mode)")
    print(f"{'mlflow db':<16}{mlflow_setup_seconds:>10.2f}   (once per tracking store)")
    once = import_seconds + server_seconds
    full = statistics.median(times["prefect+mlflow"]) + once
    print(
        f"prefect+mlflow including the once-per-process costs: {full:.2f} s, "
        f"{100 * (full - bare) / bare:.1f}% over bare"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
