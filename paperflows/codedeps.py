"""The source files a stage's result depends on, derived from its code (never typed by hand).

``dvc.yaml`` lists them as the stage's deps, so editing any function a stage uses makes ``dvc repro``
rerun that stage and the ones after it, and editing code it does not use leaves it cached.

How: starting from the stage function, every global name its code (and the code of nested functions,
lambdas and comprehensions) refers to is resolved in the function's module. A function or class of the
same paper package is followed in turn (a class through its methods); anything else of the project
(``components``, ``paperflows``, the paper package itself) adds its source file, and the project modules
that file imports, transitively (read from the files, so a lazy import inside a function counts too).
A package's ``__init__.py`` counts for every module under it: it runs on import.
"""

from __future__ import annotations

import ast
import dis
import importlib.util
import inspect
import sys
import types
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from typing import Any

PROJECT_PACKAGES = ("components", "paperflows", "pipelines")
# the engine part that decides what a stage computes: it seeds every stage from its name
ENGINE_MODULES = ("paperflows.seeds",)
SOURCE_ROOT = Path(__file__).resolve().parents[1]  # the folder holding components/, paperflows/, pipelines/


def _is_project(module: str) -> bool:
    return module.split(".")[0] in PROJECT_PACKAGES


@cache
def _module_file(module: str) -> Path | None:
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return None
    return Path(spec.origin).resolve()


def _parents(module: str) -> Iterator[str]:
    parts = module.split(".")
    for i in range(1, len(parts)):
        yield ".".join(parts[:i])


@cache
def _imports_of(module: str) -> tuple[str, ...]:
    """Project modules imported anywhere in ``module``'s source (top level or inside functions)."""
    path = _module_file(module)
    if path is None:
        return ()
    is_package = path.name == "__init__.py"
    tree = ast.parse(path.read_text(), str(path))
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.append(target)
            for alias in node.names:  # `from pkg import submodule`
                if _module_file(f"{target}.{alias.name}") is not None:
                    found.append(f"{target}.{alias.name}")
    return tuple(m for m in dict.fromkeys(found) if m and _is_project(m) and _module_file(m) is not None)


def module_closure(modules: list[str]) -> set[str]:
    """``modules``, their parent packages and every project module they import, transitively."""
    seen: set[str] = set()
    todo = list(modules)
    while todo:
        module = todo.pop()
        if module in seen or not _is_project(module) or _module_file(module) is None:
            continue
        seen.add(module)
        todo += [p for p in _parents(module) if _module_file(p) is not None]
        todo += _imports_of(module)
    return seen


def _code_names(code: types.CodeType) -> Iterator[tuple[str, str | None]]:
    """``(global name, attribute)`` for every global the code loads (the attribute read right after it,
    as in ``helpers.build``, else None) and every module it imports. Attribute names alone are not
    globals, although they share ``co_names``."""
    instructions = list(dis.get_instructions(code))
    for i, ins in enumerate(instructions):
        if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME", "IMPORT_NAME") and isinstance(ins.argval, str):
            following = instructions[i + 1] if i + 1 < len(instructions) else None
            attr = (
                following.argval
                if following is not None
                and following.opname in ("LOAD_ATTR", "LOAD_METHOD")
                and isinstance(following.argval, str)
                else None
            )
            yield ins.argval, attr
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _code_names(const)


def _source_module(value: Any) -> str | None:
    if isinstance(value, types.ModuleType):
        return value.__name__
    module = getattr(value, "__module__", None)
    return module if isinstance(module, str) else None


