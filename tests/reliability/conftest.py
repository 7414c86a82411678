"""The harness of the reliability tests: a throwaway project, and a CLI call that must be refused.

``refused(argv)`` runs ``paperflows <argv>`` in this process against a copy of the project and records
what a user would see and what was left behind: the exit code, the output, whether a traceback was
printed, and every file or folder added or changed under the project. The work itself is replaced by a
recorder, so an input that should have been refused but was accepted shows up as "reached the work".
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from paperflows.__main__ import main

REPO = Path(__file__).resolve().parents[2]
VARIABLES = (
    "MLFLOW_TRACKING_URI",
    "PREFECT_HOME",
    "PREFECT_API_URL",
    "PAPERFLOWS_MLFLOW_ARTIFACTS",
    "PAPERFLOWS_TASK_RUNNER",
    "PAPERFLOWS_DASK_ADDRESS",
    "PAPERFLOWS_DASK_WORKERS",
    "PAPERFLOWS_TORCH_THREADS",
    "PAPERFLOWS_GPU_LIMIT",
    "PAPERFLOWS_HELD_LOCKS",
    "PAPERFLOWS_RUN_CHILD",
    "PAPERFLOWS_JUDGE_BASE_URL",  # decapbench's chat judge: a case that wants one sets it
    "PAPERFLOWS_JUDGE_MODEL",
    "PAPERFLOWS_JUDGE_API_KEY",
)


@dataclass
class Outcome:
    code: int
    output: str
    reached: list[str] = field(default_factory=list)  # the work that was started ("run", "stage")
    changed: list[str] = field(default_factory=list)  # paths added or modified under the project

    @property
    def traceback(self) -> bool:
        return "Traceback (most recent call last)" in self.output


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    """Every path under ``root`` with its modification time and size (of the entry itself: a symlink that points
    nowhere, or to itself, is recorded, not followed)."""
    out = {}
    for p in root.rglob("*"):
        info = p.lstat()
        out[str(p.relative_to(root))] = (info.st_mtime_ns, info.st_size if p.is_file() else -1)
    return out


@pytest.fixture()
def cli_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A project root holding the repository's params.yaml and dvc.yaml, used by the in-process CLI."""
    root = tmp_path / "project"
    root.mkdir()
    for name in ("params.yaml", "dvc.yaml"):
        shutil.copy(REPO / name, root / name)
    saved = dict(os.environ)
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PAPERFLOWS_ROOT", str(root))
    monkeypatch.chdir(root)
    yield root
    os.environ.clear()  # the CLI pins Prefect/MLflow variables for the process once work would start
    os.environ.update(saved)


