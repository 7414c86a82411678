"""No file a user names is ever unpickled: a pickle payload given to every data-path parameter is refused.

For each path parameter (``DataFile``) of every pipeline, a pickle whose loading would create a marker
folder is written under the names the check reads: the file itself under every suffix the readers know,
gzip-compressed too, or, for a folder, every file of the folder's documented layout. The CLI must exit
2 naming the parameter, and the marker must not exist.
"""

from __future__ import annotations

import gzip
import os
import pickle
from pathlib import Path

import pytest

from paperflows import registry
from paperflows.params import DataFile, data_file_fields

SUFFIXES = (
    "",
    ".pkl",
    ".pickle",
    ".gz",
    ".pkl.gz",
    ".npy",
    ".npz",
    ".csv",
    ".json",
    ".jsonl",
    ".parquet",
    ".safetensors",
)


class Payload:
    """Unpickling this calls ``os.mkdir(marker)``."""

    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        return os.mkdir, (self.marker,)


def payload(marker: Path, compressed: bool) -> bytes:
    raw = pickle.dumps(((Payload(marker), Payload(marker)), (1, 2), (3, 4)))
    return gzip.compress(raw) if compressed else raw


# settings a path parameter needs beside it to pass the params model's own rules (a solutions file has no step
# labels, so tvm refuses its PRM verifier with one)
COMPANIONS = {("tvm", "data.solutions_path"): ["--set", "verifier.kinds=[orm,tvm]"]}


def path_parameters() -> list[tuple[str, str, DataFile]]:
    return [
        (slug, dotted, spec)
        for slug in registry.slugs()
        for dotted, spec in data_file_fields(registry.params_model(slug))
    ]


def test_every_pipeline_with_real_data_declares_its_paths() -> None:
    found = {slug for slug, _, _ in path_parameters()}
    assert {"hrf", "nsot", "nutribench", "mm_ego"} <= found, found
    folders = [(slug, key) for slug, key, spec in path_parameters() if spec.folder and not spec.layout]
    assert folders == [], "a folder parameter must list the files it reads (DataFile.layout)"


@pytest.mark.parametrize(("slug", "key", "spec"), path_parameters(), ids=lambda v: v if isinstance(v, str) else "")
def test_a_pickle_payload_on_a_path_parameter_is_refused(
    slug: str, key: str, spec: DataFile, cli_project: Path, refused
) -> None:
    marker = cli_project.parent / "PWNED"
    targets: list[str] = []
    if spec.folder:
        folder = cli_project / "evil"
        for rel in spec.layout:
            target = folder / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(payload(marker, compressed=rel.endswith(".gz")))
        targets.append("evil")
    else:
        for suffix in SUFFIXES:
            name = f"evil{suffix}"
            (cli_project / name).write_bytes(payload(marker, compressed=suffix.endswith("gz")))
            targets.append(name)
    for target in targets:
        outcome = refused(["run", slug, "--set", f"{key}={target}", *COMPANIONS.get((slug, key), [])])
        assert not marker.exists(), f"{slug}.{key}={target}: the payload ran"
        assert outcome.code == 2 and f"{slug}.{key}" in outcome.output, (target, outcome.output)
        assert outcome.reached == [] and not outcome.traceback, (target, outcome)