def referenced_modules(func: Callable[..., Any], package: str) -> set[str]:
    """Project modules whose code or data ``func`` uses; functions/classes of ``package`` are followed."""
    modules: set[str] = set()
    seen: set[int] = set()
    todo: list[Any] = [func]
    while todo:
        obj = todo.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, type):
            modules.add(obj.__module__)
            todo += [
                v
                for v in vars(obj).values()
                if inspect.isfunction(v) or isinstance(v, (property, staticmethod, classmethod))
            ]
            continue
        if isinstance(obj, (staticmethod, classmethod)):
            todo.append(obj.__func__)
            continue
        if isinstance(obj, property):
            todo += [f for f in (obj.fget, obj.fset) if f is not None]
            continue
        if not inspect.isfunction(obj):
            continue
        module = sys.modules.get(obj.__module__)
        modules.add(obj.__module__)
        namespace = vars(module) if module is not None else {}
        imported = _imported_names(obj.__module__)
        for cell in obj.__closure__ or ():
            try:
                todo.append(cell.cell_contents)
            except ValueError:  # an empty cell
                pass
        for name, attr in _code_names(obj.__code__):
            if _is_project(name) and _module_file(name) is not None:  # a lazy `import components.x`
                modules.add(name)
            if name not in namespace:
                continue
            value = namespace[name]
            if name in imported:  # constants (dicts, tuples) carry no module: ask the import statement
                modules.add(imported[name])
            if isinstance(value, types.ModuleType) and (
                _is_project(value.__name__) or value.__name__.startswith(package + ".")
            ):
                modules.add(value.__name__)
                if attr is not None and hasattr(value, attr):  # `helpers.build(...)`: follow `build`
                    value = getattr(value, attr)
                else:
                    continue
            source = _source_module(value)
            if source and (source.startswith(package + ".") or source == package):
                modules.add(source)
                todo.append(value)
            elif source and _is_project(source):
                modules.add(source)
    return {m for m in modules if _is_project(m)}


@cache
def _constants_built_from(module: str) -> frozenset[str]:
    """Project modules whose names build ``module``'s top-level values (``SPEC = ClipSpec(...)``): a function that
    reads such a value depends on them though no call of theirs is in its code."""
    path = _module_file(module)
    if path is None:
        return frozenset()
    imported = _imported_names(module)
    found = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            found |= {imported[n.id] for n in ast.walk(node.value) if isinstance(n, ast.Name) and n.id in imported}
    return frozenset(found)


@cache
def _imported_names(module: str) -> dict[str, str]:
    """``name -> module`` for every ``from <project module> import name`` at the top of ``module``."""
    path = _module_file(module)
    if path is None:
        return {}
    names: dict[str, str] = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.ImportFrom) and node.module and not node.level and _is_project(node.module):
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                names[alias.asname or alias.name] = sub if _module_file(sub) is not None else node.module
    return names


#: modules of a paper package taken with everything they import (their module-level values may be built from it)
WHOLE_PAPER_MODULES = ("params", "plots")


def stage_code_files(func: Callable[..., Any]) -> list[str]:
    """The project source files (relative to the source tree, sorted) that the stage function depends on.

    The paper's code modules (its ``pipeline.py``, which imports every stage's tools, and helper modules beside
    it such as ``training.py``) count as files only: what of them the stage uses was followed function by
    function. The paper's ``params.py`` and ``plots.py`` (their constants may be built from what they import) and
    library modules count with every project module they import.
    """
    package = ".".join(func.__module__.split(".")[:2])  # pipelines.<slug>
    used = referenced_modules(func, package) | set(ENGINE_MODULES)
    own = {m for m in used if m == package or m.startswith(package + ".")}
    own |= {p for m in own for p in _parents(m)}
    followed = {m for m in own if m.startswith(package + ".") and m.rsplit(".", 1)[-1] not in WHOLE_PAPER_MODULES}
    as_files = {func.__module__, f"{package}.pipeline", *followed, *_parents(func.__module__)}
    used |= {m for module in followed for m in _constants_built_from(module)}
    closure = own | module_closure(sorted((used - own) | (own - as_files)))
    files = {_module_file(m) for m in closure}
    root = SOURCE_ROOT
    return sorted(str(f.relative_to(root)) for f in files if f is not None and f.is_relative_to(root))
