"""The card of a paper: what ``pipelines/<slug>/__init__.py`` declares (cheap to import: no torch)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Paper:
    """Which paper a pipeline reproduces, and the claim its report checks."""

    slug: str
    title: str
    arxiv: str
    claim: str

    def __post_init__(self) -> None:
        if not self.slug.isidentifier() or self.slug != self.slug.lower():
            raise ValueError(f"slug '{self.slug}' must be a lower-case Python identifier")

    @property
    def reference(self) -> str:
        """``arXiv 2410.19735`` (or ``no arXiv id`` for a paper without one), as titles cite it."""
        return f"arXiv {self.arxiv}" if self.arxiv else "no arXiv id"
