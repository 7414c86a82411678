"""The ``paperflows`` command line (also ``python -m paperflows``).

    paperflows list                          the registered pipelines and their stages
    paperflows run <slug>|all [--set k=v]    run through Prefect (embedded), tracked in MLflow
    paperflows stage <slug> <stage>          one stage, no Prefect start-up (what dvc.yaml calls)
    paperflows dvc-yaml [--check]            regenerate dvc.yaml, or fail if it drifted
    paperflows report [--json | --html [PATH] | --markdown [PATH]]
                                             the headline claim of every paper, then every claim; or a
                                             self-contained HTML results page (default outputs/report.html);
                                             or the results record from the run folders (RESULTS.md)
    paperflows graph <slug> [--mermaid | --svg PATH]
                                             a pipeline's stages, artifacts and parameter groups, from
                                             dvc.yaml (text; Mermaid source; an SVG file)
    paperflows params <slug> [--set k=v] [--json]
                                             every parameter: type, range, default, paper value, description
    paperflows run <slug>|all --show [--set k=v]
                                             the resolved parameters and the output folder; runs nothing
    paperflows serve [slug ...]              serve one Prefect deployment per pipeline (needs PREFECT_API_URL)
    paperflows deploy [--write|--check]      create the prefect.yaml deployments for a work pool, or
                                             regenerate / check prefect.yaml
    paperflows new <slug> --title ... --arxiv ... --claim ...
                                             scaffold a new paper package (see pipelines/README.md)
    paperflows ui [--mlflow-port N] [--prefect-port N]
                                             the MLflow and Prefect UIs of this project on loopback (their
                                             URLs printed); Ctrl-C stops both
    paperflows completion bash|zsh           a completion script (commands, slugs, stages, --set keys):
                                             source <(paperflows completion bash)

Exit codes: 0 success; 1 a run failed (or dvc.yaml / prefect.yaml drifted with --check); 2 bad
command line, parameters or inputs (or no Prefect server for serve/deploy), detected before any work
started and with nothing written; 75 refused because another run is writing the same outputs (the DVC
workspace of a pipeline): nothing was started or written, try again when it has finished; 130 / 143 the
run was stopped by Ctrl-C / SIGTERM (its MLflow runs end as KILLED and no process is left behind).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from collections.abc import Sequence
from typing import Any

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_LOCKED = 0, 1, 2, 75  # 75: EX_TEMPFAIL, "try again later"


class UsageError(Exception):
    """Bad input from the user: reported with exit code 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse exits 2 too; keep one message format
        self.print_usage(sys.stderr)
        print(f"paperflows: error: {message}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="paperflows", description="ICLR 2025 methods as Prefect + DVC + MLflow pipelines")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    sub.add_parser("list", help="list the registered pipelines")
    run = sub.add_parser("run", help="run pipelines through Prefect (embedded server), tracked in MLflow")
    run.add_argument("target", help="a pipeline slug, several joined by commas, or 'all'")
    run.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a parameter (dotted key, YAML value); with 'all', prefix the slug: knots.lora.r=8",
    )
    run.add_argument("--no-progress", action="store_true", help="hide progress bars")
    run.add_argument("--force", action="store_true", help="run even when DVC says the outputs are up to date")
    run.add_argument(
        "-j",
        "--jobs",
        type=int,
        default=2,
        metavar="N",
        help="pipelines run at once when several are asked for (default 2: both cores; results are "
        "the same as one at a time)",
    )
    run.add_argument(
        "--show",
        action="store_true",
        help="print the parameters each run would get (YAML), what scale=paper changes, and the "
        "folder it would write to; run nothing",
    )
    run.add_argument("--only", default=None, help=argparse.SUPPRESS)  # the supervisor tells its child
    run.add_argument("--sweep-point", default=None, help=argparse.SUPPRESS)  # a sweep's point, for its child
    par = sub.add_parser(
        "params", help="every parameter of a pipeline: type, range, params.yaml default, paper value, description"
    )
    par.add_argument("slug")
    par.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="show the values with this override (as `run --set`)",
    )
    par.add_argument("--json", action="store_true", help="print a JSON list of objects instead of a table")
    stage = sub.add_parser("stage", help="run one stage at the params.yaml values (used by dvc.yaml)")
    stage.add_argument("slug")
    stage.add_argument("stage")
    dvc = sub.add_parser("dvc-yaml", help="regenerate dvc.yaml from the stage declarations")
    dvc.add_argument("--check", action="store_true", help="exit 1 if dvc.yaml differs from the declarations")
    rep = sub.add_parser("report", help="one table over all pipelines: the claim, holds or not, the numbers")
    shown = rep.add_mutually_exclusive_group()
    shown.add_argument("--json", action="store_true", help="print JSON instead of a table")
    shown.add_argument(
        "--html",
        nargs="?",
        const="",
        default=None,
        metavar="PATH",
        help="write one self-contained HTML page (tables, claims, figures, pipeline graphs) to "
        "PATH (default: outputs/report.html)",
    )
    shown.add_argument(
        "--markdown",
        nargs="?",
        const="",
        default=None,
        metavar="PATH",
        help="write the results record (per paper and scale: headline verdict, effect [CI], n, wall "
        "time, commit, params digest) from the run folders to PATH (default: RESULTS.md)",
    )
    gra = sub.add_parser(
        "graph", help="a pipeline's stages with their inputs, outputs and parameter groups, drawn from dvc.yaml"
    )
    gra.add_argument("slug")
    view = gra.add_mutually_exclusive_group()
    view.add_argument("--mermaid", action="store_true", help="print Mermaid flowchart source")
    view.add_argument("--svg", default=None, metavar="PATH", help="write the graph as an SVG file")
    srv = sub.add_parser(
        "serve",
        help="serve one Prefect deployment per pipeline on the server at "
        "PREFECT_API_URL (runs from the UI or API execute here; SIGTERM stops)",
    )
    srv.add_argument("slugs", nargs="*", metavar="slug", help="pipelines to serve (default: all)")
    srv.add_argument("--limit", type=int, default=None, help="most flow runs executed at once")
    dep = sub.add_parser(
        "deploy",
        help="create the prefect.yaml deployments (and work pool) on the server "
        "at PREFECT_API_URL, or regenerate / check prefect.yaml",
    )
    mode = dep.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help="regenerate prefect.yaml from the registry")
    mode.add_argument("--check", action="store_true", help="exit 1 if prefect.yaml differs from the registry")
    dep.add_argument(
        "--pool", default=None, help="work pool name (default: $PAPERFLOWS_WORK_POOL or paperflows-process)"
    )
    new = sub.add_parser(
        "new",
        help="scaffold a new paper: its package, tests, params section and README row; "
        "regenerates dvc.yaml and prefect.yaml",
    )
    new.add_argument("slug", help="the one name of the paper everywhere (lower case, e.g. my_paper)")
    new.add_argument("--title", required=True, help="the paper's title")
    new.add_argument("--arxiv", required=True, help="its arXiv id, e.g. 2410.19735")
    new.add_argument("--claim", required=True, help="the claim the pipeline must show, in one line")
    ui = sub.add_parser(
        "ui",
        help="start the MLflow UI and the Prefect UI of this project on loopback, print their URLs; Ctrl-C stops both",
    )
    ui.add_argument("--mlflow-port", type=int, default=None, metavar="N", help="MLflow UI port (default 5000)")
    ui.add_argument("--prefect-port", type=int, default=None, metavar="N", help="Prefect UI port (default 4200)")
    comp = sub.add_parser("completion", help="print a shell completion script: source <(paperflows completion bash)")
    comp.add_argument("shell", choices=["bash", "zsh"])
    return parser


