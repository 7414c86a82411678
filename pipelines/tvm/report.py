"""TVM: the accuracy-vs-compute table, the claims and the checks, as pure functions of loaded tables.

Inputs: ``search`` rows (seed, method, verifier, accuracy as a fraction, tokens generated per question) and
``aucs`` rows (seed, verifier, prefix-score AUCs at step ends), as the search stage writes them; the data and
label summaries.

Claims (papers/README row 7):

* ``beam_tvm_ge_orm``: step beam search guided by TVM is at least as accurate as guided by ORM. Statistic: the
  per-seed difference of accuracy (percentage points), paired by seed (same initial weights, batches and
  policy draws); holds when its 95% interval is above 0, does not hold when below, else not resolved.
  Precondition: beam search ran (it needs the synthetic policy).
* ``prefix_auc_tvm_gt_orm``: TVM's values at step ends separate recoverable from unrecoverable prefixes better
  than ORM's. Statistic: per-seed difference of AUC (recoverable vs not, synthetic; against the eventual outcome
  for a solutions file), paired by seed.

Checks: the exact value V* agrees with the sampled accuracy (the policy and its recursion are consistent); the
TVM labels are no farther from V* than the ORM labels at step ends (an average of outcomes over a shared prefix
is never farther from their common mean than the outcomes themselves).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from components.metrics.stats import Interval
from paperflows.report import Check, Claim, Precondition, Report, decide, decide_paired, pm, rows_where, values
from pipelines.tvm.params import KIND_LABELS, METHOD_LABELS, TvmParams

Rows = Sequence[Mapping[str, Any]]
ORDER = (("single", "none"), ("majority", "none"), ("best_of_n", "orm"), ("best_of_n", "prm"),
         ("best_of_n", "tvm"), ("best_of_n", "oracle"), ("beam", "orm"), ("beam", "prm"), ("beam", "tvm"),
         ("beam", "oracle"))
# The brief retrieved no exact table values from the paper (its section c); the column stays empty rather than
# quoting numbers from memory.
PAPER: dict[tuple[str, str], float] = {}


def _paired(rows: Rows, key: str, a: Mapping[str, Any], b: Mapping[str, Any]) -> tuple[list[float], list[float]]:
    left = {int(r["seed"]): r[key] for r in rows_where(rows, **a) if r.get(key) is not None}
    right = {int(r["seed"]): r[key] for r in rows_where(rows, **b) if r.get(key) is not None}
    seeds = sorted(set(left) & set(right))
    finite = [s for s in seeds if math.isfinite(float(left[s])) and math.isfinite(float(right[s]))]
    return [float(left[s]) for s in finite], [float(right[s]) for s in finite]


def _unresolved(claim_id: str, text: str, statistic: str, why: str, n: int) -> Claim:
    return decide(claim_id, text, statistic, Interval(math.nan, -math.inf, math.inf, n),
                  precondition=Precondition(why, False, float(n)))


def beam_claim(search: Rows) -> Claim:
    text = "TVM-guided step beam search >= ORM-guided step beam search on accuracy"
    statistic = "accuracy of beam search, TVM - ORM (pp), paired by seed"
    tvm, orm = _paired(search, "accuracy", {"method": "beam", "verifier": "tvm"}, {"method": "beam", "verifier": "orm"})
    if len(tvm) < 2:
        return _unresolved("beam_tvm_ge_orm", text, statistic, f"beam search ran with TVM and ORM on >= 2 common "
                           f"seeds ({len(tvm)}; it needs the synthetic policy)", len(tvm))
    a, b = [100 * x for x in tvm], [100 * x for x in orm]
    single = values(search, "accuracy", method="single", verifier="none")
    wins = sum(x > y for x, y in zip(a, b))
    evidence = (f"TVM {np.mean(a):.1f}% vs ORM {np.mean(b):.1f}% (single sample {100 * np.mean(single):.1f}%); "
                f"TVM ahead on {wins}/{len(a)} seeds")
    return decide_paired("beam_tvm_ge_orm", text, statistic, a, b, evidence=evidence,
                         numbers={"tvm_mean": float(np.mean(a)), "orm_mean": float(np.mean(b)), "wins": float(wins)})


def auc_claim(aucs: Rows) -> Claim:
    key = "auc_recoverable" if any(r.get("auc_recoverable") is not None for r in aucs) else "auc_outcome"
    what = "recoverable vs unrecoverable prefixes" if key == "auc_recoverable" else "the eventual outcome"
    text = "TVM prefix scores separate recoverable prefixes better than ORM's (AUC at step ends)"
    statistic = f"AUC of the value at step ends for {what}, TVM - ORM, paired by seed"
    tvm, orm = _paired(aucs, key, {"verifier": "tvm"}, {"verifier": "orm"})
    if len(tvm) < 2:
        return _unresolved("prefix_auc_tvm_gt_orm", text, statistic, f"TVM and ORM AUCs on >= 2 common seeds "
                           f"({len(tvm)})", len(tvm))
    numbers = {"tvm_mean": float(np.mean(tvm)), "orm_mean": float(np.mean(orm))}
    evidence = f"TVM {np.mean(tvm):.3f} vs ORM {np.mean(orm):.3f}"
    wrong_t, wrong_o = _paired(aucs, "auc_wrong_prefixes", {"verifier": "tvm"}, {"verifier": "orm"})
    if wrong_t:
        evidence += (f"; among wrong prefixes only (fresh slip vs carried error) TVM {np.mean(wrong_t):.3f} vs ORM "
                     f"{np.mean(wrong_o):.3f}")
        numbers.update({"tvm_wrong_only": float(np.mean(wrong_t)), "orm_wrong_only": float(np.mean(wrong_o))})
    return decide_paired("prefix_auc_tvm_gt_orm", text, statistic, tvm, orm, evidence=evidence, numbers=numbers)


def checks(data: Mapping[str, Any], label_metrics: Mapping[str, Any]) -> list[Check]:
    out = []
    if "exact_accuracy" in data:
        n = data["train_questions"] * data["samples"]
        acc, exact = data["train_accuracy"], data["exact_accuracy"]
        se = math.sqrt(max(exact * (1 - exact), 1e-12) / n)
        out.append(Check("exact_value_matches_sampling", "the policy's exact start value V*, averaged over "
                         "questions, matches the sampled accuracy within 4 standard errors",
                         abs(acc - exact) <= 4 * se + 1e-12,
                         f"sampled {acc:.4f} over {n} solutions, exact {exact:.4f} (standard error {se:.4f})",
                         {"sampled": acc, "exact": exact}))
    tvm, orm = (label_metrics.get(f"{kind}/step_end_sq_error_vs_exact_value") for kind in ("tvm", "orm"))
    if tvm is not None and orm is not None:
        out.append(Check("tvm_labels_closer_to_value", "TVM labels are no farther from V* than ORM labels at step "
                         "ends (mean squared error over the training prefixes)", tvm <= orm + 1e-12,
                         f"TVM {tvm:.4f}, ORM {orm:.4f}", {"tvm": tvm, "orm": orm}))
    return out


def table(search: Rows, samples: int, beams: int, per_beam: int) -> tuple[list[str], list[dict[str, Any]]]:
    columns = ["method", "verifier", "accuracy (%)", "generated tokens / question", "paper (GSM8K / MATH)"]
    body = []
    for method, verifier in ORDER:
        mine = rows_where(search, method=method, verifier=verifier)
        if not mine:
            continue
        label = METHOD_LABELS[method] + (f" (N={samples})" if method in ("majority", "best_of_n") else
                                         f" (b={beams}, K={per_beam})" if method == "beam" else "")
        body.append({"method": label, "verifier": KIND_LABELS.get(verifier, "—"),
                     "accuracy (%)": pm([100 * float(r["accuracy"]) for r in sorted(mine, key=lambda r: r["seed"])],
                                        1),
                     "generated tokens / question": round(float(np.mean([r["tokens"] for r in mine])), 1),
                     "paper (GSM8K / MATH)": PAPER.get((method, verifier))})
    return columns, body


def auc_table(aucs: Rows) -> list[dict[str, Any]]:
    out = []
    for kind in dict.fromkeys(r["verifier"] for r in aucs):
        mine = sorted(rows_where(aucs, verifier=kind), key=lambda r: r["seed"])
        row: dict[str, Any] = {"verifier": KIND_LABELS.get(kind, kind)}
        for key, name in (("auc_recoverable", "AUC recoverable vs not"), ("auc_wrong_prefixes",
                          "AUC among wrong prefixes (fresh slip vs carried)"), ("auc_outcome", "AUC eventual outcome")):
            xs = [float(r[key]) for r in mine if r.get(key) is not None and math.isfinite(float(r[key]))]
            row[name] = pm(xs, 3) if xs else None
        out.append(row)
    return out


def champ_table(models: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per CHAMP model: solutions, graded accuracy, answers read, and the grading against the first-wrong-step
    annotations (share graded correct with no annotated wrong step / with one)."""
    def pct(x: Any) -> float | None:
        return None if x is None else round(100 * float(x), 1)
    return [{"model": name, "solutions": int(m["solutions"]), "graded accuracy (%)": pct(m["accuracy"]),
             "final answer read (%)": pct(m["answered"]),
             "graded correct | no wrong step (%)": pct(m["graded_correct_no_wrong_step"]),
             "annotated, no wrong step": int(m["annotated_no_wrong_step"]),
             "graded correct | wrong step (%)": pct(m["graded_correct_wrong_step"]),
             "annotated, wrong step": int(m["annotated_wrong_step"])} for name, m in models.items()]


