"""The papers, discovered: every package ``pipelines/<slug>/`` is one pipeline; nothing is listed by hand.

A slug is the one name used everywhere: the package ``pipelines/<slug>/``, the ``params.yaml`` section,
the DVC stage prefix, the MLflow experiment and the Prefect flow/deployment.

Two levels of loading keep commands fast and papers independent:

* :func:`papers` reads each package's ``__init__`` only (``ABOUT``: title, arXiv id, claim; no torch, no
  paper code), which is all that ``paperflows list`` and ``--help`` need.
* :func:`get` imports ``pipelines.<slug>.pipeline`` (the stages and their libraries) on first use. A paper
  whose module fails to import raises :class:`PipelineImportError` naming the slug and the error;
  :func:`load_all` returns the others and reports the broken ones, so one broken paper never stops the rest.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import traceback
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from paperflows.paper import Paper

if TYPE_CHECKING:
    from paperflows.contract import Pipeline

PACKAGE = "pipelines"


class UnknownPipelineError(KeyError):
    def __str__(self) -> str:  # KeyError quotes its message; show it plainly
        return self.args[0]


class PipelineImportError(ImportError):
    """A paper package exists but its module does not import (or has no valid ``PIPELINE``)."""

    def __init__(self, slug: str, detail: str):
        super().__init__(f"pipeline '{slug}' failed to load: {detail}")
        self.slug, self.detail = slug, detail


@dataclass(frozen=True)
class Registry:
    """The paper packages under one importable package (``pipelines`` in a project; a fixture in tests)."""

    package: str = PACKAGE

    def folder(self) -> Path:
        spec = importlib.util.find_spec(self.package)
        if spec is None or not spec.submodule_search_locations:
            raise UnknownPipelineError(f"no package '{self.package}' to discover pipelines in")
        return Path(next(iter(spec.submodule_search_locations)))

    def slugs(self) -> list[str]:
        """Every ``<package>/<slug>/`` with an ``__init__.py`` and a ``pipeline.py``, sorted."""
        root = self.folder()
        return sorted(
            p.name
            for p in root.iterdir()
            if p.is_dir()
            and not p.name.startswith(("_", "."))
            and (p / "__init__.py").is_file()
            and (p / "pipeline.py").is_file()
        )

    def check(self, slug: str) -> None:
        known = self.slugs()
        if slug not in known:
            raise UnknownPipelineError(f"unknown pipeline '{slug}'; known: {', '.join(known)}")

    def _import(self, slug: str, name: str) -> Any:
        """Import one module of a known paper; any error becomes a :class:`PipelineImportError` naming it."""
        self.check(slug)
        try:
            return importlib.import_module(name)
        except Exception as err:  # noqa: BLE001 - reported by name, never fatal to the other papers
            sys.modules.pop(name, None)
            raise PipelineImportError(slug, _one_line(err)) from err

    def paper(self, slug: str) -> Paper:
        """The package's ``ABOUT`` card, without importing its stages."""
        about = getattr(self._import(slug, f"{self.package}.{slug}"), "ABOUT", None)
        if not isinstance(about, Paper) or about.slug != slug:
            raise PipelineImportError(
                slug, f"{self.package}/{slug}/__init__.py must define ABOUT = Paper(slug='{slug}', ...)"
            )
        return about

    def params_model(self, slug: str) -> type:
        """The paper's params model from ``<slug>/params.py`` alone (validating needs no stage code)."""
        from paperflows.params import PipelineParams

        name = f"{self.package}.{slug}.params"
        module = self._import(slug, name)
        found = [
            v
            for v in vars(module).values()
            if isinstance(v, type) and issubclass(v, PipelineParams) and v.__module__ == name
        ]
        if len(found) != 1:
            raise PipelineImportError(
                slug, f"{name} must define exactly one PipelineParams model, found {[m.__name__ for m in found]}"
            )
        return found[0]

    def get(self, slug: str) -> Pipeline:
        """The paper's full declaration (imports its stages and their libraries)."""
        self.check(slug)  # an unknown slug is refused before the engine (and torch) is imported
        from paperflows.contract import Pipeline

        name = f"{self.package}.{slug}.pipeline"
        module = self._import(slug, name)
        pipeline = getattr(module, "PIPELINE", None)
        if not isinstance(pipeline, Pipeline) or pipeline.slug != slug:
            raise PipelineImportError(slug, f"{name} must define PIPELINE = Pipeline(...) for '{slug}'")
        return pipeline

    def load_all(self) -> tuple[list[Pipeline], dict[str, PipelineImportError]]:
        """Every pipeline that imports, and the errors of those that do not (by slug)."""
        loaded, broken = [], {}
        for slug in self.slugs():
            try:
                loaded.append(self.get(slug))
            except PipelineImportError as err:
                broken[slug] = err
        return loaded, broken


def _one_line(err: BaseException) -> str:
    frames = traceback.extract_tb(err.__traceback__)
    where = f" ({frames[-1].filename}:{frames[-1].lineno})" if frames else ""
    return f"{type(err).__name__}: {err}{where}"


@cache
def default() -> Registry:
    return Registry()


def slugs() -> list[str]:
    return default().slugs()


def get(slug: str) -> Pipeline:
    return default().get(slug)


def paper(slug: str) -> Paper:
    return default().paper(slug)


def params_model(slug: str) -> type:
    return default().params_model(slug)


def load_all() -> tuple[list[Pipeline], dict[str, PipelineImportError]]:
    return default().load_all()


def all_pipelines() -> list[Pipeline]:
    """Every pipeline; raises the first :class:`PipelineImportError` (for generators that need them all)."""
    loaded, broken = load_all()
    if broken:
        raise next(iter(broken.values()))
    return loaded
