"""The lock of an output folder: one process writes a folder at a time.

Light on purpose (no torch, no MLflow): the supervising ``paperflows run`` takes the locks of the workspaces
its children will write before anything starts, and hands them down through the environment.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from paperflows.errors import RunLockedError
from paperflows.settings import Settings

HELD_LOCKS_ENV = "PAPERFLOWS_HELD_LOCKS"  # output folders whose lock the supervising `paperflows run` holds


def lock_path(settings: Settings, root: Path) -> Path:
    """The lock file of the output folder ``root`` (under the project's ``.paperflows/locks/``)."""
    project, folder = settings.root.resolve(), root.resolve()
    rel = str(folder.relative_to(project)) if folder.is_relative_to(project) else str(folder)
    return settings.root / ".paperflows" / "locks" / (rel.strip("/").replace("/", "__") + ".lock")


@contextlib.contextmanager
def output_lock(settings: Settings, root: Path) -> Iterator[None]:
    """Refuse to let two processes write the same output folder at once (:class:`RunLockedError`).

    A process started by a supervisor that already holds the lock of ``root`` (listed in
    ``$PAPERFLOWS_HELD_LOCKS``) does not take it again.
    """
    path = lock_path(settings, root)
    if str(path) in os.environ.get(HELD_LOCKS_ENV, "").split(os.pathsep):
        yield
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RunLockedError(f"another run is writing {root}; wait for it to finish") from None
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextlib.contextmanager
def hold_output_locks(settings: Settings, roots: list[Path]) -> Iterator[dict[str, str]]:
    """Take the lock of every folder in ``roots`` (all or none) and yield the environment that tells child
    processes they hold them. A lock that is taken raises :class:`RunLockedError` before anything starts."""
    with contextlib.ExitStack() as stack:
        for root in roots:
            stack.enter_context(output_lock(settings, root))
        yield {HELD_LOCKS_ENV: os.pathsep.join(str(lock_path(settings, r)) for r in roots)}
