"""Seeds derived from names: every stage (and every purpose inside a stage) gets its own stream.

A stage is seeded from ``<slug>:<stage>`` before it runs, so ``dvc repro`` (one process per stage) and
the Prefect flow (every stage in one process) compute the same numbers. Inside a stage,
:func:`derive_seed` replaces ad-hoc offsets such as ``10_000 + seed``, which collide by accident.
"""

from __future__ import annotations

import hashlib

from components.seeding import seed_everything

__all__ = ["derive_seed", "seed_everything", "stage_seed"]


def _hash32(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "little")


def stage_seed(slug: str, stage: str) -> int:
    """A fixed seed per stage, derived from its name."""
    return _hash32(f"{slug}:{stage}")


def derive_seed(seed: int, *names: object) -> int:
    """A seed for one purpose of one run: ``derive_seed(seed, "noise")``, ``derive_seed(seed, "head", task)``.

    Distinct names give independent 32-bit seeds; the same (seed, names) always gives the same one.
    """
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int, got {seed!r}")
    return _hash32(":".join([str(seed), *map(str, names)]))
