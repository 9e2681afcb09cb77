"""Git hooks and the merge driver's wiring: which files are memory, validating them, and
installing hooks."""

from __future__ import annotations

import os
import shlex
import shutil
import stat
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from gitmem.errors import (
    Diagnostic,
    InvalidSessionId,
    ParseError,
    RepositoryError,
)
from gitmem.format.facts import parse_facts
from gitmem.format.parse import parse_bytes
from gitmem.format.paths import SUFFIX, decode_id, is_facts_path, is_fanout_path, misplaced
from gitmem.guard.drops import is_memory_file as is_memory_file  # importable from here
from gitmem.store.git import run_git
from gitmem.store.objects import MODE_TREE
from gitmem.store.repository import Repository


def staged_files(repo: Repository, wanted: Callable[[str], bool]) -> list[tuple[str, bytes]]:
    """(path, content) of every file staged in the index (``GIT_INDEX_FILE`` too) that
    ``wanted`` accepts and that differs from HEAD (what a commit is about to record)."""
    changed = run_git(
        repo.root, "diff", "--cached", "--name-only", "-z", "--no-renames", "--diff-filter=ACMRT"
    )
    paths = [p for p in changed.stdout.split("\0") if p and wanted(p)]
    if not paths:
        return []
    listed = run_git(repo.root, "ls-files", "-s", "-z", "--", *paths)
    found = []
    for item in listed.stdout.split("\0"):
        meta, _, path = item.partition("\t")
        if not path:
            continue
        _mode, sha, stage = meta.split(" ")
        if stage == "0":
            found.append((path, repo.blob(sha)))
    return found


def subfolders(repo: Repository, folder: str, commit: str | None = None) -> list[str]:
    """Names of the folders directly inside ``folder`` at ``commit`` (default HEAD)."""
    rev = commit or repo.head()
    if rev is None:
        return []
    tree = repo.tree(repo.commit_tree(rev))
    for part in folder.strip("/").split("/"):
        found = tree.entries.get(part.encode())
        if found is None or found[0] != MODE_TREE:
            return []
        tree = repo.tree(found[1].hex())
    return sorted(
        name.decode("utf-8", "surrogateescape")
        for name, (mode, _sha) in tree.entries.items()
        if mode == MODE_TREE
    )


HOOK_MARK = "# installed by gitmem hooks install"

CHAINED_SUFFIX = ".before-gitmem"


def hooks_dir(repo: Repository) -> Path:
    """Where git looks for this store's hooks (``core.hooksPath`` if set)."""
    done = run_git(repo.root, "rev-parse", "--git-path", "hooks", safe=False)
    return (repo.root / done.stdout.strip()).resolve()