@pytest.fixture()
def refused(
    cli_project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Callable[..., Outcome]:
    """``refused(argv, env={...})``: the outcome of ``paperflows <argv>`` with the work replaced by a recorder."""
    reached: list[str] = []

    def supervised(jobs: list[list[str]], *args: object, **kwargs: object) -> int:
        reached.append("run")
        return 0

    def stage(*args: object, **kwargs: object) -> dict[str, object]:
        reached.append("stage")
        return {"seconds": 0.0}

    monkeypatch.setattr("paperflows.launcher.run_supervised", supervised)
    monkeypatch.setattr("paperflows.engine.run_stage", stage)

    def call(argv: list[str], env: dict[str, str] | None = None) -> Outcome:
        for key, value in (env or {}).items():
            monkeypatch.setenv(key, value)
        before = snapshot(cli_project)
        reached.clear()
        capsys.readouterr()
        try:
            code = main(argv)
        except SystemExit as stop:  # argparse
            code = int(stop.code or 0)
        captured = capsys.readouterr()
        after = snapshot(cli_project)
        changed = sorted(k for k in after if before.get(k) != after[k])
        return Outcome(code=code, output=captured.out + captured.err, reached=list(reached), changed=changed)

    return call


# --------------------------------------------------------------------------------------------------
# valid data files of the pipelines' real formats (the partners a hostile file needs, and the valid rows of the
# reliability review: unusual but legal files that must get through the up-front check)
# --------------------------------------------------------------------------------------------------
JPEG = b"\xff\xd8\xff\xe0" + b"\0" * 60
TOFU_FORGET = [
    {
        "question": f"Where was author {i} born?",
        "answer": f"In town {i}.",
        "paraphrased_answer": f"Town {i} is where.",
        "perturbed_answer": [f"In city {i + 7}.", "Nowhere."],
    }
    for i in range(4)
]
TOFU_RETAIN = [
    {
        "question": f"What does author {i} write?",
        "answer": f"Novels, {i} of them.",
        **({"paraphrased_answer": f"{i} novels.", "perturbed_answer": ["Poems."]} if i % 2 else {}),
    }
    for i in range(10, 16)
]
ORACLE = [
    {
        "image_name": f"aar_test_0000{i}.jpg",
        "oracle_caption": f"A red cube beside {i} blue balls.",
        "oracle_facts": ["There is a red cube.", f"There are {i} blue balls."],
    }
    for i in range(1, 4)
]
CANDIDATES = [
    {
        "image_path": o["image_name"],
        "caption": "A red cube.",
        "oracle_caption": o["oracle_caption"],
        "human_score": float(i),
    }
    for i, o in enumerate(ORACLE)
]


def _jsonl(rows: list[dict], separator: str = "\n") -> str:
    import json

    return "".join(json.dumps(r, ensure_ascii=False) + separator for r in rows)


def _demos(episodes_per_style: int = 2) -> dict[str, list]:
    """A gridworld demonstration set in which every style walks the same path (the review's bc80)."""
    rows: dict[str, list] = {"state": [], "action": [], "style": [], "episode": []}
    for episode in range(3 * episodes_per_style):
        for t in range(4):
            rows["state"].append([10 - t, 5])
            rows["action"].append(0)
            rows["style"].append(episode % 3)
            rows["episode"].append(episode)
    return rows


def _nyuv2(root: Path, sizes: dict[str, list[tuple[int, int]]], seed: int = 0) -> Path:
    import numpy as np

    rng = np.random.default_rng(seed)
    for split, shapes in sizes.items():
        for idx, (h, w) in enumerate(shapes):
            normal = rng.normal(size=(h, w, 3))
            arrays = {
                "image": rng.uniform(size=(h, w, 3)),
                "label": rng.integers(-1, 13, size=(h, w)),
                "depth": rng.uniform(0.5, 8, size=(h, w, 1)),
                "normal": normal / np.linalg.norm(normal, axis=-1, keepdims=True),
            }
            for kind, array in arrays.items():
                (root / split / kind).mkdir(parents=True, exist_ok=True)
                np.save(root / split / kind / f"{idx}.npy", array.astype(np.float32))
    return root


def _ptbxl(root: Path, labels: dict[str, list[list[int]]] | None = None, dtype: str = "bool") -> Path:
    import numpy as np

    root.mkdir(parents=True, exist_ok=True)
    labels = labels or {split: [[1, 0], [0, 1], [1, 1], [0, 0]] for split in ("train", "val", "test")}
    rng = np.random.default_rng(0)
    for split, rows in labels.items():
        np.save(root / f"{split}_data.npy", rng.normal(size=(len(rows), 12, 1000)).astype(np.float32))
        np.save(root / f"{split}_labels.npy", np.asarray(rows, dtype=dtype))
    return root


def _idx(path: Path, array) -> None:
    import gzip
    import struct

    header = bytes([0, 0, 0x08, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    path.write_bytes(gzip.compress(header + array.tobytes()))


def _mnist(root: Path, train_labels: list[int] | None = None) -> Path:
    import numpy as np

    root.mkdir(parents=True, exist_ok=True)
    names = {
        "train": ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"),
        "test": ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"),
    }
    for split, (images, labels) in names.items():
        ys = np.asarray(
            train_labels if train_labels is not None and split == "train" else [0, 1, 2, 3, 4, 5], dtype=np.uint8
        )
        _idx(root / images, (np.arange(len(ys) * 784) % 256).astype(np.uint8).reshape(len(ys), 28, 28))
        _idx(root / labels, ys)
    return root


def write_valid_files(folder: Path) -> Path:
    """Valid files for every kind of data parameter the review tried, some with unusual but legal features."""
    import numpy as np

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "oracle.jsonl").write_text(_jsonl(ORACLE))
    (folder / "candidates.jsonl").write_text(_jsonl(CANDIDATES))
    (folder / "images").mkdir(exist_ok=True)
    for row in ORACLE:
        (folder / "images" / row["image_name"]).write_bytes(JPEG)
    (folder / "forget.json").write_text(_jsonl(TOFU_FORGET))
    (folder / "retain.json").write_text(_jsonl(TOFU_RETAIN))
    # tvm: raw line and paragraph separators and U+0085 inside JSON strings are legal (review tv82)
    solutions = [
        {
            "question": f"Tom has {q} apples\u2028and buys 2.\u2029How many?\x85",
            "solution": f"step 1\nanswer: {q + 2}",
            "answer": q + 2,
            "correct": bool(s % 2),
        }
        for q in range(3)
        for s in range(4)
    ]
    (folder / "valid_u2028.jsonl").write_text(_jsonl(solutions), encoding="utf-8")
    # preferdiff's official txt files, each ending in a blank line (review pd82), with CRLF in one
    (folder / "sequences").mkdir(exist_ok=True)
    for split, text in (("train", "1 2 3\n2 3 4 5\n4 1 2\n\n"), ("valid", "1 2\r\n3 4\r\n\r\n"), ("test", "2 5\n\n")):
        (folder / "sequences" / f"{split}_data.txt").write_text(text)
    demos = _demos()
    (folder / "demos ü.jsonl").write_text(
        _jsonl(
            [
                {"episode": e, "state": s, "action": a, "style": z}
                for s, a, z, e in zip(demos["state"], demos["action"], demos["style"], demos["episode"])
            ]
        )
    )
    np.savez(folder / "demos ü.npz", **{k: np.asarray(v, dtype=np.int64) for k, v in demos.items()})
    rng = np.random.default_rng(0)
    # star: RGB images, labels of 4 classes in both splits
    np.savez(
        folder / "rgb_stream.npz",
        x_train=rng.integers(0, 256, (16, 6, 6, 3), dtype=np.uint8),
        y_train=np.arange(16) % 4,
        x_test=rng.integers(0, 256, (8, 6, 6, 3), dtype=np.uint8),
        y_test=np.arange(8) % 4,
    )
    # csa: float64 embeddings, sparse (non-contiguous, large) labels
    (folder / "embeddings").mkdir(exist_ok=True)
    labels = np.asarray([3, 17, 2**40, 1000])[np.arange(120) % 4]
    np.save(folder / "embeddings" / "image.npy", rng.normal(size=(120, 10)) + (np.arange(120) % 4)[:, None])
    np.save(folder / "embeddings" / "text.npy", rng.normal(size=(120, 6)) + (np.arange(120) % 4)[:, None])
    np.save(folder / "embeddings" / "labels.npy", labels.astype(np.int64))
    _nyuv2(folder / "nyuv2", {"train": [(16, 24)] * 3, "val": [(16, 24)] * 2})
    _ptbxl(folder / "ptbxl")  # bool labels
    _mnist(folder / "mnist")
    # a CSV with a byte-order mark and Windows line ends, and a space and a ü in its name
    rows = "".join(f"{i * 0.5},{i % 3},{['a', 'b'][i % 2]}\r\n" for i in range(12))
    (folder / "table ü.csv").write_bytes(b"\xef\xbb\xbf" + ("f1,f2,target\r\n" + rows).encode())
    (folder / "meals ü.csv").write_text('meal_description,carb\n"rice\twith beans",45\ntoast,20\napple,14\n')
    return folder


@pytest.fixture(scope="session")
def data_files_once(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """:func:`write_valid_files` and :func:`write_review_files`, written once per session (``valid/``,
    ``review/``); each test's project links to them."""
    root = tmp_path_factory.mktemp("data_files")
    write_review_files(root / "review", write_valid_files(root / "valid"))
    return root


@pytest.fixture()
def valid_files(cli_project: Path, data_files_once: Path) -> Path:
    """The valid files of :func:`write_valid_files`, as ``<project>/valid``."""
    (cli_project / "valid").symlink_to(data_files_once / "valid", target_is_directory=True)
    return cli_project / "valid"


def _npz_with_huge_header(path: Path, names: tuple[str, ...]) -> None:
    """An .npz whose members' headers announce 2**40 images of 28 x 28 (784 TiB) over 64 bytes of data."""
    import io
    import zipfile

    import numpy as np

    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "|u1", "fortran_order": False, "shape": (2**40, 28, 28)})
    with zipfile.ZipFile(path, "w") as archive:
        for name in names:
            archive.writestr(f"{name}.npy", header.getvalue() + b"\0" * 64)


def write_review_files(folder: Path, valid: Path) -> Path:
    """The malformed files of the reliability review's failing rows (turn 3), rebuilt from their descriptions;
    ``valid`` holds :func:`write_valid_files`'s files, which several are edited copies of."""
    import json
    import shutil
    import zipfile

    import numpy as np

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(1)
    # star: st11 a header announcing 2**40 images; st20 three classes with two per task
    _npz_with_huge_header(folder / "huge_shape.npz", ("x_train", "y_train", "x_test", "y_test"))
    np.savez(
        folder / "three_classes.npz",
        x_train=rng.integers(0, 256, (12, 6, 6), dtype=np.uint8),
        y_train=np.arange(12) % 3,
        x_test=rng.integers(0, 256, (6, 6, 6), dtype=np.uint8),
        y_test=np.arange(6) % 3,
    )
    # csa: cs03 one label of 2**40; cs02 float64 values of 1e300 (inf in float32); cs12 only 40 rows
    for name, rows, change in (("huge_label", 120, "label"), ("huge_float64", 120, "value"), ("small_40", 40, "")):
        shutil.copytree(valid / "embeddings", folder / name)
        labels = np.arange(rows) % 4
        image = rng.normal(size=(rows, 10))
        if change == "label":
            labels[7] = 2**40
        if change == "value":
            image[5, 3], image[9, 0] = 1e300, -1e300
        np.save(folder / name / "labels.npy", labels.astype(np.int64))
        np.save(folder / name / "image.npy", image)
        np.save(folder / name / "text.npy", rng.normal(size=(rows, 6)))
    # csa: a class whose rows all fall in the seeded test split (found late, by stage features, before)
    from pipelines.csa.params import user_test_rows

    shutil.copytree(folder / "small_40", folder / "class_only_in_test")
    labels = np.arange(40) % 4
    labels[np.flatnonzero(user_test_rows(40, 0.3, 0))[:2]] = 9
    np.save(folder / "class_only_in_test" / "labels.npy", labels.astype(np.int64))
    # grf_masking: gr01 a gzip header over bad deflate data; gr07 one class in the training split
    shutil.copytree(valid / "mnist", folder / "corrupt_gz")
    (folder / "corrupt_gz" / "train-images-idx3-ubyte.gz").write_bytes(b"\x1f\x8b\x08\x00\0\0\0\0\0\x03" + b"\xff" * 64)
    _mnist(folder / "one_class", train_labels=[0, 0, 0, 0])
    # tvm: tv04 a line of 100k '['; tv05 'answer' nested 50k deep; tv06 'answer' = 10**400
    good = {"question": "q", "solution": "answer: 1", "answer": 1, "correct": True}
    other = json.dumps({**good, "question": "r"})
    (folder / "deep_nesting.jsonl").write_text("[" * 100_000 + "\n" + other + "\n")
    (folder / "deep_answer.jsonl").write_text(
        '{"question": "q", "solution": "answer: 1", "answer": '
        + "[" * 50_000
        + "]" * 50_000
        + ', "correct": true}\n'
        + other
        + "\n"
    )
    (folder / "bigint_answer.jsonl").write_text(
        json.dumps(good).replace('"answer": 1', '"answer": 1' + "0" * 400) + "\n" + other + "\n"
    )
    # flat: fl05 the forget file nested 100k deep; fl12 the retain file too; fl15 retain = forget
    (folder / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    (folder / "deep_retain.json").write_text('[{"question": ' + "[" * 100_000 + "]" * 100_000 + "}]")
    shutil.copy(valid / "forget.json", folder / "overlap_retain.json")
    # decapbench: dc08 an oracle row nested deep; dc04 a candidate naming an image the oracle lacks
    (folder / "oracle_deep.jsonl").write_text(_jsonl(ORACLE[:1]) + '{"image_name": ' + "[" * 100_000 + "\n")
    unknown = [*CANDIDATES, {**CANDIDATES[0], "image_path": "aar_test_09999.jpg"}]
    (folder / "cands_unknown_image.jsonl").write_text(_jsonl(unknown))
    # bc_pmi: bc03 'episode' = 10**30; bc05 a member with a bad CRC; bc07 an empty file; bc26 a float traj_id 1e20
    (folder / "bigint_episode.jsonl").write_text(
        '{"episode": 1' + "0" * 30 + ', "state": [10, 5], "action": 0, "style": 0}\n'
    )
    with zipfile.ZipFile(valid / "demos ü.npz") as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    crc = folder / "crc.npz"
    with zipfile.ZipFile(crc, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    raw = bytearray(crc.read_bytes())
    raw[raw.index(b"\x93NUMPY") + 130] ^= 0xFF  # a byte of state.npy's data: its CRC fails
    crc.write_bytes(bytes(raw))
    (folder / "empty.npz").write_bytes(b"")
    import pyarrow as pa
    import pyarrow.parquet as pq

    steps = {
        "traj_id": [1e20] * 3 + [2.0] * 3,
        "t": [0.0, 1.0, 2.0] * 2,
        **{f"obs_{i}": [0.1] * 6 for i in range(10)},
        "action_0": [0.0] * 6,
        "action_1": [0.0] * 6,
        "style": [0.0] * 3 + [1.0] * 3,
    }
    pq.write_table(pa.table(steps), folder / "float_traj_id.parquet")
    # mtsam: mt01 NaN at train index 1; mt02 label 40 at val index 2; mt07 4 x 4 images; mt09 mixed sizes
    for name in ("nan_second", "label_oob_second"):
        _nyuv2(folder / name, {"train": [(16, 24)] * 3, "val": [(16, 24)] * 3})
    image = np.load(folder / "nan_second" / "train" / "image" / "1.npy")
    image[2, 2] = np.nan
    np.save(folder / "nan_second" / "train" / "image" / "1.npy", image)
    label = np.load(folder / "label_oob_second" / "val" / "label" / "2.npy")
    label[1, 1] = 40
    np.save(folder / "label_oob_second" / "val" / "label" / "2.npy", label)
    _nyuv2(folder / "tiny_4x4", {"train": [(4, 4)] * 2, "val": [(4, 4)] * 2})
    _nyuv2(folder / "mixed_sizes", {"train": [(32, 32), (64, 48), (32, 32)], "val": [(32, 32)] * 2})
    # mothernet: mn03 features of +-1e308
    rows = "".join(f"{1e308 if i % 2 else -1e308},{i},{'ab'[i % 2]}\n" for i in range(12))
    (folder / "huge_values.csv").write_text("f1,f2,target\n" + rows)
    # heartlang: hl02 no positive label in any split
    _ptbxl(folder / "labels_all_zero", {split: [[0, 0]] * 4 for split in ("train", "val", "test")}, dtype="int8")
    return folder


@pytest.fixture()
def review_files(valid_files: Path, data_files_once: Path) -> Path:
    """The review's malformed files (:func:`write_review_files`), as ``<project>/review``."""
    (valid_files.parent / "review").symlink_to(data_files_once / "review", target_is_directory=True)
    return valid_files.parent / "review"
