"""The git merge driver for session files: ``python -P -m gitmem.sync.driver %O %A %B %P``.

git runs it once per file that both sides changed (``merge=gitmem`` in ``.gitattributes``,
``merge.gitmem.driver`` in the clone's config), so a ``git pull`` touching many sessions pays
its start once per file. A memory file in gitmem's own form is merged line by line
(:mod:`gitmem.format.factlines`), and a session in it by turn block
(:mod:`gitmem.format.sessionlines`), without the models; anything else imports only the merge
and the Markdown parser, not the manager nor the CLI; the secret patterns and the git runner
only when a merge has notes to print or falls back to git's line merge (the store's secret
settings come from one ``git config`` call: git runs the driver in the repository).
``gitmem merge-file`` and ``python -m gitmem merge-file`` (what stores registered before)
run the same code.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from gitmem.errors import ConflictError, ParseError

if TYPE_CHECKING:
    from gitmem.guard.secrets import SecretConfig
    from gitmem.sync.merge import MergeNote

USAGE = "usage: gitmem merge-file BASE OURS THEIRS PATH   (git passes %O %A %B %P)"


def store_secrets() -> tuple[SecretConfig, str | None]:
    """The secret patterns of the store git runs the driver in (``gitmem.secrets.*``, as the
    manager reads them), and a warning when that config is unusable (the defaults are used:
    a pull must not fail over a note)."""
    from gitmem.guard.secrets import DEFAULT_CONFIG, SecretConfig
    from gitmem.store.git import run_git

    done = run_git(None, "config", "--get-regexp", r"^gitmem\.secrets\.", ok=None)
    if done.returncode != 0:  # 1: no key set; anything else: no config to read
        return DEFAULT_CONFIG, None
    pairs = [
        (key, value) for key, _, value in (line.partition(" ") for line in done.stdout.splitlines())
    ]
    try:
        return SecretConfig.from_git(pairs), None
    except ValueError as exc:
        return DEFAULT_CONFIG, f"gitmem: git config gitmem.secrets: {exc}; default patterns used"


def purge_refusal() -> str | None:
    """Why the merge git is running must stop: it joins commits a purge removed (recorded in
    this store) with other history, which would make the purged content reachable again.

    Only a ``git merge`` (it names the merged commits in ``GITHEAD_<sha>``) in a store with
    a record of purges pays for the check.
    """
    merged = [key[len("GITHEAD_") :] for key in os.environ if key.startswith("GITHEAD_")]
    if not merged:
        return None
    from gitmem.store.git import run_git
    from gitmem.store.purgelog import PURGES_REF, fetched_purges_ref

    records = [PURGES_REF, fetched_purges_ref("*")]
    listed = run_git(None, "for-each-ref", "--count=1", *records, ok=None)
    if listed.returncode != 0 or not listed.stdout:
        return None
    from gitmem.store.purgelog import known_records, pending
    from gitmem.store.repository import Repository

    repo = Repository(Path.cwd())
    try:
        head = repo.head()
        tips = [sha for sha in [*merged, head or ""] if sha and repo.has_object(sha, "commit")]
        held = pending(repo, known_records(repo), tips)
    finally:
        repo.close()
    if not held:
        return None
    return (
        f"gitmem: this merge would bring back commits that purge {held[0].id} removed from "
        "history; abort it (git merge --abort) and run `gitmem sync`, which applies the purge "
        "to this store's own commits and keeps every change they made"
    )


def merge_bytes(
    base: bytes | None, ours: bytes, theirs: bytes, path: str
) -> tuple[bytes, list[MergeNote]]:
    """:func:`gitmem.sync.merge.merge_texts`, which a memory file or a session in gitmem's
    form skips where the merge notes nothing: their line merges need neither the models nor
    the Markdown parser."""
    if path.startswith("memory/") or "/memory/" in path:  # a cheap test first
        from gitmem.format.factlines import merge_fact_lines
        from gitmem.format.paths import is_facts_path

        if is_facts_path(path):
            merged = merge_fact_lines(base, ours, theirs)
            if merged is not None:
                return merged, []
    else:
        from gitmem.format.sessionlines import merge_session_lines

        merged = merge_session_lines(base, ours, theirs)
        if merged is not None:
            return merged, []
    from gitmem.sync.merge import merge_texts  # here: see merge_bytes' docs

    return merge_texts(base, ours, theirs, path)


def merge_file(base: Path, ours: Path, theirs: Path, path: str) -> tuple[int, list[str]]:
    """Merge ``ours`` and ``theirs`` against ``base`` by meaning, writing the result to ``ours``.

    Returns:
        (exit status, messages for stderr). 0: the semantic merge is in ``ours``. 1: a
        version does not parse, so git's own line merge (with conflict markers where the
        lines clash) was left in ``ours`` for a person to resolve.
    """
    refused = purge_refusal()
    if refused:
        return 1, [refused]  # ours stays as it is: git marks the file conflicted
    base_data, ours_data, theirs_data = base.read_bytes(), ours.read_bytes(), theirs.read_bytes()
    try:
        merged, notes = merge_bytes(base_data or None, ours_data, theirs_data, path)
    except (ParseError, ConflictError) as exc:
        from gitmem.store.git import run_git  # here: a clean merge starts no subprocess module

        done = run_git(
            None,
            "merge-file",
            "-L",
            "ours",
            "-L",
            "base",
            "-L",
            "theirs",
            str(ours),
            str(base),
            str(theirs),
            ok=None,
        )
        messages = [f"gitmem: cannot merge {path} by meaning: {exc}".rstrip()]
        if done.returncode == 0:
            messages.append(f"gitmem: {path}: git's line merge is in the file; check it by hand")
        return 1, messages
    tmp = ours.with_name(ours.name + ".gitmem-tmp")
    tmp.write_bytes(merged)
    os.replace(tmp, ours)
    if not notes:
        return 0, []
    from gitmem.guard.secrets import redact  # here: its patterns compile only for notes

    secrets, warning = store_secrets()
    messages = [warning] if warning else []
    for note in notes:
        line = f"gitmem: {path}: {note.describe()}"  # a memory file's note names no session
        if note.kind in ("summary", "conflict"):
            where = "MERGE_HEAD" if note.dropped_side == "theirs" else "HEAD"
            line += f" (the dropped version: git show {where}:{path})"
        # git prints this on the terminal of every pull: no secret either side quoted
        messages.append(redact(line, secrets)[0])
    return 0, messages


def main(argv: Sequence[str]) -> int:
    """Run the driver on ``BASE OURS THEIRS PATH``; prints notes to stderr."""
    if len(argv) != 4 or any(a in ("-h", "--help") for a in argv):
        print(USAGE, file=sys.stderr)
        return 0 if argv[:1] in (["-h"], ["--help"]) else 2
    base, ours, theirs, path = argv
    try:
        code, messages = merge_file(Path(base), Path(ours), Path(theirs), path)
    except OSError as exc:
        print(f"gitmem merge-file: {exc}", file=sys.stderr)
        return 2
    for line in messages:
        print(line, file=sys.stderr)
    return code


def run(argv: Sequence[str]) -> NoReturn:
    """Run :func:`main` and end the process at once with its status.

    The merge is written and its file closed by then; what ``os._exit`` skips is the
    interpreter's teardown of every loaded module (pydantic's above all), about a fifth of the
    driver's CPU time, paid once per merged file.
    """
    code = main(argv)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    run(sys.argv[1:])