# --------------------------------------------------------------------------------------------------
def cmd_list(_: argparse.Namespace) -> int:
    """Reads the papers' cards and the generated dvc.yaml only: no paper code, no torch."""
    from paperflows import registry
    from paperflows.dvcgen import stages_by_slug
    from paperflows.settings import load_settings

    stages = stages_by_slug(load_settings().dvc_file)
    broken = 0
    for slug in registry.slugs():
        try:
            paper = registry.paper(slug)
        except registry.PipelineImportError as err:
            broken += 1
            print(f"{slug:<14} BROKEN: {err.detail}")
            continue
        print(f"{slug:<14} {paper.title} ({paper.reference})")
        print(f"{'':<14} stages: {' -> '.join(stages.get(slug, [])) or '(not in dvc.yaml: run paperflows dvc-yaml)'}")
    return EXIT_FAILED if broken else EXIT_OK


#: keys that `--set` gives every pipeline of a run over several pipelines without a slug prefix
SHARED_KEYS = ("scale",)


def _resolve_run_params(target: str, overrides: list[str]) -> dict[str, Any]:
    """Validate every requested pipeline's parameters and data files before anything runs."""
    from paperflows import registry
    from paperflows.params import check_data_files, check_sections, load_section, parse_override
    from paperflows.settings import load_settings

    settings = load_settings()
    check_sections(settings.params_file, registry.slugs())
    models: dict[str, Any] = {}
    several = target == "all" or "," in target
    if target == "all":
        for slug in registry.slugs():
            try:
                models[slug] = registry.params_model(slug)
            except registry.PipelineImportError as err:  # one broken paper does not stop the others
                print(f"paperflows: skipping {err}", file=sys.stderr)
    else:
        for slug in dict.fromkeys(target.split(",")):
            models[slug] = registry.params_model(slug)  # UnknownPipelineError / PipelineImportError
    slugs = list(models)
    parsed = [parse_override(o) for o in overrides]
    per_slug: dict[str, list[tuple[str, Any]]] = {s: [] for s in slugs}
    for key, value in parsed:
        if several and key in SHARED_KEYS:  # `run all --set scale=evidence`: every pipeline
            for slug in slugs:
                per_slug[slug].append((key, value))
        elif several:
            head, _, rest = key.partition(".")
            if head not in per_slug or not rest:
                raise UsageError(
                    f"--set {key}: with several pipelines, keys start with a pipeline slug "
                    f"({', '.join(slugs)}), e.g. {slugs[0]}.seeds=[0], or are one of "
                    f"{', '.join(SHARED_KEYS)}"
                )
            per_slug[head].append((rest, value))
        else:
            per_slug[target].append((key, value))
    if target == "all" and ("scale", "evidence") in parsed:
        lacking = [s for s in slugs if not models[s].EVIDENCE_SCALE]
        for slug in lacking:
            print(f"paperflows: skipping {slug}: no evidence preset yet", file=sys.stderr)
        slugs = [s for s in slugs if s not in lacking]
        per_slug = {s: per_slug[s] for s in slugs}
    resolved = {s: load_section(models[s], s, settings.params_file, per_slug[s]) for s in slugs}
    for slug, params in resolved.items():  # data files named by the params: read before any work
        check_data_files(params, settings.root, slug)
    return resolved


