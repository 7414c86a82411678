"""BC-PMI's table, claims and checks, as pure functions of loaded tables.

Inputs: ``rows``, one per (method, data size, seed) as the evaluate stage writes them: ``success`` and
``style_accuracy`` (fractions of rollouts), ``return`` (mean episode return; NaN in the gridworld), per-style
accuracies, and for the policies the PMI weights' mean inside the bifurcation zone, outside it, and their ratio
``zone_ratio``; the experts' own rollouts are rows with ``method = "expert"``, a uniform random policy's rows
with ``method = "random"`` (size 0). ``mine``: per ``n<size>/s<seed>`` the final DV estimate, the mean PMI where
every style acts alike, and (tabular gridworld only) the Pearson correlation of MINE's PMI with the exact count
PMI. ``data``: the demos stage's summary (its ``env`` names the environment).

Claims (at the smallest data size, the low-data regime; units are seeds, BC and BC-PMI paired by seed on the
same demonstrations, PMI estimate and initial weights):

* headline ``bc_pmi_style_accuracy_low_data``: BC-PMI − conditional BC style accuracy > 0;
* ``bc_pmi_equal_success_low_data``: equal success, an equivalence claim (the interval of BC-PMI − BC success
  inside ± the margin);
* ``bc_pmi_gt_<control>_low_data``: BC-PMI − a control's style accuracy > 0, for each control trained (BC with
  exact count-PMI weights, BC with the style zone up-weighted): whether MINE's PMI weighting does more than
  any weighting toward the zone.

Every claim reads the rollouts of ``evaluate.action`` (greedy by default); rows carry ``action`` ("greedy",
"sample", or "own" for the experts and the random policy), and the table shows both ways.

Gates: each arm beats the random policy (style accuracy, or success for the success claim) with its interval over
seeds; for the style claim, conditional BC also leaves headroom: its style accuracy lies below the ceiling minus
the smallest effect of interest, so that a gain that would matter is possible at all.

Checks: the PMI weights concentrate in the bifurcation zone (true by the environment's design: style information
exists only there); the DV estimate lies in ``(0, log K]``; MINE's PMI tracks the exact PMI (gridworld only);
MINE's PMI is ~0 (or ~ the exact count PMI) where every style acts alike; the experts show their styles (style
accuracy >= 0.9).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from components.io import load_json, load_table
from components.metrics.stats import Estimate, mean_ci
from paperflows import Claim  # the type a claim function returns (decided by paperflows.claims.decide)
from paperflows.claims import ClaimSpec, Gate, decide, equivalence, gate, superiority
from paperflows.contract import StageContext, stage
from paperflows.report import REPORT_TIMINGS, Check, Report, fmt
from paperflows.rows import by_unit, pm, rows_where, values
from pipelines.bc_pmi.params import LABELS, STYLES, BcPmiParams
from pipelines.bc_pmi.pipeline import DATA_METRICS, MINE_METRICS, REPORT, RESULTS

STYLE_GAIN = 0.05  # style accuracy: the smallest gain of interest (and the equal-success margin's default)
STYLE_SOURCE = (
    "the paper's tables were not retrieved (brief §c); 0.05 style accuracy (one rollout in 20 per "
    "style) is taken as the smallest gain worth reporting"
)
SUCCESS_SOURCE = (
    "report.success_margin = 0.05: the smallest style-accuracy gain of interest, so a success change "
    "as large as the style gain would offset it (the brief: 'at equal success rate', no margin given)"
)
CEILING = 1.0  # style accuracy of a policy that always shows its style
PMI_CORRELATION = 0.5  # MINE's PMI against the count PMI, every seed and size
SHARED_PMI = 0.1  # |mean PMI| on the path every style shares (exact value 0 up to noise)
DV_SLACK = 0.05  # a final DV estimate is a batch average: allow this much above log K
RANDOM_LABEL = "Random policy (uniform actions; the gates' reference)"
Rows = Sequence[Mapping[str, Any]]

STYLE_ACCURACY_LOW_DATA = ClaimSpec(
    "bc_pmi_style_accuracy_low_data",
    "BC-PMI > conditional BC on style accuracy at low data (the smallest size)",
    "style accuracy, BC-PMI − conditional BC, paired by seed",
    superiority(STYLE_GAIN, STYLE_SOURCE),
    headline=True,
)
HEADLINE = (STYLE_ACCURACY_LOW_DATA,)
CONTROLS = ("bc_count_pmi", "bc_zone")
CONTROL_CLAIMS = {
    control: ClaimSpec(
        f"bc_pmi_gt_{control.removeprefix('bc_')}_low_data",
        f"BC-PMI > {LABELS[control]} on style accuracy at low data: MINE's PMI weighting does more than the control",
        f"style accuracy, BC-PMI − {LABELS[control]}, paired by seed",
        superiority(STYLE_GAIN, STYLE_SOURCE),
    )
    for control in CONTROLS
}
EQUAL_SUCCESS_LOW_DATA = ClaimSpec(
    "bc_pmi_equal_success_low_data",
    "BC-PMI and conditional BC succeed equally often at low data",
    "success rate, BC-PMI − conditional BC, paired by seed",
    equivalence(STYLE_GAIN, SUCCESS_SOURCE),
)


def _series(rows: Rows, method: str, key: str, size: int) -> dict[Any, float]:
    return by_unit(rows, key, method=method, size=size)


def _per_size(rows: Rows, key: str) -> str:
    sizes = sorted({int(r["size"]) for r in rows if r["method"] == "bc_pmi"})
    parts = []
    for size in sizes:
        a, b = _series(rows, "bc_pmi", key, size), _series(rows, "bc", key, size)
        if a and b:
            parts.append(f"n={size}: BC-PMI {np.mean(list(a.values())):.3f} vs BC {np.mean(list(b.values())):.3f}")
    return "; ".join(parts)


def beats_random(rows: Rows, method: str, key: str, size: int) -> Gate:
    """``method`` beats the uniform random policy on ``key``, paired by seed (same environment, same styles)."""
    arm, reference = _series(rows, method, key, size), _series(rows, "random", key, 0)
    estimate = Estimate.paired(arm, reference) if arm and reference else None
    return gate(LABELS[method], "the random policy", estimate, statistic=f"{key.replace('_', ' ')} − random policy's")


def headroom(bc: Mapping[Any, float]) -> Gate:
    """Conditional BC's style accuracy lies below the ceiling minus the smallest gain, with its interval."""
    line = CEILING - STYLE_GAIN
    return gate(
        LABELS["bc"],
        f"the ceiling minus the smallest gain (style accuracy {line:g})",
        Estimate.of(bc),
        statistic="style accuracy",
        margin=line,
        direction="less",
    )


