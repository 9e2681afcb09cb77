"""Which layout a commit's session files use, where a session's file is, and the move.

A fan-out store says so in its committed ``.gitmem-layout`` (see ``format/paths.py``); a store
made before has none and stays flat until ``gitmem migrate`` moves every session file and
archive part, of every namespace, in one commit. The move goes through the transaction like
any save, so a migration killed half-way leaves the old layout or the new one, never a mix.
Reading accepts both layouts: a session's file is looked for in its commit's layout first
and in the other one next (a flat file that a plain ``git merge`` brought into a fan-out
store keeps working until the next ``migrate``), so one session never has two files.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gitmem.errors import ConflictError, InvalidSessionId
from gitmem.format.paths import (
    LAYOUT_FILE,
    archive_path,
    decode_id,
    layout_text,
    parse_layout,
    relocated,
    session_path,
)
from gitmem.store.objects import MODE_TREE
from gitmem.store.repository import Repository

# .gitattributes lines of flat stores; ``**`` also matches files in sub-folders
_OLD_ATTRIBUTES = {b"sessions/*.md ": b"sessions/**/*.md ", b"archive/*.md ": b"archive/**/*.md "}

# blob id of a .gitmem-layout -> fan-out or not (a handful of distinct blobs ever)
_PARSED: dict[str, bool] = {}


def fanout_at(repo: Repository, commit: str | None = None) -> bool:
    """Whether the store's files at ``commit`` (default HEAD) use the fan-out layout."""
    found = repo.entry(LAYOUT_FILE, commit)
    if found is None:
        return False
    known = _PARSED.get(found[1])
    if known is None:
        known = _PARSED[found[1]] = parse_layout(repo.blob(found[1]))
    return known


def locate(
    repo: Repository,
    session_id: str,
    namespace: str | None = None,
    commit: str | None = None,
    *,
    archive: bool = False,
) -> str:
    """The path of a session's file (``archive``: its archive part) at ``commit``: in that
    commit's layout, unless only the other layout has it."""
    make = archive_path if archive else session_path
    fanout = fanout_at(repo, commit)
    preferred = make(session_id, namespace, fanout=fanout)
    if repo.entry(preferred, commit) is None:
        other = make(session_id, namespace, fanout=not fanout)
        if repo.entry(other, commit) is not None:
            return other
    return preferred


def session_files(repo: Repository, folder: str, commit: str | None = None) -> dict[str, str]:
    """Path -> blob id of the files in ``folder`` and in its fan-out sub-folders."""
    tree = repo.folder_tree(folder, commit)
    if tree is None:
        return {}
    out: dict[str, str] = {}
    for raw, (mode, sha) in tree.entries.items():
        name = raw.decode("utf-8", "surrogateescape")
        if mode != MODE_TREE:
            out[f"{folder}/{name}"] = sha.hex()
        elif len(name) == 2:
            for sub, (sub_mode, sub_sha) in repo.tree(sha.hex()).entries.items():
                if sub_mode != MODE_TREE:
                    out[f"{folder}/{name}/{sub.decode('utf-8', 'surrogateescape')}"] = sub_sha.hex()
    return out


_LOCAL_ATTRIBUTES = (
    b"# gitmem: files in sub-folders merge with the gitmem driver too, also\n"
    b"# while this clone's .gitattributes is still the flat one\n"
    b"sessions/**/*.md merge=gitmem\narchive/**/*.md merge=gitmem\n"
)
# the curated memory file merges by fact id also in stores made before it existed (their
# .gitattributes gains the line with the first fact, maybe on one side of a merge only)
_LOCAL_MEMORY = b"# gitmem: the curated memory file merges by fact id\nmemory/*.md merge=gitmem\n"


def ensure_local_attributes(repo: Repository) -> None:
    """Name the merge driver for fan-out paths in ``.git/info/attributes``: a flat clone's
    ``.gitattributes`` says ``sessions/*.md``, which a plain ``git merge`` of a migrated
    clone (files renamed into sub-folders) would not match. Local, like the driver config."""
    target = repo.git_dir / "info" / "attributes"
    try:
        current = target.read_bytes() if target.exists() else b""
        missing = [
            lines
            for lines, marker in (
                (_LOCAL_ATTRIBUTES, b"sessions/**/*.md merge="),
                (_LOCAL_MEMORY, b"memory/*.md merge="),
            )
            if marker not in current
        ]
        if not missing:
            return
        target.parent.mkdir(exist_ok=True)
        if current and not current.endswith(b"\n"):
            current += b"\n"
        target.write_bytes(current + b"".join(missing))
    except OSError:
        return  # a read-only store can still be read


