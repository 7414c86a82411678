"""csa: parameter rules, the paper preset, a user's embeddings (aligned in place of the offline images; refused
before any work when malformed: rows of tests/reliability/test_bad_inputs.py), and one tiny Prefect run end to end."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from components.io import load_json, load_table
from paperflows.contract import StageContext
from paperflows.engine import run_stage
from paperflows.params import ParamsError, validate
from pipelines.csa.params import CsaParams
from pipelines.csa.pipeline import PIPELINE

# the pixel "encoder" and hashed n-grams keep the flow fast; the real encoders have their own tests
TINY: dict[str, Any] = {
    "seeds": [0, 1, 2],
    "data": {"n_pool": 120, "n_test": 80, "image_encoder": "pixels", "text_encoder": "tiny"},
    "align": {"n_pairs": [40, 100], "steps": 20, "image_pca": 16, "text_pca": 8, "sim_dim": 6, "embed_dim": 6},
}


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ({"align": {"methods": ["csa", "csa"]}}, "values repeat"),
        ({"align": {"methods": ["clip"]}}, "csa.align.methods"),
        ({"align": {"n_pairs": [5]}}, "csa.align.n_pairs"),
        ({"align": {"n_pairs": [50, 5000]}}, "asks for 5000 pairs but data.n_pool holds"),
        ({"eval": {"few_pairs": 10}}, "no align.n_pairs value is <= eval.few_pairs"),
        ({"data": {"image_encoder": "resnet"}}, "csa.data.image_encoder"),
        ({"eval": {"mislabel_fraction": 1.0}}, "csa.eval.mislabel_fraction"),
    ],
)
def test_bad_params_name_the_key(section: dict[str, Any], message: str) -> None:
    with pytest.raises(ParamsError, match=message):
        validate(CsaParams, section, "csa")


def test_paper_preset() -> None:
    paper = CsaParams(scale="paper")
    assert paper.align.n_pairs == [50, 200, 800, 5000] and paper.data.resolution == 224
    assert paper.data.n_pool >= 5000 and len(paper.seeds) == 5


def _embeddings(folder: Path, n: int = 120, **change: np.ndarray) -> None:
    """Two views sharing a class signal: image = class mean + noise (12-d), text = a linear map of it (6-d)."""
    rng = np.random.default_rng(0)
    labels = np.arange(n) % 4
    image = rng.standard_normal((4, 12))[labels] + 0.5 * rng.standard_normal((n, 12))
    text = image[:, :6] @ rng.standard_normal((6, 6)) + 0.3 * rng.standard_normal((n, 6))
    folder.mkdir(parents=True, exist_ok=True)
    arrays = {"image": image.astype(np.float32), "text": text.astype(np.float32), "labels": labels, **change}
    for name, value in arrays.items():
        np.save(folder / f"{name}.npy", value)


def test_users_embeddings_are_aligned(project: Path) -> None:
    _embeddings(project / "mine")
    params = CsaParams.model_validate(
        {
            "seeds": [0],
            "data": {"embeddings_path": "mine", "test_fraction": 0.25},
            "align": {"n_pairs": [40, 80], "steps": 20, "image_pca": 12, "text_pca": 6, "sim_dim": 4, "embed_dim": 4},
        }
    )
    root = project / "out"
    for name in ("features", "align"):
        run_stage(
            StageContext(
                pipeline=PIPELINE, stage=PIPELINE.stage(name), params=params, root=root, progress=False, project=project
            )
        )
    summary = load_json(root / "metrics" / "features.json")
    assert (summary["source"], summary["pool"], summary["test"], summary["classes"]) == ("embeddings_path", 90, 30, 4)
    rows = load_table(root / "tables" / "scores.parquet")
    assert {(r["method"], r["n_pairs"]) for r in rows} == {
        (m, n) for m in ("csa", "cca", "asif", "contrastive") for n in (40, 80)
    }
    csa = [r for r in rows if r["method"] == "csa"]
    assert all(r["zero_shot"] > 0.5 and r["mislabel_auc"] > 0.6 for r in csa)  # chance: 0.25 and 0.5
    too_many = params.model_copy(update={"align": params.align.model_copy(update={"n_pairs": [40, 100]})})
    with pytest.raises(Exception, match="100 pairs asked for, the pool holds 90"):
        run_stage(
            StageContext(
                pipeline=PIPELINE,
                stage=PIPELINE.stage("align"),
                params=too_many,
                root=root,
                progress=False,
                project=project,
            )
        )


def test_flow_smoke(prefect_harness: None, project: Path, run_flow_and_check) -> None:
    report = run_flow_and_check(PIPELINE, CsaParams.model_validate(TINY), project, expect_weights=False)
    ids = [c["id"] for c in report["claims"]]
    # the headline first; then per probe size the same comparison, the mislabel AUC, rho weighting and ASIF
    assert ids[0] == "csa_beats_contrastive_zero_shot" and [c["headline"] for c in report["claims"]].count(True) == 1
    assert {"rho_weighting_beats_cosine_zero_shot", "rho_weighting_beats_cosine_mislabel_auc"} <= set(ids)
    assert any(i.startswith("csa_beats_asif_mislabel_auc_n") for i in ids)
    assert any(i.startswith("csa_beats_contrastive_mislabel_auc") for i in ids)
    assert all(c["n"] == 3 for c in report["claims"]) and report["claims"][0]["headline"]
    assert report["checks"][0]["passed"]
    assert len(report["rows"]) == 4 and "zero-shot N=40" in report["columns"]


def test_a_second_stage_reads_the_feature_cache_and_runs_no_encoder(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The features stage alone runs the encoders; align and report read its safetensors, so rerunning them (a
    changed align/eval parameter) never encodes an image or a caption again."""
    import components.llm.encoder as text_encoders
    import components.models.efficientnet_lite as image_encoders
    import pipelines.csa.pipeline as csa_pipeline

    params = CsaParams.model_validate(TINY)
    root = project / "cached"

    def stage(name: str) -> None:
        run_stage(
            StageContext(
                pipeline=PIPELINE, stage=PIPELINE.stage(name), params=params, root=root, progress=False, project=project
            )
        )

    stage("features")

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("an encoder ran after the features stage")

    for module, name in (
        (csa_pipeline, "_offline"),
        (csa_pipeline, "_image_features"),
        (text_encoders, "load_encoder"),
        (image_encoders, "efficientnet_lite0"),
    ):
        monkeypatch.setattr(module, name, refuse)
    stage("align")
    stage("report")
    assert {r["method"] for r in load_table(root / "tables" / "scores.parquet")} == {
        "csa",
        "cca",
        "asif",
        "contrastive",
    }