def style_accuracy_claim(rows: Rows, size: int) -> Claim:
    """BC-PMI > conditional BC on style accuracy at ``size`` episodes per style (paired by seed)."""
    spec = STYLE_ACCURACY_LOW_DATA
    a, b = _series(rows, "bc_pmi", "style_accuracy", size), _series(rows, "bc", "style_accuracy", size)
    if not a or not b:
        return decide(spec, None, missing=f"BC and BC-PMI both evaluated at {size} episodes per style (train.methods)")
    gates = [
        beats_random(rows, "bc", "style_accuracy", size),
        beats_random(rows, "bc_pmi", "style_accuracy", size),
        headroom(b),
    ]
    return decide(
        spec,
        Estimate.paired(a, b),
        gates=gates,
        evidence=f"per size: {_per_size(rows, 'style_accuracy')}",
        numbers={
            "bc_pmi": float(np.mean(list(a.values()))),
            "bc": float(np.mean(list(b.values()))),
            "wins": float(sum(a[k] > b[k] for k in a if k in b)),
        },
    )


def control_claim(rows: Rows, size: int, control: str) -> Claim:
    """BC-PMI > ``control`` on style accuracy at ``size`` episodes per style (paired by seed); both arms gated on
    the random policy."""
    spec = CONTROL_CLAIMS[control]
    a, b = _series(rows, "bc_pmi", "style_accuracy", size), _series(rows, control, "style_accuracy", size)
    if not a or not b:
        return decide(spec, None, missing=f"BC-PMI and {control} both evaluated at {size} episodes per style")
    gates = [beats_random(rows, control, "style_accuracy", size), beats_random(rows, "bc_pmi", "style_accuracy", size)]
    return decide(
        spec,
        Estimate.paired(a, b),
        gates=gates,
        numbers={"bc_pmi": float(np.mean(list(a.values()))), control: float(np.mean(list(b.values())))},
    )