def _source(data: Mapping[str, Any], p: TvmParams) -> tuple[str, dict[str, list[dict[str, Any]]]]:
    """The data sentence of the notes, and the extra table of the source (CHAMP: per model)."""
    if data.get("source") == "champ":
        d = p.data
        text = (f"CHAMP (champ-dataset, MIT): model-written solutions of {', '.join(d.champ_models)} under "
                f"{len(d.champ_settings)} prompt setting(s) to {int(data['problems_used'])} of its "
                f"{int(data['problems_gradable'])} problems with a gradable reference answer "
                f"({int(data['problems_in_file'])} in the file; list, relation and worded answers are left out), "
                f"split by problem: "
                f"{data['train_questions']} training and {data['test_questions']} held-out problems, "
                f"{data['train_solutions']} + {data['test_solutions']} solutions; each solution's leading lines "
                f"up to {data['max_chars']} characters plus its final-answer line (read from the model's final "
                f"message) are what the verifier sees; correct = the final answer equals the reference (integers "
                f"exactly, else math-verify); test accuracy of a sampled solution {100 * data['test_accuracy']:.1f}%")
        return text, {"CHAMP models: graded accuracy and agreement with the first-wrong-step annotations":
                      champ_table(data["models"])}
    if data.get("source") == "smollm2":
        return (f"synthetic word problems with {p.data.numbers} amounts (operands 1-{p.data.operand_max}, amounts "
                f"<= {p.data.cap}), solved by SmolLM2-135M-Instruct (one-shot prompt, temperature "
                f"{p.policy.temperature}, at most {p.policy.max_new_tokens} new tokens), N = {p.data.samples} samples "
                f"per question, split by question: {data['train_questions']} training and {data['test_questions']} "
                f"held-out questions; correct = the final answer equals the exact one; sampled accuracy "
                f"{100 * data['train_accuracy']:.1f}% (train), {100 * data['test_accuracy']:.1f}% (test); no step "
                f"labels or beam search with this generator"), {}
    if data.get("source") == "file":
        return ("a solutions file: " + f"{data['train_questions']} training and {data['test_questions']} held-out "
                f"questions, {data['train_solutions']} + {data['test_solutions']} solutions; the final answers "
                f"regraded agree with the file's 'correct' on {100 * data['regrade_agreement']:.1f}% of rows"), {}
    return (f"synthetic word problems with {p.data.numbers} amounts (operands 1-{p.data.operand_max}, amounts "
            f"<= {p.data.cap}), {data['train_questions']} training and {data['test_questions']} held-out questions, "
            f"N = {p.data.samples} sampled solutions each; policy slip {p.policy.slip_carry} on carry/borrow "
            f"steps, {p.policy.slip_plain} otherwise, a fresh slip noticed with probability {p.policy.recover}; "
            f"sampled accuracy {100 * data['train_accuracy']:.1f}% (exact {100 * data['exact_accuracy']:.1f}%)"), {}


