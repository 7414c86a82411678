"""Append the default parameters of newly registered pipelines to params.yaml (existing sections,
including any values edited by hand, are left exactly as they are).

    python scripts/add-params-section.py
"""

from __future__ import annotations

import yaml

from paperflows import registry
from paperflows.settings import load_settings


def main() -> None:
    path = load_settings().params_file
    text = path.read_text()
    present = set(yaml.safe_load(text) or {})
    missing = {
        p.slug: p.params_model().model_dump(mode="json") for p in registry.all_pipelines() if p.slug not in present
    }
    if missing:
        path.write_text(text.rstrip("\n") + "\n" + yaml.safe_dump(missing, sort_keys=False, width=110))
    print(f"added sections: {', '.join(missing) or 'none'}")


if __name__ == "__main__":
    main()