def install_hook(repo: Repository, name: str, command: str) -> Path:
    """Write hook ``name`` running ``<command> hook <name>``; an existing foreign hook is
    kept as ``<name>.before-gitmem`` and runs first (its failure stops the hook)."""
    folder = hooks_dir(repo)
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / name
    chained = folder / (name + CHAINED_SUFFIX)
    if target.is_symlink() or target.exists():
        current = target.read_text(errors="replace") if target.is_file() else ""
        if HOOK_MARK not in current:
            if chained.exists() or chained.is_symlink():
                raise RepositoryError(
                    f"{target} exists and so does {chained}; move one of them away and retry"
                )
            os.replace(target, chained)
    # git hands pre-push the refs on stdin: both hooks read it
    run_chained = f'"$here/{name}{CHAINED_SUFFIX}" "$@"'
    run_ours = f"exec {command} hook {name}" + ' "$@"'
    if name == "pre-push":
        run_chained = 'printf "%s\\n" "$refs" | ' + run_chained
        run_ours = 'printf "%s\\n" "$refs" | ' + run_ours.removeprefix("exec ")
    script = f"""#!/bin/sh
{HOOK_MARK}: checks memory files, keeps git's merges semantic.
# A hook that was here before runs first: {name}{CHAINED_SUFFIX}
here=$(dirname "$0")
{"refs=$(cat)" if name == "pre-push" else ""}
if [ -x "$here/{name}{CHAINED_SUFFIX}" ]; then
    {run_chained} || exit $?
fi
{run_ours}
"""
    tmp = folder / f".{name}.gitmem-tmp"
    tmp.write_text(script)
    tmp.chmod(tmp.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    os.replace(tmp, target)
    return target


HOOK_NAMES = (
    "pre-commit",
    "post-merge",
    "post-checkout",
    "pre-merge-commit",
    "pre-rebase",
    "pre-push",
)
# the hooks that refuse to bring back commits a purge removed
PURGE_GUARDS = ("pre-merge-commit", "pre-rebase", "pre-push")

DRIVER_NAME = "gitmem semantic merge of session files"

_MARKERS = ("<<<<<<< ", ">>>>>>> ", "<<<<<<<\n", ">>>>>>>\n")


def driver_command() -> str:
    """The merge driver command line git runs: this Python, this gitmem, the driver module.

    ``-P`` keeps Python from importing modules out of the store's folder (git runs the
    driver there, and a cloned store must not be able to plant a ``gitmem/`` package).
    The module runs the driver without the CLI; stores opened before registered
    ``-m gitmem merge-file``, which still works, and opening one rewrites it to this.
    """
    return f"{shlex.quote(sys.executable)} -P -m gitmem.sync.driver %O %A %B %P"


def _expected_id(path: str) -> tuple[str | None, str | None]:
    """(session id the file name encodes, problem) for a file in a ``sessions`` folder."""
    parts = path.replace(os.sep, "/").split("/")
    if is_fanout_path("/".join(parts)):  # sessions/<xx>/<id>.md: the folder must fit the id
        if misplaced("/".join(parts)) is not None:
            return None, f"file belongs in {misplaced('/'.join(parts[-3:]))}"
        parts = [*parts[:-2], parts[-1]]
    if len(parts) < 2 or parts[-2] != "sessions" or not parts[-1].endswith(SUFFIX):
        return None, None
    try:
        return decode_id(parts[-1][: -len(SUFFIX)]), None
    except InvalidSessionId:
        return None, "file name is not an encoded session id"


def validate_memory_file(data: bytes, path: str) -> list[Diagnostic]:
    """Every ``path:line`` problem of one memory file's content (empty when it is clean).

    Checks for merge conflict markers, parses with the Markdown AST parser and checks that
    the session id matches the file name (a curated memory file is parsed as one).
    """
    problems = [
        Diagnostic(path, number, "unresolved merge conflict marker")
        for number, line in enumerate(data.split(b"\n"), 1)
        if (line + b"\n").decode("utf-8", "replace").startswith(_MARKERS)
    ]
    if is_facts_path(path.replace(os.sep, "/")):  # the curated memory file, not a session
        try:
            parse_facts(data, path)
        except ParseError as exc:
            problems += exc.diagnostics
        return sorted(problems, key=lambda d: d.line)
    expected, bad_name = _expected_id(path)
    if bad_name:
        problems.append(Diagnostic(path, 1, bad_name))
    try:
        session = parse_bytes(data, path)
    except ParseError as exc:
        return sorted([*problems, *exc.diagnostics], key=lambda d: d.line)
    if expected is not None and session.id != expected:
        problems.append(
            Diagnostic(
                path,
                1,
                f"session id {session.id!r} does not match the file name (expected {expected!r})",
            )
        )
    return problems


def validate_paths(paths: Sequence[str]) -> list[Diagnostic]:
    """Validate memory files on disk (what the pre-commit framework hands a hook)."""
    problems: list[Diagnostic] = []
    for name in paths:
        try:
            data = Path(name).read_bytes()
        except OSError as exc:
            problems.append(Diagnostic(name, 1, f"cannot read: {exc.strerror}"))
            continue
        problems += validate_memory_file(data, name)
    return problems


def _session_of(path: str) -> str:
    name = path.rsplit("/", 1)[-1][: -len(SUFFIX)]
    try:
        return decode_id(name)
    except InvalidSessionId:
        return name


def _remove_tree(target: Path, *, keep_root: bool) -> None:
    if keep_root:
        for child in target.iterdir():
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child, ignore_errors=True)
            else:
                child.unlink(missing_ok=True)
    else:
        shutil.rmtree(target, ignore_errors=True)