def cmd_run(args: argparse.Namespace) -> int:
    from paperflows.launcher import CHILD_ENV, STARTED_ENV

    os.environ.setdefault(STARTED_ENV, repr(time.time()))  # when the command began (the child inherits it)
    if args.sweep_point is not None:  # this child runs one point of a sweep: its runs say so
        from paperflows.sweep import SWEEP_ENV

        os.environ[SWEEP_ENV] = args.sweep_point
    elif os.environ.get(CHILD_ENV) != "1":
        from paperflows.sweep import plan

        sweep = plan(args.overrides)
        if sweep is not None:
            return _run_sweep(sweep, args)
    resolved = _resolve_run_params(args.target, args.overrides)
    if args.only is not None:
        resolved = {s: p for s, p in resolved.items() if s in args.only.split(",")}
    if args.show:  # nothing started, nothing written
        from paperflows.paramdoc import show_run
        from paperflows.settings import load_settings

        print(show_run(resolved, load_settings(), force=args.force), end="")
        return EXIT_OK
    if os.environ.get(CHILD_ENV) == "1":
        from paperflows import lifeline

        watchdog = lifeline.watch(1, "the `paperflows run` that started this run")
        try:
            return _run_flows(resolved, args)
        finally:
            if watchdog is not None:
                watchdog.terminate()
    from paperflows.settings import load_settings

    settings = load_settings()
    if args.jobs < 1:
        raise UsageError(f"--jobs {args.jobs}: must be at least 1")
    from paperflows.launcher import LocalPrefectServer

    server = LocalPrefectServer.launch_early(settings)  # it boots while DVC looks for stale stages
    try:
        return _supervise(resolved, args, settings, server)
    finally:
        if server is not None:  # not needed (nothing stale, a refusal), or already stopped by the supervisor
            server.stop()