def layout_mismatch(root: str, other: str, fanout_here: bool) -> str:
    """Why a merge of two stores in different layouts stops, and what to do."""
    if fanout_here:
        return (
            f"{root} uses the fan-out layout (sessions/<xx>/<id>.md) but {other} is still "
            "flat: run `gitmem migrate` in that store and push, then sync again. "
            "Nothing was changed."
        )
    return (
        f"{other} was moved to the fan-out layout (sessions/<xx>/<id>.md) but {root} is "
        "still flat: run `gitmem migrate` here first, then sync again. Nothing was changed."
    )


@dataclass
class Migration:
    """What ``migrate`` moved (or, in a dry run, would move): (old path, new path) pairs."""

    moves: list[tuple[str, str]] = field(default_factory=list)
    commit: str | None = None
    dry_run: bool = False
    marker: bool = False  # .gitmem-layout written (or to be)
    attributes: bool = False  # .gitattributes patterns widened to sub-folders

    @property
    def nothing_to_do(self) -> bool:
        return not (self.moves or self.marker or self.attributes)


def _namespace_of(path: str) -> tuple[bool, str | None]:
    """(is in a namespace folder that decodes, that namespace or None)."""
    if not path.startswith("namespaces/"):
        return True, None
    parts = path.split("/")
    try:
        return len(parts) > 2, decode_id(parts[1])
    except InvalidSessionId:
        return False, None


def plan_moves(repo: Repository, commit: str | None) -> list[tuple[str, str]]:
    """(old, new) for every flat session file and archive part at ``commit``."""
    moves: list[tuple[str, str]] = []
    for path in sorted(repo.diff_trees(None, commit) if commit else {}):
        ok, namespace = _namespace_of(path)
        if ok:
            new = relocated(path, True, namespace)
            if new != path:
                moves.append((path, new))
    return moves


def _attributes(current: bytes) -> bytes:
    lines = current.split(b"\n")
    for at, line in enumerate(lines):
        for old, new in _OLD_ATTRIBUTES.items():
            if line.startswith(old):
                lines[at] = new + line[len(old) :]
    return b"\n".join(lines)


def migrate(
    repo: Repository,
    *,
    dry_run: bool = False,
    subject: str = "",
    trailers: dict[str, str] | None = None,
) -> Migration:
    """Move every flat session file and archive part to the fan-out layout in one commit
    (``Gitmem-Op: migrate``), with ``.gitmem-layout`` and widened ``.gitattributes``.

    A second run finds nothing to do. Raises ConflictError, writing nothing, when a file
    to move has uncommitted hand edits (``gitmem check`` and a commit first).
    """
    with repo.transaction() as txn:

        def work() -> Migration:
            head = txn.head()
            result = Migration(moves=plan_moves(repo, head), dry_run=dry_run)
            result.marker = not fanout_at(repo, head) if head else True
            attributes = txn.read(".gitattributes")
            widened = None if attributes is None else _attributes(attributes)
            result.attributes = widened != attributes
            if dry_run or result.nothing_to_do:
                return result
            dirty = repo.unclean_paths([p for move in result.moves for p in move])
            if dirty:
                raise ConflictError(
                    f"{repo.root}: uncommitted changes in {', '.join(dirty[:5])} would be lost "
                    "by the move; commit them (or `git restore` them) and run `gitmem migrate` "
                    "again. Nothing was changed."
                )
            for old, new in result.moves:
                data = repo.read(old, head)
                assert data is not None
                txn.write(new, data)
                txn.delete(old)
            if result.marker:
                txn.write(LAYOUT_FILE, layout_text())
            if widened is not None and result.attributes:
                txn.write(".gitattributes", widened)
            count = len(result.moves)
            body = (
                f"Moves {count} session file(s) and archive part(s) from sessions/<id>.md "
                "to sessions/<xx>/<id>.md (xx: see .gitmem-layout), so that a save "
                "rewrites small trees. The content of every file is unchanged."
            )
            result.commit = txn.commit(
                subject or "Move session files to the fan-out layout",
                body=body,
                trailers={**(trailers or {}), "Gitmem-Op": "migrate", "Gitmem-Moved": str(count)},
            )
            return result

        return txn.rebuilding(work)
