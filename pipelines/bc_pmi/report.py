"""BC-PMI's table, claims and checks, as pure functions of loaded tables.

Inputs: ``rows``, one per (method, data size, seed) as the evaluate stage writes them: ``success`` and
``style_accuracy`` (fractions of rollouts), ``return`` (mean episode return; NaN in the gridworld), per-style
accuracies, and for the policies the PMI weights' mean
inside the bifurcation zone, outside it, and their ratio ``zone_ratio``; the experts' own rollouts are rows
with ``method = "expert"``. ``mine``: per ``n<size>/s<seed>`` the final DV estimate, the mean PMI where every
style acts alike, and (tabular gridworld only) the Pearson correlation of MINE's PMI with the exact count PMI.
``data``: the demos stage's summary (its ``env`` names the environment).

Claims (all at the smallest data size, the low-data regime; units are seeds, BC and BC-PMI paired on the
same demonstrations, PMI estimate and initial weights):

* ``bc_pmi_style_accuracy_low_data``: BC-PMI - conditional BC style accuracy > 0 (95% Student-t interval);
  precondition: conditional BC leaves headroom (mean style accuracy below ``HEADROOM``), since no method can
  beat a baseline at the ceiling;
* ``bc_pmi_equal_success_low_data``: equal success, an equivalence test: the interval of BC-PMI - BC success
  inside ``[-margin, margin]`` *holds*, wholly outside *does not hold*, else *not resolved*;
* ``weights_concentrate_in_zone``: mean PMI weight inside the zone / outside it > 1 (interval over seeds).

Checks: the DV estimate lies in ``(0, log K]`` (MI of K styles is at most their entropy); MINE's PMI tracks
the exact PMI (Pearson > ``PMI_CORRELATION``; gridworld only: the Reacher's continuous (s, a) has no count
PMI); MINE's PMI is ~0 where every style acts alike on shared states (the gridworld's shared path, the
Reacher's start before the sweep); the experts show their styles (style accuracy >= 0.9).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from components.metrics.stats import mean_ci, paired_ci
from paperflows.report import Check, Claim, Precondition, Report, decide, fmt_interval, pm, rows_where, values
from pipelines.bc_pmi.params import LABELS, STYLES, BcPmiParams

HEADROOM = 0.98           # conditional BC's mean style accuracy below which an improvement is measurable
PMI_CORRELATION = 0.5     # MINE's PMI against the count PMI, every seed and size
SHARED_PMI = 0.1          # |mean PMI| on the path every style shares (exact value 0 up to noise)
DV_SLACK = 0.05           # a final DV estimate is a batch average: allow this much above log K
Rows = Sequence[Mapping[str, Any]]


def _paired(rows: Rows, key: str, size: int) -> tuple[list[float], list[float]]:
    pmi, bc = rows_where(rows, method="bc_pmi", size=size), rows_where(rows, method="bc", size=size)
    seeds = sorted({r["seed"] for r in pmi} & {r["seed"] for r in bc})
    return (values([r for r in pmi if r["seed"] in seeds], key), values([r for r in bc if r["seed"] in seeds], key))


def _per_size(rows: Rows, key: str) -> str:
    sizes = sorted({int(r["size"]) for r in rows if r["method"] == "bc_pmi"})
    parts = []
    for size in sizes:
        a, b = _paired(rows, key, size)
        if a:
            parts.append(f"n={size}: BC-PMI {np.mean(a):.3f} vs BC {np.mean(b):.3f} ({np.mean(a) - np.mean(b):+.3f})")
    return "; ".join(parts)


def style_accuracy_claim(rows: Rows, size: int) -> Claim:
    """BC-PMI > conditional BC on style accuracy at ``size`` episodes per style (paired over seeds)."""
    claim_id, text = "bc_pmi_style_accuracy_low_data", (f"BC-PMI > conditional BC on style accuracy at low data "
                                                         f"({size} episodes per style)")
    statistic = "style accuracy, BC-PMI - conditional BC, paired over seeds"
    a, b = _paired(rows, "style_accuracy", size)
    if len(a) < 2:
        gate = Precondition(f"both methods ran on >= 2 common seeds ({len(a)})", False, float(len(a)))
        return decide(claim_id, text, statistic, mean_ci([0.0]), precondition=gate)
    gate = Precondition(f"conditional BC leaves headroom: its mean style accuracy ({np.mean(b):.3f}) is below "
                        f"{HEADROOM}", float(np.mean(b)) < HEADROOM, float(np.mean(b)))
    return decide(claim_id, text, statistic, paired_ci(a, b), precondition=gate,
                  evidence=f"per size: {_per_size(rows, 'style_accuracy')}",
                  numbers={"bc_pmi": float(np.mean(a)), "bc": float(np.mean(b)),
                           "wins": float(sum(x > y for x, y in zip(a, b)))})


def equal_success_claim(rows: Rows, size: int, margin: float) -> Claim:
    """BC-PMI and conditional BC reach the same success rate within ``margin`` (equivalence, paired)."""
    claim_id, text = "bc_pmi_equal_success_low_data", (f"BC-PMI and conditional BC succeed equally often at low "
                                                        f"data ({size} episodes per style; within ±{margin:g})")
    statistic = "success rate, BC-PMI - conditional BC, paired over seeds"
    a, b = _paired(rows, "success", size)
    interval = paired_ci(a, b) if len(a) >= 2 else mean_ci([0.0])
    low, high = interval.low, interval.high
    if len(a) < 2:
        verdict = "not resolved"
    elif -margin < low and high < margin:
        verdict = "holds"
    elif low > margin or high < -margin:
        verdict = "does not hold"
    else:
        verdict = "not resolved"
    evidence = (f"{statistic} = {fmt_interval(interval)}; claimed inside (-{margin:g}, {margin:g}) (equivalence: "
                f"holds when the whole interval is inside, does not hold when it is wholly outside). Per size: "
                f"{_per_size(rows, 'success')}.")
    return Claim(id=claim_id, claim=text, statistic=statistic, effect=interval.estimate, ci=(low, high),
                 n=interval.n, verdict=verdict, evidence=evidence, threshold=margin, direction="less",
                 numbers={"bc_pmi": float(np.mean(a)) if a else math.nan, "bc": float(np.mean(b)) if b else math.nan})


def _ratios(rows: Rows, size: int) -> list[float]:
    """The weights' zone ratio per seed at ``size`` (stored on every policy row of that size and seed)."""
    return values(rows_where(rows, method="bc_pmi", size=size) or rows_where(rows, method="bc", size=size),
                  "zone_ratio")