def _supervise(resolved: dict[str, Any], args: argparse.Namespace, settings: Any, server: Any) -> int:
    """The stale pipelines of ``resolved``, each in a child process on one local Prefect server (``server``,
    launched already, or one started here)."""
    from paperflows.dvcgen import stages_by_slug
    from paperflows.launcher import FRESH_ENV, fresh_stages, run_supervised

    slugs = list(resolved)
    fresh: dict[str, set[str]] = {}
    if not args.force and not args.overrides:
        # one `dvc status` for every stage: a fresh paper is skipped, a partly fresh one runs its stale stages
        declared = {s: names for s, names in stages_by_slug(settings.dvc_file, dvc_names=True).items() if s in resolved}
        fresh = fresh_stages(settings, declared)
        for slug in slugs:
            names = declared.get(slug, [])
            if names and fresh.get(slug) == set(names):
                print(
                    f"== {slug}: up to date at the params.yaml values ({settings.workspace(slug)}); "
                    f"skipped (--force reruns)",
                    flush=True,
                )
            elif fresh.get(slug):
                stale = [n for n in names if n not in fresh[slug]]
                print(
                    f"== {slug}: {len(stale)} of {len(names)} stages to run ({', '.join(stale)}); the others are "
                    f"up to date in dvc.lock",
                    flush=True,
                )
        slugs = [s for s in slugs if not (declared.get(s) and fresh.get(s) == set(declared[s]))]
    if not slugs:
        return EXIT_OK
    extra = [*(f"--set={o}" for o in args.overrides), *(["--no-progress"] if args.no_progress else [])]
    if args.jobs == 1 or len(slugs) == 1:
        jobs = [["run", args.target, "--only", ",".join(slugs), *extra]]
    else:  # one child per pipeline, args.jobs at a time, on one local Prefect server
        jobs = [
            ["run", s, "--only", s, *extra]
            if "," not in args.target and args.target != "all"
            else ["run", args.target, "--only", s, *extra]
            for s in slugs
        ]
    from paperflows.locks import hold_output_locks
    from paperflows.params import at_file_values

    # runs at the params.yaml values write the shared DVC workspace: its lock is taken here, before anything
    # starts, and held for the children (a run with edited values writes a new folder of its own)
    workspaces = [settings.workspace(s) for s in slugs if at_file_values(resolved[s], s, settings.params_file)]
    partial = {s: sorted(fresh[s]) for s in slugs if fresh.get(s)}
    with hold_output_locks(settings, workspaces) as held:
        env = {**held, **({FRESH_ENV: json.dumps(partial)} if partial else {})}
        return run_supervised(jobs, settings, parallel=args.jobs, extra_env=env, server=server)


