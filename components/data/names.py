"""The names of the data tables, importable without torch or trimesh (what parameter validation needs).

Each tuple lists, in order, the keys of a table whose entries need the heavy libraries:

* ``TASK_NAMES``: :data:`components.data.images.TASK_TRANSFORMS`, the KnOTS task transforms (torch);
* ``SHAPE_FAMILY_NAMES``: :data:`components.data.shapes.SHAPE_FAMILIES`, the procedural shape families
  (trimesh meshes).
"""

from __future__ import annotations

TASK_NAMES = ("rotate90", "invert", "hflip_relabel", "noise")
SHAPE_FAMILY_NAMES = ("ellipsoid", "torus", "cylinder", "chair", "table", "lamp")