def concentration_claim(rows: Rows, size: int) -> Claim:
    """The PMI weights are larger inside the bifurcation zone than outside it (ratio > 1 over seeds)."""
    ratios = _ratios(rows, size)
    claim_id, statistic = "weights_concentrate_in_zone", "mean exp(PMI) weight inside the zone / outside it, over seeds"
    text = f"PMI weights concentrate where the styles differ (the bifurcation zone; {size} episodes per style)"
    if len(ratios) < 2:
        gate = Precondition(f">= 2 seeds ({len(ratios)})", False, float(len(ratios)))
        return decide(claim_id, text, statistic, mean_ci(ratios or [1.0]), threshold=1.0, precondition=gate)
    sizes = sorted({int(r["size"]) for r in rows if r["method"] != "expert"})
    per_size = "; ".join(f"n={s}: {np.mean(_ratios(rows, s)):.2f}" for s in sizes)
    return decide(claim_id, text, statistic, mean_ci(ratios), threshold=1.0, evidence=f"ratio per size: {per_size}",
                  numbers={"ratio": float(np.mean(ratios))})


SHARED_PLACE = {"gridworld": "on the shared path outside the zone (centre column, moving up)",
                "reacher": "at the shared start (elbow still bending, shoulder held)"}


def checks(rows: Rows, mine: Mapping[str, Mapping[str, float]], n_styles: int = 3, env: str = "gridworld"
           ) -> list[Check]:
    """MINE's estimate within its bounds (and close to the count PMI where there is one); the experts show
    their styles."""
    dvs = {k: v["dv"] for k, v in mine.items()}
    corr = {k: v["pearson_exact"] for k, v in mine.items() if "pearson_exact" in v}
    shared = {k: v["shared_pmi"] for k, v in mine.items() if math.isfinite(v.get("shared_pmi", math.nan))}
    bound = math.log(n_styles)
    experts = values(rows_where(rows, method="expert"), "style_accuracy")
    out = [
        Check("dv_estimate_in_bounds", f"MINE's final DV estimate lies in (0, log {n_styles} = {bound:.3f}] "
              f"(+{DV_SLACK} batch noise): a lower bound on I(s, a; z) <= H(z)",
              bool(dvs) and all(0 < v <= bound + DV_SLACK for v in dvs.values()),
              ", ".join(f"{k} {v:.3f}" for k, v in dvs.items()), {"min_dv": min(dvs.values(), default=math.nan)})]
    if corr or env == "gridworld":
        out.append(Check("mine_pmi_tracks_exact_pmi", f"MINE's PMI correlates with the exact count PMI (Pearson > "
                         f"{PMI_CORRELATION}) at every seed and size",
                         bool(corr) and all(v > PMI_CORRELATION for v in corr.values()),
                         ", ".join(f"{k} {v:.2f}" for k, v in corr.items()),
                         {"min_pearson": min(corr.values(), default=math.nan)}))
    out += [
        Check("pmi_zero_where_styles_agree", f"{SHARED_PLACE.get(env, 'where every style acts alike')}, where every "
              f"style acts alike, MINE's mean PMI is ~0 (|mean| < {SHARED_PMI})",
              bool(shared) and all(abs(v) < SHARED_PMI for v in shared.values()),
              ", ".join(f"{k} {v:+.3f}" for k, v in shared.items()),
              {"max_abs_shared_pmi": max((abs(v) for v in shared.values()), default=math.nan)}),
        Check("experts_show_their_styles", "the demonstrators' own rollouts show their style (style accuracy >= 0.9)",
              bool(experts) and min(experts) >= 0.9,
              f"expert style accuracy per seed: {', '.join(f'{x:.3f}' for x in experts)}"),
    ]
    return out


