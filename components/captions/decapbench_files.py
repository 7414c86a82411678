"""DeCapBench's files (MAGAer13/DeCapBench, ``eval/``), read and checked before any work.

* **Oracle file** (``human_annotated_oracle_facts.jsonl``, 400 rows), one JSON object per line:
  ``image_name`` (non-empty string, unique), ``oracle_caption`` (string), ``oracle_facts`` (non-empty list
  of non-empty strings; a fact's id is its position, as the official evaluation numbers them).
* **Candidate file** (the captions to score), one JSON object per line: ``image_path`` (the oracle row's
  ``image_name``), ``caption`` (string), ``oracle_caption`` (string; the official script reads the
  reference caption from the candidate row). Optional: ``human_score`` (a finite number; when every row has
  one, the pipeline correlates the metrics with it).

Blank lines are skipped; text must be UTF-8 (a leading byte-order mark is accepted). The first problem
raises :class:`DecapbenchFormatError` naming the file, the line (1-based) and the field; a refused value is
described by :func:`components.io.quote_value`, never quoted from the file.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from components.io import json_text, quote_value, read_json_lines

SUFFIXES = (".jsonl", ".json")
ORACLE_FIELDS = ("image_name", "oracle_caption", "oracle_facts")
CANDIDATE_FIELDS = ("image_path", "caption", "oracle_caption")


class DecapbenchFormatError(ValueError):
    """A DeCapBench file is unreadable or a row is malformed: ``problem`` says where."""

    def __init__(self, path: str | Path, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path, self.problem = Path(path), problem


@dataclass(frozen=True)
class OracleRow:
    line: int
    image_name: str
    oracle_caption: str
    oracle_facts: tuple[str, ...]


@dataclass(frozen=True)
class CandidateRow:
    line: int
    image_path: str
    caption: str
    oracle_caption: str
    human_score: float | None = None


def _lines(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """(line number, object) of every non-blank line; a file without one is an error."""
    out = read_json_lines(path, lambda problem: DecapbenchFormatError(path, problem))
    if not out:
        raise DecapbenchFormatError(path, "the file holds no rows")
    return out


def _string(path: Path, number: int, record: dict[str, Any], field: str, non_empty: bool) -> str:
    return json_text(record, field, number, lambda problem: DecapbenchFormatError(path, problem), non_empty=non_empty)


def read_oracle_file(path: str | Path) -> list[OracleRow]:
    """The oracle rows in file order; image names are unique."""
    path = Path(path)
    rows, seen = [], {}
    for number, record in _lines(path):
        name = _string(path, number, record, "image_name", non_empty=True)
        caption = _string(path, number, record, "oracle_caption", non_empty=False)
        if "oracle_facts" not in record:
            raise DecapbenchFormatError(path, f"line {number} has no field 'oracle_facts'")
        facts = record["oracle_facts"]
        if not isinstance(facts, list) or not facts:
            raise DecapbenchFormatError(
                path,
                f"line {number} field 'oracle_facts' holds {quote_value(facts)}; expected a non-empty list of strings",
            )
        for i, fact in enumerate(facts):
            if not isinstance(fact, str) or not fact.strip():
                raise DecapbenchFormatError(
                    path,
                    f"line {number} field 'oracle_facts' item {i} holds "
                    f"{quote_value(fact)}; expected a non-empty string",
                )
        if name in seen:
            raise DecapbenchFormatError(
                path, f"line {number} field 'image_name' repeats the image of line {seen[name]}"
            )
        seen[name] = number
        rows.append(OracleRow(number, name, caption, tuple(facts)))
    return rows


def read_candidate_file(path: str | Path) -> list[CandidateRow]:
    """The candidate rows in file order (their index is the ``<idx>`` of the per-caption details)."""
    path = Path(path)
    rows = []
    for number, record in _lines(path):
        values = {f: _string(path, number, record, f, non_empty=f == "image_path") for f in CANDIDATE_FIELDS}
        score = record.get("human_score")
        if score is not None and (
            isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score)
        ):
            raise DecapbenchFormatError(
                path, f"line {number} field 'human_score' holds {quote_value(score)}; expected a finite number"
            )
        rows.append(
            CandidateRow(
                number,
                values["image_path"],
                values["caption"],
                values["oracle_caption"],
                None if score is None else float(score),
            )
        )
    return rows


def join_candidates(
    candidates: list[CandidateRow], oracle: list[OracleRow], candidates_path: str | Path
) -> list[tuple[CandidateRow, OracleRow]]:
    """Each candidate with its oracle row (matched by image name); a candidate of an unknown image is an error
    naming its line."""
    by_name = {r.image_name: r for r in oracle}
    out = []
    for row in candidates:
        if row.image_path not in by_name:
            raise DecapbenchFormatError(
                candidates_path, f"line {row.line} field 'image_path' names an image that the oracle file does not hold"
            )
        out.append((row, by_name[row.image_path]))
    return out


def _check(reader: Any, path: str | Path) -> int:
    if Path(path).suffix.lower() not in SUFFIXES:
        raise ValueError(f"expected a JSON Lines file ending in one of {SUFFIXES}, got '{Path(path).suffix}'")
    try:
        return len(reader(path))
    except DecapbenchFormatError as err:
        raise ValueError(err.problem) from None


def check_oracle_file(path: str | Path) -> int:
    """Validate an oracle file as :func:`read_oracle_file` reads it; the number of rows. The ``ValueError``
    names the line and the field (the caller names the file)."""
    return _check(read_oracle_file, path)


def check_candidate_file(path: str | Path) -> int:
    """Validate a candidate file as :func:`read_candidate_file` reads it; the number of rows."""
    return _check(read_candidate_file, path)


def read_benchmark(
    oracle_path: str | Path, candidates_path: str | Path
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The oracle rows and the candidate rows (joined to their oracle row, with ``seed`` None, ``words`` and
    ``human_score``), as the pipeline writes them; raises :class:`DecapbenchFormatError`."""
    oracle = read_oracle_file(oracle_path)
    pairs = join_candidates(read_candidate_file(candidates_path), oracle, candidates_path)
    return (
        [
            {"image_name": o.image_name, "oracle_caption": o.oracle_caption, "oracle_facts": list(o.oracle_facts)}
            for o in oracle
        ],
        [
            {
                "image_path": r.image_path,
                "caption": r.caption,
                "oracle_caption": r.oracle_caption,
                "human_score": r.human_score,
                "seed": None,
                "words": len(r.caption.split()),
                "line": r.line,
            }
            for r, _ in pairs
        ],
    )