def build_report(search: Rows, aucs: Rows, data: Mapping[str, Any], label_metrics: Mapping[str, Any],
                 p: TvmParams) -> Report:
    columns, body = table(search, p.data.samples if data.get("source") == "synthetic" else
                          int(round(data.get("test_solutions", 0) / max(1, data.get("test_questions", 1)))),
                          p.search.beams, p.search.per_beam)
    notes_source, extra = _source(data, p)
    notes = [
        f"Accuracy in %, mean ± 95% half-width over seeds {list(p.seeds)}. Data: {notes_source}.",
        f"Verifiers: a 2-layer causal transformer (hidden 64, byte tokens) with a scalar value head, MSE on "
        f"sigmoid values over solution tokens, {p.verifier.steps} AdamW steps of {p.verifier.batch_size} solutions "
        f"(lr {p.verifier.lr}); question {'fed' if p.verifier.with_question else 'not fed'} to the verifier. Same "
        "initial weights and batches across label types for a seed.",
        "Paper column: the brief retrieved no exact values from the paper's GSM8K / MATH tables (it reports only "
        "that TVM-guided beam search and REBASE beat ORM and PRM guidance for Mistral-7B and Llama-3-8B); left "
        "empty rather than quoted from memory.",
    ]
    champ = data.get("source") == "champ"
    if not champ:
        notes[2:2] = [
            "Generated tokens: byte tokens of every line the policy wrote for the question (all N solutions for "
            "majority vote and Best-of-N; every drawn candidate line for beam search). Oracle rows score with the "
            "exact value V* (Best-of-N oracle = pass@N): the ceiling of each search.",
            "Recoverable prefix: every amount so far right, or only the last line wrong while the amount carried into "
            "it was right (a fresh slip the policy may still notice); unrecoverable: a wrong amount has been carried "
            "on."]
    else:
        for row in body:
            if row["verifier"] == KIND_LABELS["oracle"]:
                row["verifier"] = "oracle (pass@N: any solution correct)"
    single = values(search, "accuracy", method="single", verifier="none")
    reranked = {k: values(search, "accuracy", method="best_of_n", verifier=k) for k in ("orm", "prm", "tvm")}
    below = [k for k, xs in reranked.items() if xs and single and np.mean(xs) < np.mean(single)]
    if below and champ:
        notes.append(f"Best-of-N with the learned {', '.join(k.upper() for k in below)} verifier(s) is below the mean "
                     f"accuracy of a single solution ({100 * np.mean(single):.1f}%): a 2-layer byte-level verifier "
                     "that reads the opening lines and the final answer cannot check competition-math reasoning; it "
                     "ranks by surface form.")
    elif below:
        notes.append(f"Best-of-N with the learned {', '.join(k.upper() for k in below)} verifier(s) is below single "
                     f"sampling ({100 * np.mean(single):.1f}%): at this training budget the verifiers have not learned "
                     "to spot slips within a question (they rank by how risky a question's steps look), so the "
                     "comparisons between them say little about the paper's setting; raise verifier.steps and "
                     "data.train_questions on a faster machine.")
    if champ:
        notes.append("CHAMP: generated tokens are the characters of the truncated solutions the verifier reads; "
                     "single sample = the mean accuracy of a problem's solutions (they are listed by prompt setting, "
                     "not drawn at random); Best-of-N oracle = pass@N, the ceiling of any re-ranking.")
    if data.get("source") in ("file", "champ"):
        notes.append(f"{'CHAMP' if data['source'] == 'champ' else 'Solutions file'}: beam search needs the policy "
                     "and is not run (its claim stays not resolved); PRM needs step labels for every training "
                     "solution and is not trained; the prefix AUC is against the eventual outcome.")
    return Report(slug="tvm", title="TVM: accuracy vs generated tokens, per search method and verifier",
                  columns=columns, rows=body, claims=[beam_claim(search), auc_claim(aucs)],
                  checks=checks(data, label_metrics), notes=notes,
                  extra_tables={"Prefix scores at step ends (AUC)": auc_table(aucs), **extra})