def table(rows: Rows, sizes: Sequence[int], methods: Sequence[str], style_names: Sequence[str] = STYLES["gridworld"]
          ) -> tuple[list[str], list[dict[str, Any]]]:
    """The paper's comparison shape: per data size, each method's success, return (where the environment has a
    reward) and style accuracy (mean ± 95% half-width over seeds), per-style accuracy, the weights' zone ratio;
    the experts first."""
    has_return = any(isinstance(r.get("return"), float) and math.isfinite(r["return"]) for r in rows)
    columns = ["episodes per style", "method", "success", *(["return"] if has_return else []), "style accuracy",
               *style_names, "weight zone / outside", "paper"]
    out = []
    for size, method in [(0, "expert")] + [(s, m) for s in sizes for m in methods]:
        mine = rows_where(rows, method=method, size=size)
        if not mine:
            continue
        row: dict[str, Any] = {"episodes per style": size or "–", "method": LABELS[method],
                               "success": pm(values(mine, "success"))}
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
    "gridworld": ("Style accuracy: the rollout first reaches the zone's middle row (row 5) in its style's corridor "
                  "(columns 0-3 left, 4-6 centre, 7-10 right).",
                  "Policies: MLP(coords + one-hot z -> {hidden} -> 5 logits)",
                  "Weight zone / outside: mean exp(PMI) weight (normalised over the training set) of tuples inside the "
                  "zone (rows 3-7) over that of tuples outside it; the heat map shows it per cell (weight_map.png), "
                  "weights_along.png along demonstrations."),
    "reacher": ("MuJoCo Reacher-v5 (gymnasium), target placed behind the arm; success: final fingertip-target distance "
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
                "over the fingertip plane, weights_along.png along demonstrations."),
}


def build_report(rows: Rows, mine: Mapping[str, Any], data: Mapping[str, Any], p: BcPmiParams) -> Report:
    """The table, the claims, the checks and the notes of one run."""
    env = data.get("env", "gridworld")
    style_note, policy_note, weight_note = NOTES[env]
    sizes, methods = list(data["sizes"]), list(p.train.methods)
    low = min(sizes)
    columns, body = table(rows, sorted(set(sizes)), methods, STYLES[env])
    claims = [concentration_claim(rows, low)]
    if {"bc", "bc_pmi"} <= set(methods):
        claims = [style_accuracy_claim(rows, low), equal_success_claim(rows, low, p.report.success_margin)] + claims
    notes = [
        f"Fractions of {p.evaluate.rollouts} rollouts per style ({p.evaluate.action} actions, horizon "
        f"{p.evaluate.horizon or 'the environment default'}), mean ± 95% half-width over seeds {list(p.seeds)}. "
        f"{style_note}",
        f"Demonstrations: {data['source']}, expert noise {data.get('noise', data.get('epsilon'))}; sizes {sizes} "
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
    return Report(slug="bc_pmi", title=f"BC-PMI vs style-conditioned BC on {title}: success and style accuracy",
                  columns=columns, rows=body, claims=claims,
                  checks=checks(rows, mine, len(STYLES[env]), env), notes=notes)
