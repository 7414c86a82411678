"""Utility data the unlearned model was never tuned on, from files gensim ships (read without importing it).

* World facts (TOFU's ``world_facts`` analogue): capital-of-country pairs from the word-analogy file
  ``questions-words.txt`` (sections ``capital-common-countries``, then ``capital-world``), as TOFU rows
  ``question`` "What is the capital of Greece?", ``answer`` "Athens.", ``perturbed_answer`` other capitals.
* General text for perplexity: documents of the Lee news corpus ``lee_background.cor`` (one per line).
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from components.io import package_path

CAPITAL_SECTIONS = ("capital-common-countries", "capital-world")


def _data_file(name: str) -> Path:
    return package_path(
        "gensim",
        f"test/test_data/{name}",
        distribution="gensim==4.4.0",
        needed_for="the world-facts and perplexity utility sets",
    )


def capital_pairs(path: Path | None = None) -> list[tuple[str, str]]:
    """Distinct (country, capital) pairs in file order, well-known capitals first."""
    pairs: dict[str, str] = {}
    section = None
    for line in (path or _data_file("questions-words.txt")).read_text(encoding="utf-8").splitlines():
        if line.startswith(":"):
            section = line[1:].strip()
            continue
        words = line.split()
        if section in CAPITAL_SECTIONS and len(words) == 4:
            for capital, country in ((words[0], words[1]), (words[2], words[3])):
                pairs.setdefault(country, capital)
    return list(pairs.items())


def world_fact_rows(
    n: int, n_perturbed: int, seed: int, path: Path | None = None, skip: int = 0
) -> list[dict[str, Any]]:
    """Capital questions ``skip .. skip + n - 1`` (file order), each with ``n_perturbed`` other capitals (seeded)
    as wrong answers."""
    pairs = capital_pairs(path)
    if not 1 <= n <= len(pairs) - skip or skip < 0 or not 1 <= n_perturbed < len(pairs):
        raise ValueError(
            f"need 1 <= n <= {len(pairs) - skip} and 1 <= n_perturbed < {len(pairs)}, got {n}, {n_perturbed}"
        )
    rng = random.Random(seed)
    capitals = [c for _, c in pairs]
    rows = []
    for country, capital in pairs[skip : skip + n]:
        wrong = rng.sample([c for c in capitals if c != capital], n_perturbed)
        rows.append(
            {
                "question": f"What is the capital of {country}?",
                "answer": f"{capital}.",
                "paraphrased_answer": None,
                "perturbed_answer": [f"{w}." for w in wrong],
                "author": None,
                "attribute": "capital",
                "split": "world_facts",
            }
        )
    return rows


def general_passages(n: int, max_words: int, path: Path | None = None) -> list[str]:
    """The first ``n`` documents of the Lee news corpus, each cut to its first ``max_words`` words."""
    lines = [
        line.split()
        for line in (path or _data_file("lee_background.cor"))
        .read_text(encoding="utf-8", errors="replace")
        .splitlines()
        if line.strip()
    ]
    if not 1 <= n <= len(lines):
        raise ValueError(f"n must be in [1, {len(lines)}], got {n}")
    return [" ".join(words[:max_words]) for words in lines[:n]]
