"""PreferDiff: parameter rules, the paper preset, the user's sequence folder (learned in place of MovieLens; refused
before any work when malformed or missing: rows of tests/reliability/test_bad_inputs.py), and one tiny Prefect flow."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from components.data.rec_sequences import write_sequence_folder
from components.io import load_json, load_table, load_tensors
from paperflows.contract import StageContext
from paperflows.engine import run_stage
from paperflows.params import ParamsError, validate
from pipelines.preferdiff.params import PreferdiffParams
from pipelines.preferdiff.pipeline import PIPELINE

SMALL_MODEL = {"hidden": 8, "n_heads": 2, "max_len": 4, "timesteps": 20, "ddim_stride": 5}
TINY: dict[str, Any] = {
    "seeds": [0, 1],
    "data": {"min_item_count": 150, "min_user_length": 3, "max_items": 4, "eval_targets": 1},
    "model": SMALL_MODEL,
    "train": {"epochs": 2, "batch_size": 256},
}


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ({"train": {"methods": ["mse", "mse"]}}, "entries repeat"),
        ({"train": {"methods": ["bert4rec"]}}, "preferdiff.train.methods"),
        ({"preferdiff": {"lam": 1.5}}, "preferdiff.preferdiff.lam"),
        ({"preferdiff": {"pairing": "rows"}}, "preferdiff.preferdiff.pairing"),
        ({"model": {"w": -1}}, "preferdiff.model.w"),
        ({"model": {"hidden": 10, "n_heads": 4}}, "multiple of n_heads"),
        ({"data": {"min_user_length": 30, "max_items": 20}}, "exceeds max_items"),
    ],
)
def test_bad_params_name_the_key(section: dict[str, Any], message: str) -> None:
    with pytest.raises(ParamsError, match=message):
        validate(PreferdiffParams, section, "preferdiff")


def test_paper_preset() -> None:
    paper = PreferdiffParams(scale="paper")
    assert (paper.model.hidden, paper.model.timesteps, paper.model.ddim_stride) == (3072, 2000, 100)
    assert (paper.train.lr, paper.train.epochs, paper.data.eval_targets) == (1e-4, 150, 1)
    default = PreferdiffParams()
    assert (default.preferdiff.pairing, default.preferdiff.negative_noise) == ("batch", "independent")


def test_evidence_preset_trains_the_headlines_arms_on_the_frozen_text_table() -> None:
    from pipelines.preferdiff.report import HEADLINE

    evidence = PreferdiffParams(scale="evidence")
    assert HEADLINE[0].id == "preferdiff_gt_mse_recall5" and evidence.train.methods == ["mse", "preferdiff"]
    assert evidence.model.item_embeddings == "auto" and evidence.data.path is None  # MovieLens titles: text
    assert len(evidence.seeds) == 10 and evidence.train.epochs > PreferdiffParams().train.epochs


def test_users_folder_is_learned(project: Path) -> None:
    # 40 users over 9 items: each user walks a cycle, so the next item follows from the last one
    seqs = [[(u + k) % 9 + 1 for k in range(5)] for u in range(40)]
    write_sequence_folder({"train": seqs[:30], "valid": seqs[30:35], "test": seqs[35:]}, project / "mine")
    params = PreferdiffParams.model_validate(
        {
            "seeds": [0],
            "data": {"path": "mine", "eval_targets": 2},
            "model": SMALL_MODEL,
            "train": {"methods": ["preferdiff", "sasrec"], "epochs": 2, "batch_size": 16},
        }
    )
    root = project / "out"
    for name in ("prepare", "embed", "train", "evaluate"):
        run_stage(
            StageContext(
                pipeline=PIPELINE,
                stage=PIPELINE.stage(name),
                params=params,
                root=root,
                progress=False,
                project=project,
                threads=1,
            )
        )
    data = load_json(root / "metrics" / "data.json")
    assert data["source"] == "data.path" and data["n_items"] == 9 and data["train_users"] == 30
    assert (root / "data" / "sequences" / "train_data.txt").read_text().splitlines()[0] == "1 2 3 4 5"
    # item_embeddings 'auto' on the txt format (no item text): the items are learned, the frozen table is empty
    assert load_tensors(root / "data" / "item_table.safetensors")["items"].numel() == 0
    rows = load_table(root / "tables" / "results.parquet")
    assert {r["method"] for r in rows} == {"preferdiff", "sasrec"}
    assert all(0 <= r["recall@5"] <= 1 and r["ndcg@5"] <= r["recall@5"] for r in rows)
    curves = load_table(root / "tables" / "curves.parquet")
    assert sorted({c["epoch"] for c in curves}) == [1, 2]
    # the popularity ranker (the learning gates' reference) is scored on the same test and validation cases
    popular = load_json(root / "metrics" / "evaluate.json")
    assert all(0 <= popular[f"popularity/{k}"] <= 1 for k in ("recall_at_5", "ndcg_at_10", "valid_recall_at_5"))


def test_flow_smoke(prefect_harness: None, project: Path, run_flow_and_check) -> None:
    report = run_flow_and_check(PIPELINE, PreferdiffParams.model_validate(TINY), project)
    assert [c["id"] for c in report["claims"]] == [
        "preferdiff_gt_mse_recall5",
        "preferdiff_gt_mse_ndcg5",
        "cosine_ge_mse_recall5",
        "preferdiff_converges_faster",
    ]
    assert [r["method"] for r in report["rows"]] == [
        "Diffusion, MSE-x0 (DreamRec-like)",
        "Diffusion, cosine-x0",
        "PreferDiff",
        "SASRec (cross-entropy)",
        "Popularity (training counts; the gates' reference)",
    ]
    assert [c["id"] for c in report["claims"] if c["headline"]] == ["preferdiff_gt_mse_recall5"]
    assert all(g["reference"].startswith("popularity (") for c in report["claims"] for g in c["gates"])
