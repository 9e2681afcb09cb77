"""Which folder is the store, and whether a git repository is a gitmem store at all.

gitmem commits into the branch that is checked out, so opening the wrong repository is
costly: a code repository would get ``sessions/`` commits on the user's branch, and a clone
whose HEAD names a branch with no commits would start an unrelated root history that a
``push`` then publishes. A store is recognised by what ``gitmem init`` commits and every
clone carries: a ``.gitattributes`` at the branch tip naming the ``gitmem`` merge driver.
``gitmem init --here`` (``MemoryManager.init(path, adopt=True)``) adds it to an existing
repository on purpose. Run without ``--repo``, the CLI finds the store above the current
folder as git does; an explicit path must be the store's top folder.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import Any

from gitmem.errors import NotAStore, RepositoryError
from gitmem.format.paths import LAYOUT_FILE, SESSIONS_DIR, layout_text
from gitmem.store.git import run_git
from gitmem.store.repository import GITATTRIBUTES, Repository

MARKER = b"merge=gitmem"


def find_store(start: str | os.PathLike[str] = ".") -> str:
    """The top folder of the repository containing ``start`` (found as git finds it),
    or ``start`` itself when it is in none (opening it then says why)."""
    if (Path(start) / ".git").exists():
        return os.fspath(start)  # the usual case, without a git process
    try:
        done = run_git(start, "rev-parse", "--show-toplevel", ok=None)
    except RepositoryError:  # no such folder: opening it says so
        return os.fspath(start)
    top = done.stdout.strip()
    return top if done.returncode == 0 and top else os.fspath(start)


def marks_store(attributes: bytes) -> bool:
    """True if a ``.gitattributes`` text gives some pattern ``merge=gitmem`` (an attribute
    line, not a comment or other text that merely contains the words)."""
    for line in attributes.splitlines():
        fields = line.split()
        if fields and not fields[0].startswith(b"#") and MARKER in fields[1:]:
            return True
    return False


def is_store_commit(repo: Repository, commit: str) -> bool:
    """True if ``commit``'s tree marks a gitmem store (``.gitattributes`` with the driver)."""
    return marks_store(repo.read(".gitattributes", commit) or b"")


def store_problem(repo: Repository) -> tuple[str, str] | None:
    """None for a gitmem store, else (kind, message) with kind ``foreign`` (commits, no
    marker), ``unborn`` (no commits on HEAD's branch, other branches exist) or ``empty``."""
    head = repo.head()
    where = repo.root
    if head is not None:
        # the committed file only: an untracked or edited one proves nothing
        if is_store_commit(repo, head):
            return None
        return "foreign", (
            f"{where} is not a gitmem store: it is a git repository whose checked-out commit "
            f"({head[:12]}) has no .gitattributes with merge=gitmem, so gitmem will not "
            "commit sessions into it. Use a folder of its own (`gitmem init PATH`), or make "
            f"this repository a store on purpose: `gitmem --repo {shlex.quote(str(where))} init "
            "--here` "
            "(MemoryManager.init(path, adopt=True))"
        )
    branch = repo.branch_ref().removeprefix("refs/heads/")
    others = [
        name.removeprefix("refs/heads/").removeprefix("refs/remotes/")
        for name in {**repo.refs("refs/heads/"), **repo.refs("refs/remotes/")}
        if not name.endswith("/HEAD")
    ]
    if others:
        return "unborn", (
            f"{where}: the checked-out branch {branch!r} has no commits, but the repository "
            f"has {', '.join(sorted(others))}; saving here would start an unrelated history. "
            "Check out the memory branch first (e.g. `git checkout main`)"
        )
    return "empty", (
        f"{where} is an empty git repository, not a gitmem store yet; create the store "
        "with `gitmem init` (MemoryManager.init(path))"
    )


def adopt(repo: Repository) -> None:
    """Make an existing repository a store on purpose: one commit adding the gitmem merge
    attributes to its ``.gitattributes`` (kept otherwise as it is) and, unless it already
    has a ``sessions/`` folder, the fan-out layout file every new store gets."""
    with repo.transaction() as txn:

        def write() -> None:
            current = txn.read(".gitattributes") or b""
            if marks_store(current):
                return
            if current and not current.endswith(b"\n"):
                current += b"\n"
            txn.write(".gitattributes", current + GITATTRIBUTES.encode())
            if txn.read(LAYOUT_FILE) is None and repo.entry(SESSIONS_DIR, txn.head()) is None:
                txn.write(LAYOUT_FILE, layout_text())  # no session files yet: fan out
            txn.commit("Adopt this repository as a gitmem store", trailers={"Gitmem-Op": "init"})

        txn.rebuilding(write)  # a person's edit of .gitattributes meanwhile is kept


def open_repository(
    path: str | os.PathLike[str], *, init: bool = False, adopt_it: bool = False, **options: Any
) -> Repository:
    """The store at ``path``, created with ``init`` (an existing repository is adopted
    only with ``adopt_it``).

    Raises:
        NotAStore: ``path`` is a repository but not a gitmem store (the message says what
            to do).
        RepositoryError: no repository at ``path`` (or only an enclosing one).
    """
    root = Path(path)
    if init and not (root / ".git").exists():
        return Repository.init(root, **options)
    try:
        repo = Repository(root, **options)
    except RepositoryError as exc:
        raise _inside(root) or exc from None
    problem = store_problem(repo)
    if problem is None:
        return repo
    kind, message = problem
    if init and (kind == "empty" or (kind == "foreign" and adopt_it)):
        if kind == "foreign":
            adopt(repo)
            return repo
        repo.close()
        return Repository.init(root, **options)
    repo.close()
    raise NotAStore(message)


def _inside(root: Path) -> RepositoryError | None:
    if not root.is_dir():
        return None
    top = find_store(root)
    if Path(top).resolve() == root.resolve():
        return None
    return RepositoryError(
        f"{root.resolve()} is a folder inside the repository at {top}; open {top} itself "
        "(run without --repo, gitmem finds it from any folder inside)"
    )