def benchmark_summary(oracle: list[dict[str, Any]], candidates: list[dict[str, Any]]) -> dict[str, float]:
    """Counts and means of a written benchmark (the synthetic world's truth columns when present)."""
    summary = {
        "images": float(len(oracle)),
        "captions": float(len(candidates)),
        "oracle_facts_mean": sum(len(o["oracle_facts"]) for o in oracle) / max(1, len(oracle)),
        "words_mean": sum(r["words"] for r in candidates) / max(1, len(candidates)),
    }
    for key in ("precision_true", "coverage_true"):
        if candidates and key in candidates[0]:
            summary[f"{key}_mean"] = sum(r[key] for r in candidates) / len(candidates)
    return summary


def missing_images(candidates: list[dict[str, Any]], folder: Path) -> list[int]:
    """Lines of the candidates whose image is not a file in ``folder``."""
    return [r["line"] for r in candidates if not (folder / r["image_path"]).is_file()]


IMAGE_SIGNATURES = {
    ".jpg": (b"\xff\xd8\xff",),
    ".jpeg": (b"\xff\xd8\xff",),
    ".png": (b"\x89PNG\r\n\x1a\n",),
    ".gif": (b"GIF87a", b"GIF89a"),
    ".webp": (b"RIFF",),
}


def check_image_folder(folder: str | Path) -> int:
    """A folder of the benchmark's images (IIW-400's ``aar_test_NNNNN.jpg``): at least one image file, and every
    file with an image suffix starts with that format's signature (nothing else is ever sent as an image).
    Returns the number of images; the ``ValueError`` names the offending file."""
    folder = Path(folder)
    images = sorted(f for f in folder.iterdir() if f.is_file() and f.suffix.lower() in IMAGE_SIGNATURES)
    if not images:
        raise ValueError(
            f"holds no image file (expected names such as aar_test_04746.jpg, suffixes {', '.join(IMAGE_SIGNATURES)})"
        )
    for image in images:
        with image.open("rb") as handle:
            head = handle.read(12)
        if not head.startswith(IMAGE_SIGNATURES[image.suffix.lower()]) or (
            image.suffix.lower() == ".webp" and head[8:12] != b"WEBP"
        ):
            raise ValueError(f"{image.name} does not start like a {image.suffix.lower().lstrip('.')} image")
    return len(images)