def _run_sweep(sweep: Any, args: argparse.Namespace) -> int:
    """Every point of a grid as a run of its own, ``-j N`` at a time, then one comparison table."""
    from paperflows.launcher import run_supervised
    from paperflows.locks import hold_output_locks
    from paperflows.params import ParamsError, at_file_values
    from paperflows.settings import load_settings
    from paperflows.sweep import point_env, point_label, point_overrides, write_comparison

    if args.target == "all" or "," in args.target:
        raise UsageError("a sweep runs one pipeline: name one slug (e.g. paperflows run knots --set lora.r=4,8)")
    if args.show or args.only is not None:
        raise UsageError("--show and a sweep: show one point with --set key=value instead")
    settings = load_settings()
    workspaces = []
    for index in range(len(sweep.points)):  # every point validated (params and data files) before anything starts
        try:
            resolved = _resolve_run_params(args.target, point_overrides(sweep, index))
        except ParamsError as err:
            raise ParamsError(f"sweep point {index + 1} ({point_label(sweep.points[index])}): {err}") from None
        if at_file_values(resolved[args.target], args.target, settings.params_file):
            workspaces.append(settings.workspace(args.target))
    if args.jobs < 1:
        raise UsageError(f"--jobs {args.jobs}: must be at least 1")
    print(
        f"== {args.target}: sweep {sweep.id}: {len(sweep.points)} points over {', '.join(sweep.keys)}, "
        f"{min(args.jobs, len(sweep.points))} at a time",
        flush=True,
    )
    jobs = [
        [
            "run",
            args.target,
            "--only",
            args.target,
            *(f"--set={o}" for o in point_overrides(sweep, i)),
            "--no-progress",
            "--sweep-point",
            point_env(sweep, i),
        ]
        for i in range(len(sweep.points))
    ]
    with hold_output_locks(settings, sorted(set(workspaces))) as held:
        code = run_supervised(jobs, settings, parallel=args.jobs, extra_env=held)
    table, folder = write_comparison(sweep, settings.runs(args.target))
    print(f"\n== {args.target}: sweep {sweep.id}\n\n{table}\n\n(table, CSV and plot in {folder})", flush=True)
    return code


