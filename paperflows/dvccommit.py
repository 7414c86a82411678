"""Record several stages in ``dvc.lock`` with one write of the lock file.

``dvc commit --force a b c`` commits each target on its own and rewrites ``dvc.lock`` once per stage: a
round-trip YAML parse and dump of the whole file (about 3 s each for a lock of this project's size, 0.5 MB),
so recording a five-stage pipeline took 15 s. This does what ``dvc commit --force`` does for each stage (save
its hashes, move its outputs into the cache) and writes the lock once, as DVC does for the stages it collects
under a single target. Run by the flow after a workspace run::

    python -m paperflows.dvccommit STAGE [STAGE ...]     # in the DVC repository's root
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path


def commit_stages(names: list[str], root: Path) -> list[str]:
    """Commit the stages ``names`` of the ``dvc.yaml`` of the repository at ``root``; returns the names committed."""
    import logging

    from dvc.repo import Repo, locked

    logging.getLogger("dvc").setLevel(logging.ERROR)  # as `dvc commit --quiet`: errors only

    @locked
    def _commit(repo: Repo) -> list[str]:
        infos = [info for name in names for info in repo.stage.collect_granular(name)]
        by_file: dict[str, tuple[object, list]] = {}
        for info in infos:
            info.stage.save()
            info.stage.commit(filter_info=info.filter_info, relink=True)
            by_file.setdefault(info.stage.dvcfile.path, (info.stage.dvcfile, []))[1].append(info.stage)
        for dvcfile, stages in by_file.values():
            dvcfile.dump_stages(stages, update_pipeline=False)
        return [info.stage.name for info in infos]

    with contextlib.chdir(root), Repo(str(root)) as repo:  # DVC resolves targets against the working directory
        return _commit(repo)


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: python -m paperflows.dvccommit STAGE [STAGE ...]", file=sys.stderr)
        return 2
    from dvc.exceptions import DvcException

    try:
        commit_stages(argv, Path.cwd())
    except DvcException as err:
        print(f"failed to commit {', '.join(argv)}: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
