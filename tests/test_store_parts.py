"""``Repository`` is one class over parts, each owning its state; ``Transaction`` writes
through them by name, inheriting nothing."""

from __future__ import annotations

import ast
from pathlib import Path

from gitmem.store.git import GitCommands
from gitmem.store.indexfile import GitIndexFile
from gitmem.store.locks import WriteLock
from gitmem.store.objects import Authors, ObjectDatabase
from gitmem.store.recovery import Recovery
from gitmem.store.repository import Repository
from gitmem.store.revisions import Refs, Revisions
from gitmem.store.scratch import TempFiles
from gitmem.store.transaction import Transaction
from gitmem.store.worktree import WorkTree

STORE = Path(__file__).resolve().parent.parent / "gitmem" / "store"

PARTS = {
    "runner": GitCommands,
    "objects": ObjectDatabase,
    "refs": Refs,
    "revisions": Revisions,
    "worktree": WorkTree,
    "index": GitIndexFile,
    "lock": WriteLock,
    "recovery": Recovery,
    "authors": Authors,
    "temps": TempFiles,
}


def test_repository_is_one_class_over_parts(tmp_path: Path) -> None:
    assert len(Repository.__mro__) <= 3
    repo = Repository.init(tmp_path / "store")
    try:
        for name, kind in PARTS.items():
            part = getattr(repo, name)
            assert type(part) is kind, name
            assert type(part).__bases__ == (object,), name
            # a part holds what it needs, never the whole store
            assert all(not isinstance(v, Repository) for v in vars(part).values()), name
        with repo.transaction() as txn:
            assert txn.objects is repo.objects and txn.refs is repo.refs
            assert txn.index is repo.index and txn.lock is repo.lock
    finally:
        repo.close()


def test_transaction_subclasses_nothing() -> None:
    assert Transaction.__bases__ == (object,)


def test_no_stub_under_type_checking_in_the_store() -> None:
    found = []
    for path in sorted(STORE.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                stubs = [n.name for n in ast.walk(node) if isinstance(n, ast.FunctionDef)]
                found += [f"{path.name}:{node.lineno}: stub {name}" for name in stubs]
    assert found == []