def _run_flows(resolved: dict[str, Any], args: argparse.Namespace) -> int:
    """The child's work: each pipeline through its Prefect flow, one after the other."""
    from paperflows.settings import pin_environment

    settings = pin_environment()
    if args.no_progress:
        os.environ["PAPERFLOWS_PROGRESS"] = "0"
    from paperflows import flows
    from paperflows.errors import RunLockedError
    from paperflows.launcher import API_PENDING_ENV, wait_for_api
    from paperflows.tracking import reap_orphan_runs

    flows.make_task_runner(settings)  # a task runner the settings cannot have is refused before anything is written
    ended = reap_orphan_runs(settings)  # runs of processes killed outright (SIGKILL) never stay RUNNING
    if ended:
        print(f"paperflows: {len(ended)} MLflow run(s) of a killed process were still RUNNING; ended as KILLED")
    if os.environ.pop(API_PENDING_ENV, None):  # the supervisor's server boots while this process imports
        from paperflows.launcher import open_tracking_store

        open_tracking_store(settings)  # MLflow's import and store, meanwhile: the first stage starts that much sooner
        wait_for_api(os.environ["PREFECT_API_URL"])
    flows.prepare_prefect_database()  # several first runs at once: one creates the database, the others wait
    crashed = flows.reap_orphan_prefect_runs()
    if crashed:
        print(f"paperflows: {crashed} Prefect flow run(s) of a killed process were still RUNNING; ended as Crashed")

    failures, locked = [], []
    for slug, params in resolved.items():
        started = time.perf_counter()
        print(f"== {slug}: running through Prefect ==", flush=True)
        try:
            result = flows.flow_for(slug)(params=params)
        except RunLockedError as err:  # a deployment run or `paperflows stage` took the workspace first
            locked.append(slug)
            print(f"paperflows: error: {err}", file=sys.stderr)
            continue
        except Exception as err:  # one failed paper does not stop the others
            failures.append(slug)
            print(f"== {slug}: FAILED after {time.perf_counter() - started:.1f}s: {err}", file=sys.stderr)
            continue
        print(f"== {slug}: done in {result['seconds']:.1f}s -> {result['root']} ({result['dvc']})")
        for claim in result["claims"]:
            print(f"   [{claim['verdict']}] {claim['id']}: {claim['evidence']}")
    if failures:
        print(f"failed: {', '.join(failures)}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_LOCKED if locked else EXIT_OK


def cmd_stage(args: argparse.Namespace) -> int:
    from paperflows import registry
    from paperflows.dvcgen import missing_input, stages_by_slug
    from paperflows.params import check_data_files, check_sections, load_section
    from paperflows.settings import load_settings, pin_environment

    # what can be refused without the stages' libraries (torch) is refused first, from the generated dvc.yaml
    settings = load_settings()
    model = registry.params_model(args.slug)
    listed = stages_by_slug(settings.dvc_file).get(args.slug, [])
    if listed and args.stage not in listed:
        raise UsageError(f"pipeline '{args.slug}' has no stage '{args.stage}'; stages: {', '.join(listed)}")
    check_sections(settings.params_file, registry.slugs())
    params = load_section(model, args.slug, settings.params_file)
    too_early = missing_input(settings.dvc_file, settings.root, args.slug, args.stage)
    if too_early is not None:
        raise too_early
    pipeline = registry.get(args.slug)
    names = [s.name for s in pipeline.stages]
    if args.stage not in names:
        raise UsageError(f"pipeline '{args.slug}' has no stage '{args.stage}'; stages: {', '.join(names)}")
    stage = pipeline.stage(args.stage)
    check_data_files(params, settings.root, pipeline.slug, groups=stage.params)
    from paperflows.contract import StageContext
    from paperflows.engine import check_inputs, output_lock, run_stage, terminate_as_exception

    root = settings.workspace(pipeline.slug)
    check_inputs(pipeline, stage, root)
    pin_environment(settings, prefect=False)
    from paperflows import spool
    from paperflows.tracking import run_tags

    # the run is recorded and written to MLflow by the pipeline's last stage (or now, if this one fails):
    # a stage process then never pays for importing MLflow
    tracker = spool.SpoolTracker(settings, pipeline.slug)
    ctx = StageContext(
        pipeline=pipeline,
        stage=stage,
        params=params,
        root=root,
        tracker=tracker,
        threads=settings.torch_threads,
        project=settings.root,
        cache_dir=settings.cache_dir,
        progress=os.environ.get("PAPERFLOWS_PROGRESS", "1") != "0",
    )
    from paperflows import lifeline

    # `dvc repro` runs this as `sh -c ...`: when DVC is killed, the stage stops instead of writing on
    watchdog = lifeline.watch(2, "the process that started this stage")
    try:
        with output_lock(settings, root), terminate_as_exception():
            result = run_stage(
                ctx,
                None,
                run_tags(
                    settings,
                    "dvc",
                    source=f"dvc.yaml:{pipeline.dvc_name(stage)}",
                    **{"dvc.exp_name": os.environ.get("DVC_EXP_NAME", "")},
                ),
            )
    except BaseException:
        spool.replay(settings, pipeline.slug, pipeline, params)
        raise
    finally:
        if watchdog is not None:
            watchdog.terminate()
    if stage is pipeline.stages[-1]:
        written = spool.replay(settings, pipeline.slug, pipeline, params)
        print(f"{pipeline.dvc_name(stage)}: {written} stage run(s) written to MLflow")
    print(f"{pipeline.dvc_name(stage)}: done in {result['seconds']:.1f}s")
    return EXIT_OK


def cmd_dvc_yaml(args: argparse.Namespace) -> int:
    from paperflows import dvcgen, registry
    from paperflows.settings import load_settings

    settings = load_settings()
    pipelines = registry.all_pipelines()
    wanted = {settings.dvc_file: dvcgen.render(pipelines)}
    if settings.params_file.is_file():  # every declared key in params.yaml, so DVC finds each stage's params
        wanted[settings.params_file] = dvcgen.completed_params_yaml(settings.params_file.read_text(), pipelines)
    drifted = [path for path, text in wanted.items() if (path.read_text() if path.is_file() else "") != text]
    if args.check:
        for path in drifted:
            print(f"{path} differs from the stage declarations; run `paperflows dvc-yaml`", file=sys.stderr)
        if drifted:
            return EXIT_FAILED
        print(f"{settings.dvc_file} and {settings.params_file.name} match the stage declarations")
        return EXIT_OK
    from components.io import save_text

    for path in drifted:
        save_text(wanted[path], path)
        print(f"wrote {path}")
    if not drifted:
        print(f"{settings.dvc_file} and {settings.params_file.name} already match the stage declarations")
    return EXIT_OK


def cmd_report(args: argparse.Namespace) -> int:
    """Reads the report files only: no paper code, no torch."""
    from paperflows import registry
    from paperflows.report import markdown_table
    from paperflows.results import CLAIM_COLUMNS, HEADLINE_COLUMNS, claims_table, headline_table, latest_report
    from paperflows.settings import load_settings

    settings = load_settings()
    if args.html is not None:
        from pathlib import Path

        from paperflows import htmlpage

        print(f"wrote {htmlpage.write(settings, Path(args.html) if args.html else None)}")
        return EXIT_OK
    if args.markdown is not None:
        from pathlib import Path

        from components.io import save_text
        from paperflows.results import RESULTS_FILE, read_record, results_markdown

        target = Path(args.markdown) if args.markdown else settings.root / RESULTS_FILE
        text = results_markdown(settings, registry.slugs(), read_record(target))
        print(f"wrote {save_text(text, target)}")
        return EXIT_OK
    found = {slug: latest_report(settings, slug) for slug in registry.slugs()}
    heads = headline_table(found, settings)
    rows = claims_table(found, settings.root)
    if args.json:
        print(json.dumps({"headline": heads, "claims": rows}, indent=2))
        return EXIT_OK
    table = markdown_table  # a file or a pipe gets Markdown; a terminal a table fitted to its width
    title = str
    if sys.stdout.isatty():
        import shutil
        import textwrap

        from paperflows.report import fmt
        from paperflows.termtable import text_table

        table = lambda columns, rows: text_table(columns, rows, show=fmt)  # noqa: E731
        title = lambda text: textwrap.fill(text, shutil.get_terminal_size().columns)  # noqa: E731
    print(title("Headline claims (one or two per paper: the paper's main empirical contribution)") + "\n")
    print(table(HEADLINE_COLUMNS, heads))
    print("\n" + title("All claims and checks (Holm: the verdict adjusted over each paper's secondary claims)") + "\n")
    print(table(CLAIM_COLUMNS, rows))
    return EXIT_OK


def cmd_graph(args: argparse.Namespace) -> int:
    """Reads the generated dvc.yaml only: no paper code, no torch."""
    from paperflows import graph, registry
    from paperflows.settings import load_settings

    registry.default().check(args.slug)  # UnknownPipelineError names the known slugs
    settings = load_settings()
    drawn = graph.from_dvc(settings.dvc_file, args.slug)
    if drawn is None:
        raise UsageError(f"pipeline '{args.slug}' has no stages in {settings.dvc_file}; run `paperflows dvc-yaml`")
    if args.svg:
        from components.io import save_text

        print(f"wrote {save_text(graph.to_svg(drawn), args.svg)}")
    else:
        print(graph.to_mermaid(drawn) if args.mermaid else graph.to_text(drawn), end="")
    return EXIT_OK


def cmd_serve(args: argparse.Namespace) -> int:
    from paperflows import deploy, registry

    api_url = deploy.require_api_url()  # before anything is imported, started or written
    for slug in args.slugs:
        registry.get(slug)
    if args.limit is not None and args.limit < 1:
        raise UsageError(f"--limit {args.limit}: must be at least 1")
    deploy.check_server(api_url)
    from paperflows.settings import pin_environment

    pin_environment()
    deploy.serve(args.slugs, limit=args.limit)
    print("paperflows serve: stopped", flush=True)
    return EXIT_OK


def cmd_deploy(args: argparse.Namespace) -> int:
    from paperflows import deploy
    from paperflows.settings import load_settings

    root = load_settings().root
    if args.write:
        print(f"wrote {deploy.write_prefect_yaml(root)}")
        return EXIT_OK
    if args.check:
        problem = deploy.check_prefect_yaml(root)
        if problem:
            print(problem, file=sys.stderr)
            return EXIT_FAILED
        print(f"{root / deploy.PREFECT_FILE} matches the registered pipelines")
        return EXIT_OK
    deploy.check_server(deploy.require_api_url())
    from paperflows.settings import pin_environment

    pin_environment()
    pool = args.pool or deploy.work_pool_name()
    try:
        ids = deploy.deploy(root, pool)
    except deploy.DeployFailed as err:
        print(f"paperflows: {err}", file=sys.stderr)
        return EXIT_FAILED
    print(
        f"created {len(ids)} deployment(s) for work pool '{pool}' on {os.environ['PREFECT_API_URL']}; "
        f"start a worker: prefect worker start --pool {pool}"
    )
    return EXIT_OK


def cmd_new(args: argparse.Namespace) -> int:
    from paperflows import deploy, dvcgen, registry
    from paperflows.scaffold import ScaffoldError, scaffold
    from paperflows.settings import load_settings

    root = load_settings().root
    try:
        written = scaffold(root, args.slug, args.title, args.arxiv, args.claim)
    except ScaffoldError as err:
        raise UsageError(str(err)) from None
    from components.io import save_text

    save_text(dvcgen.render(registry.all_pipelines()), root / "dvc.yaml")
    deploy.write_prefect_yaml(root)
    for path in written:
        print(f"wrote {path.relative_to(root)}")
    print(f"regenerated dvc.yaml and prefect.yaml; next: pipelines/README.md (run `paperflows run {args.slug}`)")
    return EXIT_OK


def cmd_params(args: argparse.Namespace) -> int:
    """Reads the paper's params module and params.yaml only: no stage code, no torch."""
    from paperflows.paramdoc import params_text
    from paperflows.settings import load_settings

    print(params_text(args.slug, args.overrides, load_settings(), as_json=args.json), end="")
    return EXIT_OK


def cmd_ui(args: argparse.Namespace) -> int:
    from paperflows.settings import load_settings
    from paperflows.uiserve import UiError, run

    for option, port in (("--mlflow-port", args.mlflow_port), ("--prefect-port", args.prefect_port)):
        if port is not None and not 1 <= port <= 65535:
            raise UsageError(f"{option} {port}: not a port (1 to 65535)")
    try:
        return run(load_settings(), args.mlflow_port, args.prefect_port, out=lambda line: print(line, flush=True))
    except UiError as err:
        raise UsageError(str(err)) from None


def cmd_completion(args: argparse.Namespace) -> int:
    from paperflows.completion import script

    print(script(args.shell), end="")
    return EXIT_OK


COMMANDS = {
    "list": cmd_list,
    "run": cmd_run,
    "stage": cmd_stage,
    "dvc-yaml": cmd_dvc_yaml,
    "report": cmd_report,
    "graph": cmd_graph,
    "serve": cmd_serve,
    "deploy": cmd_deploy,
    "new": cmd_new,
    "params": cmd_params,
    "ui": cmd_ui,
    "completion": cmd_completion,
}


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["_complete"]:  # the completion script's query: CWORD WORD... -> one candidate a line
        from paperflows.completion import complete_command

        return complete_command(argv[1:], build_parser())
    args = build_parser().parse_args(argv)
    # the error types live in light modules: `--help`, `list` and `report` never import a paper or torch
    from paperflows.deploy import DeployError
    from paperflows.errors import RunLockedError, RunTerminated, StageInputError
    from paperflows.params import ParamsError
    from paperflows.registry import PipelineImportError, UnknownPipelineError
    from paperflows.settings import SettingsError

    try:
        return COMMANDS[args.command](args)
    except (UsageError, ParamsError, SettingsError, UnknownPipelineError, StageInputError, DeployError) as err:
        print(f"paperflows: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    except RunLockedError as err:
        print(f"paperflows: error: {err}", file=sys.stderr)
        return EXIT_LOCKED
    except PipelineImportError as err:
        print(f"paperflows: error: {err}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        print("paperflows: interrupted", file=sys.stderr)
        return 130
    except RunTerminated:
        print("paperflows: stopped by SIGTERM", file=sys.stderr)
        return 143
    except BrokenPipeError:
        # the reader went away (`paperflows list | head`): stop quietly, as a Unix tool killed by SIGPIPE
        # does; what is still buffered goes nowhere instead of failing again at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE


if __name__ == "__main__":
    sys.exit(main())
