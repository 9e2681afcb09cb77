"""The session files of a folder at a commit, and the merge driver for them in this clone.

Session files and archive parts sit one folder down (``sessions/<xx>/<id>.md``, see
``format/paths.py``).
"""

from __future__ import annotations

from gitmem.store.objects import MODE_TREE
from gitmem.store.repository import Repository


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
    b"# gitmem: files in sub-folders merge with the gitmem driver too\n"
    b"sessions/**/*.md merge=gitmem\narchive/**/*.md merge=gitmem\n"
)
# the curated memory file merges by fact id also in stores made before it existed (their
# .gitattributes gains the line with the first fact, maybe on one side of a merge only)
_LOCAL_MEMORY = b"# gitmem: the curated memory file merges by fact id\nmemory/*.md merge=gitmem\n"


def ensure_local_attributes(repo: Repository) -> None:
    """Name the merge driver for session and memory files in ``.git/info/attributes``, so
    that a plain ``git merge`` uses it whatever the committed ``.gitattributes`` says. Local,
    like the driver config."""
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