def equal_success_claim(rows: Rows, size: int, margin: float = STYLE_GAIN) -> Claim:
    """BC-PMI and conditional BC reach the same success rate within ``margin`` (equivalence, paired by seed);
    ``margin`` is ``report.success_margin`` (its default is the declared spec's)."""
    spec = (
        EQUAL_SUCCESS_LOW_DATA
        if margin == STYLE_GAIN
        else replace(
            EQUAL_SUCCESS_LOW_DATA,
            rule=equivalence(
                margin,
                f"report.success_margin = {margin:g} in this run's params (default {STYLE_GAIN:g}: {SUCCESS_SOURCE})",
            ),
        )
    )
    a, b = _series(rows, "bc_pmi", "success", size), _series(rows, "bc", "success", size)
    if not a or not b:
        return decide(spec, None, missing=f"BC and BC-PMI both evaluated at {size} episodes per style (train.methods)")
    gates = [beats_random(rows, "bc", "success", size), beats_random(rows, "bc_pmi", "success", size)]
    return decide(
        spec,
        Estimate.paired(a, b),
        gates=gates,
        evidence=f"per size: {_per_size(rows, 'success')}",
        numbers={"bc_pmi": float(np.mean(list(a.values()))), "bc": float(np.mean(list(b.values())))},
    )


def _ratios(rows: Rows, size: int) -> list[float]:
    """The weights' zone ratio per seed at ``size`` (stored on every policy row of that size and seed)."""
    return values(
        rows_where(rows, method="bc_pmi", size=size) or rows_where(rows, method="bc", size=size), "zone_ratio"
    )


def concentration_check(rows: Rows, size: int) -> Check:
    """The PMI weights are larger inside the bifurcation zone than outside it (mean ratio over seeds > 1): true
    by the environment's design, where the style shows only inside the zone; it checks MINE, not the paper."""
    ratios = [r for r in _ratios(rows, size) if math.isfinite(r)]
    sizes = sorted({int(r["size"]) for r in rows if r["method"] not in ("expert", "random")})
    per_size = "; ".join(
        f"n={s}: {fmt(float(np.mean(_ratios(rows, s))) if _ratios(rows, s) else math.nan)}" for s in sizes
    )
    interval = mean_ci(ratios) if ratios else None
    mean = interval.estimate if interval else math.nan
    return Check(
        "weights_concentrate_in_zone",
        f"the PMI weights concentrate where the styles differ (mean exp(PMI) "
        f"weight inside the bifurcation zone / outside it > 1 at {size} episodes per style; by the "
        "environment's design)",
        bool(ratios) and mean > 1,
        f"ratio {fmt(mean)}"
        + (f" [{fmt(interval.low)}, {fmt(interval.high)}]" if interval else "")
        + f" over {len(ratios)} seed(s); per size: {per_size}",
        {"ratio": mean},
    )


def _finite(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


SHARED_PLACE = {
    "gridworld": "on the shared path outside the zone (centre column, moving up)",
    "reacher": "at the shared start (elbow still bending, shoulder held)",
}


def checks(
    rows: Rows, mine: Mapping[str, Mapping[str, float]], n_styles: int = 3, env: str = "gridworld"
) -> list[Check]:
    """MINE's estimate within its bounds (and close to the count PMI where there is one); the experts show
    their styles."""
    dvs = {k: v["dv"] for k, v in mine.items()}
    # a Pearson is undefined (NaN, saved as null) where the count PMI is constant: every style acts alike
    corr = {k: v["pearson_exact"] for k, v in mine.items() if _finite(v.get("pearson_exact"))}
    undefined = [k for k, v in mine.items() if "pearson_exact" in v and not _finite(v["pearson_exact"])]
    # where every style acts alike the PMI is 0 given enough data; with a few episodes per style a random start
    # cell can name its episode's style, so the exact count PMI there (gridworld) is the reference, else 0
    shared = {
        k: v["shared_pmi"] - (v["shared_pmi_exact"] if _finite(v.get("shared_pmi_exact")) else 0.0)
        for k, v in mine.items()
        if math.isfinite(v.get("shared_pmi", math.nan))
    }
    bound = math.log(n_styles)
    experts = values(rows_where(rows, method="expert"), "style_accuracy")
    out = [
        Check(
            "dv_estimate_in_bounds",
            f"MINE's final DV estimate lies in (0, log {n_styles} = {bound:.3f}] "
            f"(+{DV_SLACK} batch noise): a lower bound on I(s, a; z) <= H(z)",
            bool(dvs) and all(0 < v <= bound + DV_SLACK for v in dvs.values()),
            ", ".join(f"{k} {v:.3f}" for k, v in dvs.items()),
            {"min_dv": min(dvs.values(), default=math.nan)},
        )
    ]
    if corr or env == "gridworld":
        out.append(
            Check(
                "mine_pmi_tracks_exact_pmi",
                f"MINE's PMI correlates with the exact count PMI (Pearson > {PMI_CORRELATION}) at every seed and size",
                bool(corr) and all(v > PMI_CORRELATION for v in corr.values()),
                ", ".join(f"{k} {v:.2f}" for k, v in corr.items())
                + (
                    f"; undefined at {', '.join(undefined)} (the count PMI is constant there: the styles "
                    "act alike in the data, so there is nothing to track)"
                    if undefined
                    else ""
                ),
                {"min_pearson": min(corr.values(), default=math.nan)},
            )
        )
    out += [
        Check(
            "pmi_zero_where_styles_agree",
            f"{SHARED_PLACE.get(env, 'where every style acts alike')}, where every "
            f"style acts alike, MINE's mean PMI is ~0, or where there is one ~ the exact count PMI's mean there "
            f"(|difference| < {SHARED_PMI})",
            bool(shared) and all(abs(v) < SHARED_PMI for v in shared.values()),
            "MINE's mean minus the reference: " + ", ".join(f"{k} {v:+.3f}" for k, v in shared.items()),
            {"max_abs_shared_pmi_error": max((abs(v) for v in shared.values()), default=math.nan)},
        ),
        Check(
            "experts_show_their_styles",
            "the demonstrators' own rollouts show their style (style accuracy >= 0.9)",
            bool(experts) and min(experts) >= 0.9,
            f"expert style accuracy per seed: {', '.join(f'{x:.3f}' for x in experts)}",
        ),
    ]
    return out


def table(
    rows: Rows, sizes: Sequence[int], methods: Sequence[str], style_names: Sequence[str] = STYLES["gridworld"]
) -> tuple[list[str], list[dict[str, Any]]]:
    """The paper's comparison shape: per data size, each method's success, return (where the environment has a
    reward) and style accuracy (mean ± 95% half-width over seeds), per-style accuracy, the weights' zone ratio;
    the experts and the random policy first."""
    has_return = any(isinstance(r.get("return"), float) and math.isfinite(r["return"]) for r in rows)
    columns = [
        "episodes per style",
        "method",
        "actions",
        "success",
        *(["return"] if has_return else []),
        "style accuracy",
        *style_names,
        "weight zone / outside",
        "paper",
    ]
    out = []
    modes = list(dict.fromkeys(r.get("action", "own") for r in rows if r["method"] not in ("expert", "random")))
    cells = [(0, "expert", "own"), (0, "random", "own")] + [(s, m, a) for a in modes for s in sizes for m in methods]
    for size, method, mode in cells:
        mine = [r for r in rows_where(rows, method=method, size=size) if r.get("action", "own") in (mode, "own")]
        if not mine:
            continue
        row: dict[str, Any] = {
            "episodes per style": size or "–",
            "method": LABELS.get(method, RANDOM_LABEL),
            "actions": mode,
            "success": pm(values(mine, "success")),
        }
        if has_return:
            row["return"] = pm(values(mine, "return"), 1)
        row["style accuracy"] = pm(values(mine, "style_accuracy"))
        for z, name in enumerate(style_names):
            row[name] = pm(values(mine, f"style_accuracy_{z}"))
        row["weight zone / outside"] = pm(values(mine, "zone_ratio")) if method == "bc_pmi" else None
        row["paper"] = None
        out.append(row)
    return columns, out


NOTES = {
    "gridworld": (
        "Style accuracy: the rollout first reaches the zone's middle row (row 5) in its style's corridor "
        "(columns 0-3 left, 4-6 centre, 7-10 right).",
        "Policies: MLP(coords + one-hot z -> {hidden} -> 5 logits)",
        "Weight zone / outside: mean exp(PMI) weight (normalised over the training set) of tuples inside the "
        "zone (rows 3-7) over that of tuples outside it; the heat map shows it per cell (weight_map.png), "
        "weights_along.png along demonstrations.",
    ),
    "reacher": (
        "MuJoCo Reacher-v5 (gymnasium), target placed behind the arm; success: final fingertip-target distance "
        "< 0.02; return: the env's reward (-distance - |a|^2 per step) summed over 50 steps. Style accuracy: "
        "the rollout's net shoulder rotation has z's sign (>= pi/2 counter-clockwise, <= -pi/2 clockwise).",
        "Policies: Gaussian, mean MLP(scaled obs + one-hot z -> {hidden} -> 2 torques), learned state-"
        "independent log-std, trained by (weighted) NLL",
        "Weight zone / outside: mean exp(PMI) weight (normalised over the training set) of tuples in the style "
        "zone (sweeping with the elbow bent: where the experts' torques differ) over that of the others (the "
        "shared start and final approach). There is no exact PMI: (s, a) is continuous, so MINE is checked "
        "only against its bounds and against ~0 at the shared start; with few demonstrations each target "
        "position belongs to one episode, so T can read the style off the start state and the PMI there is "
        "positive (a finite-sample effect of the data, not of the styles). weight_map.png maps the weights "
        "over the fingertip plane, weights_along.png along demonstrations.",
    ),
}


def claim_rows(rows: Rows, mode: str) -> list[Mapping[str, Any]]:
    """The rows the claims read: the policies' rollouts of ``mode`` ("greedy" / "sample"), the experts and the
    random policy (rows without ``action`` count as ``mode``)."""
    return [r for r in rows if r.get("action", mode) in (mode, "own")]


def build_report(rows: Rows, mine: Mapping[str, Any], data: Mapping[str, Any], p: BcPmiParams) -> Report:
    """The table, the claims, the checks and the notes of one run."""
    env = data.get("env", "gridworld")
    style_note, policy_note, weight_note = NOTES[env]
    sizes, methods = list(data["sizes"]), list(p.train.methods)
    low, mode = min(sizes), p.evaluate.action
    columns, body = table(rows, sorted(set(sizes)), methods, STYLES[env])
    rows = claim_rows(rows, mode)
    claims = [
        style_accuracy_claim(rows, low),
        equal_success_claim(rows, low, p.report.success_margin),
        *(control_claim(rows, low, c) for c in CONTROLS if c in methods),
    ]
    notes = [
        f"Fractions of {p.evaluate.rollouts} rollouts per style (the claims read {mode} actions; the table shows "
        f"greedy and sampled rollouts from the same starts), horizon "
        f"{p.evaluate.horizon or 'the environment default'}), mean ± 95% half-width over seeds {list(p.seeds)}. "
        f"{style_note}",
        (
            "Starts: every episode (demonstration and rollout) at a uniformly drawn cell below the zone's middle "
            "row, zone rows included, so that a policy meets crossing states its style's demonstrations rarely "
            "visit. "
            if env == "gridworld" and p.data.random_starts
            else ""
        )
        + f"Demonstrations: {data['source']}, expert noise {data.get('noise', data.get('epsilon'))}; sizes {sizes} "
        f"episodes per style (nested subsets). {policy_note.format(hidden=p.train.hidden)}, {p.train.steps} Adam "
        f"steps; MINE T(s, a, z): MLP -> {p.mine.hidden} -> 1, {p.mine.steps} steps, EMA rate {p.mine.ema_rate}; "
        f"BC-PMI weights exp(PMI) normalised to mean 1 per batch, clipped at {p.train.max_weight:g}, alpha "
        f"{p.train.alpha:g}, never back-propagated.",
        "Paper column: empty. The brief could not retrieve the paper's tables, and its environments (games, MuJoCo "
        "control tasks with their own style definitions) are not these reductions; only the direction of its "
        "claims is compared.",
        weight_note,
    ]
    title = {"gridworld": "the corridor gridworld", "reacher": "MuJoCo Reacher-v5 (two sweep styles)"}[env]
    return Report(
        slug="bc_pmi",
        title=f"BC-PMI vs style-conditioned BC on {title}: success and style accuracy",
        columns=columns,
        rows=body,
        claims=claims,
        checks=[concentration_check(rows, low), *checks(rows, mine, len(STYLES[env]), env)],
        notes=notes,
    )


# --------------------------------------------------------------------------------------------------
# the table, the claims and the checks
# --------------------------------------------------------------------------------------------------
@stage(
    params=("seeds", "data.env", "data.random_starts", "mine", "train", "evaluate", "report"),
    deps=(RESULTS, MINE_METRICS, DATA_METRICS),
    outs=(REPORT,),
    timings=REPORT_TIMINGS,
)
def report(ctx: StageContext) -> None:
    """BC vs BC-PMI per data size, the claims and the MINE checks."""
    build_report(
        load_table(ctx.path(RESULTS)), load_json(ctx.path(MINE_METRICS)), load_json(ctx.path(DATA_METRICS)), ctx.params
    ).save(ctx.path(REPORT))
