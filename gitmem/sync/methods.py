"""Sharing memory between agents and machines: remotes, sync, the merge driver and hooks.

``Sync`` gives ``MemoryManager`` ``remote_add``, ``remotes``,
``fetch``, ``push``, ``pull``, ``sync``, ``clone``, ``install_hooks`` and ``run_hook``. A
merge of two histories is written in-process, like a save: session files are merged by
meaning (:mod:`gitmem.sync.merge`), other files by git's line merge, and the result is one
merge commit with ``Gitmem-Op: merge``. A merge that cannot be done without a person
(an unparseable file on both sides, a text conflict) stops before anything is written.

The same session merge runs inside plain ``git merge`` / ``git pull`` through the merge
driver that opening a store configures (``merge.gitmem.driver``).
"""

from __future__ import annotations

import contextlib
import os
import random
import shlex
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from gitmem.core import SessionStore
from gitmem.errors import (
    ConflictError,
    Diagnostic,
    InvalidSessionId,
    ParseError,
    RemoteBusy,
    RepositoryError,
)
from gitmem.format.paths import decode_id, encode_id, fold_name, is_facts_path, portability_problem
from gitmem.guard.drops import ALLOW_ENV, staged_drops
from gitmem.guard.redact import with_redacted_trailer
from gitmem.guard.secrets import redact as redact_text
from gitmem.models import Result
from gitmem.store.git import redact, run_git
from gitmem.store.layout import ensure_local_attributes
from gitmem.store.objects import MODE_FILE, format_message, signature
from gitmem.store.purgelog import (
    PURGES_REF,
    PurgeRecord,
    content_refs,
    drop_old_objects,
    fetched_purges_ref,
    join_records,
    known_records,
    move_refs,
    pending,
    read_records,
    replay,
)
from gitmem.store.repository import Repository
from gitmem.store.transaction import Transaction
from gitmem.sync.driver import merge_file
from gitmem.sync.hooks import (
    DRIVER_NAME,
    HOOK_NAMES,
    PURGE_GUARDS,
    _remove_tree,
    _session_of,
    driver_command,
    install_hook,
    is_memory_file,
    staged_files,
    subfolders,
    validate_memory_file,
    validate_paths,
)
from gitmem.sync.merge import CONFLICT_KINDS, MergeNote, merge_texts
from gitmem.sync.remotes import Remote, Remotes, clone, sync_hint

T = TypeVar("T")


class SyncResult(Result):
    """What ``pull`` or ``sync`` did.

    Attributes:
        remote: the remote's name.
        branch: the branch synced.
        before: the local commit before.
        after: the local commit after.
        action: ``"up-to-date"``, ``"fast-forward"``, ``"merge"`` or ``"empty-remote"``.
        files: memory files (sessions, curated facts) the merge or fast-forward changed here.
        notes: decisions of the semantic merge (conflicts resolved, summaries kept).
        secrets: secrets that came in from the remote and could not be redacted: in the
            files a fast-forward brought (no commit is made to redact them) or in a merged
            file's ids; ``gitmem scan`` lists them all. A merge redacts the rest.
        pushed: whether ``sync`` sent commits to the remote.
        purges: purges recorded on the remote (or here) that this store applied to the
            commits it still held: they were rebuilt on the rewritten history.
        attempts: how many fetch-merge-push rounds it took (the remote can move meanwhile).
    """

    remote: str
    branch: str
    before: str | None
    after: str | None = None
    action: str = "up-to-date"
    # pydantic copies a mutable default for each instance
    files: list[str] = []  # noqa: RUF012
    notes: list[MergeNote] = []  # noqa: RUF012
    secrets: list[str] = []  # noqa: RUF012
    pushed: bool = False
    attempts: int = 0
    purges: list[str] = []  # noqa: RUF012 (ids of purges made elsewhere, applied here)

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready form (for ``--json``); the same as :meth:`to_dict`."""
        return self.to_dict()


_sleep = time.sleep  # the one place sync waits (a test records the pauses)


def _gave_up(exc: ConflictError, remote: str, rounds: int, seconds: float) -> ConflictError:
    if isinstance(exc, RemoteBusy):
        return RemoteBusy(
            f"sync gave up after {rounds} rounds over {seconds:.1f}s: each time the remote's "
            f"branch was locked by another push in progress. Your commits are safe in this "
            f"store; run {sync_hint(remote)} again in a moment. Last: {exc}"
        )
    return ConflictError(
        f"sync gave up after {rounds} rounds over {seconds:.1f}s: each time another writer "
        f"pushed new commits between this store's fetch and its push. Your commits are safe "
        f"in this store; run {sync_hint(remote)} again in a moment. Last: {exc}"
    )


class Sync:
    """Remotes, sync, hooks and namespaces for ``MemoryManager``."""

    def __init__(self, store: SessionStore) -> None:
        self.store = store
        # remote -> the branch tip a purge rewrote there: the next push replaces only that
        self._leases: dict[str, str] = {}
        if self.store.namespace is not None:
            try:
                encode_id(self.store.namespace)
            except InvalidSessionId as exc:
                raise InvalidSessionId(
                    f"namespace {self.store.namespace!r} cannot name a folder: {exc}"
                ) from None
            self._check_new_namespace(self.store.namespace)
        # every clone needs the driver in its own config: .gitattributes names it, but git
        # never copies config, so a plain `git clone` would otherwise merge sessions as text.
        # A store whose config cannot be written (read-only) can still be read.
        with contextlib.suppress(RepositoryError):
            self.store.repo.ensure_config(
                {"merge.gitmem.name": DRIVER_NAME, "merge.gitmem.driver": driver_command()}
            )
        ensure_local_attributes(self.store.repo)

    def _check_new_namespace(self, namespace: str) -> None:
        """Refuse a new namespace whose folder a clone on Windows or macOS would lose: a
        device name, or an existing namespace's name up to case or normalisation (existing
        namespaces stay usable, as session files do)."""
        existing = self.namespaces()
        if namespace in existing:
            return
        if portability_problem(namespace) is not None:
            raise InvalidSessionId(
                f"namespace {namespace!r} would be the folder namespaces/{encode_id(namespace)}, "
                "a reserved device name on Windows (CON, PRN, AUX, NUL, COM0-9, LPT0-9, with "
                "any extension); pick another namespace"
            )
        folded = fold_name(encode_id(namespace))
        for other in existing:
            if fold_name(encode_id(other)) == folded:
                raise InvalidSessionId(
                    f"namespace {namespace!r} differs from the existing namespace {other!r} only "
                    "in letter case or Unicode normalisation; on macOS and Windows both would be "
                    "one folder, so pick another namespace"
                )

    def _remotes(self) -> Remotes:
        return Remotes(self.store.repo)

    def _branch(self, branch: str | None) -> str:
        if branch:
            return branch
        return self.store.repo.branch_ref().removeprefix("refs/heads/")

    # --- remotes -------------------------------------------------------------------------

    def remote_add(self, name: str, url: str) -> Remote:
        """Add a remote (``git remote add``); credentials stay with git, never in gitmem."""
        return self._remotes().add(name, url)

    def remotes(self) -> list[Remote]:
        """The configured remotes (name and URL)."""
        return self._remotes().list()

    def fetch(self, remote: str = "origin", branch: str | None = None) -> str | None:
        """Fetch ``remote``; returns the commit its branch is at (None: empty remote)."""
        return self._remotes().fetch(remote, self._branch(branch))

    def push(self, remote: str = "origin", branch: str | None = None) -> bool:
        """Push the branch to ``remote``; False if the remote already had everything.

        Raises:
            ConflictError: the remote has commits this store does not; use ``sync``.
        """
        branch = self._branch(branch)
        if self.store.repo.head() is None:
            raise RepositoryError(f"{self.store.path} has no commits to push")
        remotes = self._remotes()
        lease = self._lease_before_push(remotes, remote, branch)
        pushed = remotes.push(remote, branch, lease=lease)
        if lease:
            self._drop_replaced(lease)
        return pushed

    def _drop_replaced(self, lease: str) -> None:
        """After a push replaced the remote's purged history: the remote-tracking ref's
        reflog still reaches it here, so drop it."""
        repo = self.store.repo
        if repo.has_object(lease, "commit"):
            with repo.transaction("dropping purged objects"):
                drop_old_objects(repo)

    def _lease_before_push(self, remotes: Remotes, remote: str, branch: str) -> str | None:
        """Refuse to push commits a purge removed (recorded here or on the remote); the
        remote's branch when a purge here rewrote it (the push replaces it, only if it is
        still there)."""
        repo = self.store.repo
        tips = remotes.tips(remote)
        theirs = tips.get(PURGES_REF)
        if theirs and not repo.has_object(theirs, "commit"):
            remotes.fetch_records(remote)
        records = self._records(remote)
        head = repo.head()
        held = pending(repo, records, [head] if head else [])
        if held:
            raise ConflictError(
                f"{self.store.path}: this store still holds commits that purge {held[0].id} "
                f"removed from history; run {sync_hint(remote)} to apply the purge here "
                "first (your own changes are kept). Nothing was pushed."
            )
        tip = tips.get(f"refs/heads/{branch}")
        if tip and any(tip in record.map for record in records):
            return tip
        return None

    def _records(self, remote: str) -> list[PurgeRecord]:
        """Every purge recorded here or in what was last fetched from ``remote``."""
        repo = self.store.repo
        found = {r.id: r for r in read_records(repo, fetched_purges_ref(remote))}
        found.update({r.id: r for r in read_records(repo, PURGES_REF)})
        return sorted(found.values(), key=lambda r: (r.time, r.id))

    def _apply_purges(
        self, remote: str, branch: str, tip: str | None, result: SyncResult
    ) -> str | None:
        """Apply the purges recorded here or on the remote to the commits this store still
        holds that they removed: those commits are rebuilt on the rewritten history
        (keeping every change of their own), the old objects dropped, and the two records
        joined. Returns the remote's tip as it is to be merged (rebuilt too when the
        remote still has a history a purge here rewrote)."""
        repo = self.store.repo
        tracking = Remotes(repo).tracking_ref(remote, branch)
        with repo.transaction("applying a purge"):
            records = self._records(remote)
            refs = content_refs(repo)
            todo = pending(repo, records, refs.values())
            ours = repo.refs.read(PURGES_REF)
            joined = join_records(
                repo, ours, repo.refs.read(fetched_purges_ref(remote)), signature(repo.identity)
            )
            moved: dict[str, tuple[str, str]] = {}
            if joined != ours and joined is not None:
                moved[PURGES_REF] = (ours or "", joined)
            if todo:
                on_remote = {r.id for r in read_records(repo, fetched_purges_ref(remote))}
                keep = [tip] if tip and all(r.id in on_remote for r in todo) else []
                _rewrite, done = replay(repo, todo, refs, keep)
                moved.update(done.refs)
            if not moved:
                return tip
            repo.objects.flush()
            move_refs(repo, moved, "gitmem sync: apply purges")
            if todo:
                drop_old_objects(repo)
                result.purges = [r.id for r in todo]
        if tracking in moved and tip is not None:
            self._leases[remote] = tip
            return moved[tracking][1]
        return tip

    def pull(self, remote: str = "origin", branch: str | None = None) -> SyncResult:
        """Fetch ``remote`` and merge its branch into this store (no push)."""
        branch = self._branch(branch)
        result = SyncResult(remote=remote, branch=branch, before=self.store.repo.head())
        result.attempts = 1
        tip = self._apply_purges(remote, branch, self._remotes().fetch(remote, branch), result)
        if tip is None:
            result.action = "empty-remote"
        else:
            self._merge_from(tip, result)
        result.after = self.store.repo.head()
        return result

    def sync(
        self,
        remote: str = "origin",
        branch: str | None = None,
        *,
        attempts: int = 8,
        max_wait: float = 15.0,
    ) -> SyncResult:
        """Fetch, merge and push, trying again if the remote moved in between.

        Between rounds it waits with jittered exponential backoff (0.1 s doubling, at most
        2 s a round, ``max_wait`` seconds in all), so that writers contending for one remote
        spread out instead of colliding again.

        Raises:
            ConflictError: a file could not be merged without a person (nothing written),
                or the remote kept moving for ``attempts`` rounds (the message says which:
                new commits each time, or its branch locked by other pushes).
            RepositoryError: the remote is unreachable or not a gitmem store.
        """
        branch = self._branch(branch)
        result = SyncResult(remote=remote, branch=branch, before=self.store.repo.head())
        remotes = self._remotes()
        started = time.monotonic()
        waited = 0.0
        for attempt in range(1, attempts + 1):
            result.attempts = attempt
            tip = self._apply_purges(remote, branch, remotes.fetch(remote, branch), result)
            if tip is None:
                result.action = "empty-remote"
            else:
                self._merge_from(tip, result)
            try:
                lease = self._leases.pop(remote, None)
                result.pushed = remotes.push(remote, branch, lease=lease) or result.pushed
                if lease:
                    self._drop_replaced(lease)
            except ConflictError as exc:
                pause = min(0.1 * 2.0 ** (attempt - 1), 2.0) * random.uniform(0.5, 1.5)
                pause = min(pause, max_wait - waited)
                if attempt == attempts or pause <= 0:
                    raise _gave_up(exc, remote, attempt, time.monotonic() - started) from None
                _sleep(pause)
                waited += pause
                continue  # someone pushed (or was pushing) between our fetch and our push
            break
        result.after = self.store.repo.head()
        return result

    # --- merging -------------------------------------------------------------------------

    def _merge_from(self, theirs: str, result: SyncResult) -> None:
        repo = self.store.repo
        with repo.transaction() as txn:
            if (repo.git_dir / "MERGE_HEAD").exists():
                raise ConflictError(
                    f"{repo.root}: a git merge is in progress; finish it (git commit) or "
                    "abort it (git merge --abort) before syncing"
                )
            # a person's commit to the merged files meanwhile: merge again from the new tip
            txn.rebuilding(lambda: self._merge_into_tip(txn, theirs, result))

    def _merge_into_tip(self, txn: Transaction, theirs: str, result: SyncResult) -> None:
        """Merge (or fast-forward to) ``theirs`` from the branch's tip as ``txn`` reads it;
        ``result`` is filled in once the branch moved."""
        repo = self.store.repo
        remotes = Remotes(repo)
        label = f"{result.remote}/{result.branch}"
        ours = txn.head()
        if ours == theirs or (ours is not None and remotes.is_ancestor(theirs, ours)):
            return
        if ours is None or remotes.is_ancestor(ours, theirs):
            changed = repo.diff_trees(ours, theirs)
            self._refuse_unclean(list(changed))
            repo.fast_forward(theirs, f"sync: fast-forward to {label}", base=ours)
            # nothing is committed here, so nothing can be redacted: say what came in
            result.secrets = self.store.guard.secrets_in_files({p: repo.read(p) for p in changed})
            result.action = "fast-forward"
            result.files += [p for p in changed if is_memory_file(p) or is_facts_path(p)]
            return
        base = remotes.merge_base(ours, theirs)
        changes, notes, merged = self._three_way(remotes, base, ours, theirs)
        self._refuse_unclean(list(changes))
        # content from the other side is new here: redacted like a save, never refused
        changes, result.secrets = self.store.guard.screen_files(txn, changes, refuse=False)
        message = self._merge_message(label, ours, theirs, merged, notes, changes)
        if txn.redacted:
            message = with_redacted_trailer(message, txn.redacted)
            txn.redacted = {}
        repo.commit_changes(changes, message, base=ours, merge_parents=[theirs])
        result.action = "merge"
        result.files += [p for p in changes if is_memory_file(p) or is_facts_path(p)]
        result.notes += [self._redacted_note(note) for note in notes]

    def _redacted_note(self, note: MergeNote) -> MergeNote:
        """``note`` as printed by ``gitmem sync`` (and returned): its texts quote either side
        of the merge, so secrets in them are redacted as in the merge commit's message."""
        config = self.store.guard.secret_config
        if not config.redact:
            return note
        return MergeNote(
            **{
                **vars(note),
                "kept": redact_text(note.kept, config)[0],
                "dropped": redact_text(note.dropped, config)[0],
                "detail": redact_text(note.detail, config)[0],
            }
        )

    def _refuse_unclean(self, paths: Sequence[str]) -> None:
        dirty = self.store.repo.unclean_paths(paths)
        if dirty:
            shown = ", ".join(dirty[:5]) + (" ..." if len(dirty) > 5 else "")
            raise ConflictError(
                f"{self.store.path}: uncommitted changes in {shown} would be overwritten by the "
                "merge; commit them (git commit) or restore them (git restore) first. "
                "Nothing was changed."
            )

    def _three_way(
        self, remotes: Remotes, base: str | None, ours: str, theirs: str
    ) -> tuple[dict[str, bytes | None], list[MergeNote], list[str]]:
        repo = self.store.repo
        mine = repo.diff_trees(base, ours)
        other = repo.diff_trees(base, theirs)
        changes: dict[str, bytes | None] = {}
        notes: list[MergeNote] = []
        merged: list[str] = []
        for path, (old, new) in sorted(other.items()):
            ours_side = mine.get(path)
            if ours_side is not None and ours_side[1] == new:
                continue  # both sides made the same change
            for entry in (old, new, ours_side[1] if ours_side else None):
                if entry is not None and entry[0] != MODE_FILE:
                    raise ConflictError(
                        f"{path} is not a regular file (mode {entry[0].decode()}); gitmem only "
                        "merges regular files: merge with git itself. Nothing was changed."
                    )
            if ours_side is None:
                changes[path] = repo.blob(new[1]) if new else None
                continue
            here = ours_side[1]
            if new is None or here is None:
                # deleted on one side, changed on the other: keep the changed file
                if here is None and new is not None:
                    changes[path] = repo.blob(new[1])
                notes.append(
                    MergeNote(
                        session_id=_session_of(path), kind="kept", key=path, kept=path, dropped=""
                    )
                )
                continue
            base_data = repo.blob(old[1]) if old else None
            if is_memory_file(path) or is_facts_path(path):  # sessions by meaning, facts by id
                try:
                    data, file_notes = merge_texts(
                        base_data, repo.blob(here[1]), repo.blob(new[1]), path
                    )
                except ParseError as exc:
                    raise ConflictError(
                        f"cannot merge {path}: it does not parse on one side:\n"
                        + "\n".join(str(d) for d in exc.diagnostics)
                        + "\nFix it (gitmem check), commit, and sync again. Nothing was changed."
                    ) from None
                except ConflictError as exc:
                    raise ConflictError(
                        f"cannot merge {path}: {exc}. Nothing was changed."
                    ) from None
                notes += file_notes
                merged.append(path)
            else:
                data, conflicts = remotes.merge_text(
                    base_data or b"", repo.blob(here[1]), repo.blob(new[1])
                )
                if conflicts:
                    raise ConflictError(
                        f"cannot merge {path}: both sides changed the same lines "
                        f"({conflicts} conflict(s)); merge it with git. Nothing was changed."
                    )
            changes[path] = data
        return changes, notes, merged

    def _merge_message(
        self,
        label: str,
        ours: str,
        theirs: str,
        merged: list[str],
        notes: list[MergeNote],
        changes: dict[str, bytes | None],
    ) -> str:
        sessions = sorted(
            {n.session_id for n in notes if not n.detail}
            | {_session_of(p) for p in merged if not is_facts_path(p)}
        )
        facts = [p for p in merged if is_facts_path(p)]
        lines = [
            f"Merged {theirs[:12]} from {label} into {ours[:12]}: {len(changes)} file(s) "
            f"changed, {len(merged) - len(facts)} session file(s) merged by meaning"
            + (f", {len(facts)} memory file(s) by fact id." if facts else ".")
        ]
        for note in notes:
            lines.append("")
            lines.append("- " + (f"{note.session_id}: " if note.detail else "") + note.describe())
            if note.kind in ("summary", "conflict"):
                where = theirs if note.dropped_side == "theirs" else ours
                lines.append(f"  The dropped version is in {where[:12]}; in full:")
                lines.extend("    " + line for line in note.dropped.splitlines() or [""])
        trailers = {"Gitmem-Op": "merge"}
        if len(sessions) <= 20:
            trailers["Gitmem-Session"] = ", ".join(sessions)
        else:
            trailers["Gitmem-Sessions"] = str(len(sessions))
        trailers["Gitmem-Agent"] = self.store.agent
        conflicts = [n for n in notes if n.kind in CONFLICT_KINDS]
        if conflicts:
            trailers["Gitmem-Conflicts"] = str(len(conflicts))
        trailers["Gitmem-Merged"] = theirs
        return format_message(f"Merge {label}", "\n".join(lines), trailers)

    # --- hooks and namespaces ------------------------------------------------------------

    @staticmethod
    def merge_file(base: Path, ours: Path, theirs: Path, path: str) -> tuple[int, list[str]]:
        """The git merge driver (``gitmem merge-file %O %A %B %P``): see
        :func:`gitmem.driver.merge_file`."""
        return merge_file(base, ours, theirs, path)

    @staticmethod
    def validate_files(paths: Sequence[str]) -> list[Diagnostic]:
        """Validate memory files on disk, no store needed (the pre-commit framework's hook)."""
        return validate_paths(paths)

    def install_hooks(self) -> list[Path]:
        """Install gitmem's git hooks into this store (``core.hooksPath`` if set).

        A hook already there is kept and runs first (renamed ``<name>.before-gitmem``).
        Returns the paths written.
        """
        script = f"{shlex.quote(sys.executable)} -P -m gitmem"
        return [install_hook(self.store.repo, name, script) for name in HOOK_NAMES]

    def run_hook(self, name: str, args: Sequence[str] = (), stdin: str = "") -> list[Diagnostic]:
        """Run the work of git hook ``name``; returns the problems that should stop git.

        ``pre-commit`` validates the staged memory files (or, given file names as the
        pre-commit framework passes them, those files) and refuses saved turns they drop
        (unless ``GITMEM_ALLOW_DROP=1``; see :mod:`gitmem.guard.drops`). A save whose
        writer was killed is finished or undone first, and the commit stopped, so that it
        does not take in that save under the person's name. ``post-merge`` and
        ``post-checkout`` only make sure the store is wired (the merge driver); the search
        index catches up with the new commit by itself on its next use.

        ``pre-merge-commit``, ``pre-rebase``, ``pre-push`` (and ``pre-commit`` concluding a
        merge) refuse to bring back commits a purge removed (recorded here, or on the remote
        ``pre-push`` pushes to: its record is fetched first): git would otherwise make the
        purged content reachable again. ``stdin``: what git handed the hook (``pre-push``:
        one line per ref pushed).
        """
        if name not in HOOK_NAMES:
            raise RepositoryError(f"unknown hook {name!r}; gitmem has {', '.join(HOOK_NAMES)}")
        if name in PURGE_GUARDS:
            return self._purged_in(name, args, stdin)
        if name != "pre-commit":
            return []
        if args:
            return validate_paths(args)
        problems = self._repaired_saves()
        if (self.store.repo.git_dir / "MERGE_HEAD").exists():
            problems += self._purged_in("pre-merge-commit", args, stdin)
        if problems:  # the index git is committing may hold that save: commit anew
            return problems
        staged = staged_files(self.store.repo, lambda p: is_memory_file(p) or is_facts_path(p))
        for path, data in staged:
            problems += validate_memory_file(data, path)
        if os.environ.get(ALLOW_ENV) != "1":
            head = self.store.repo.head()
            problems += staged_drops(
                {
                    path: (self.store.repo.read(path, head) if head else None, data)
                    for path, data in staged
                }
            )
        return problems

    def _purged_in(self, name: str, args: Sequence[str], stdin: str) -> list[Diagnostic]:
        """Problems for the commits a git command is about to make reachable (pushed,
        merged, rebased) that a known purge removed."""
        repo = self.store.repo
        remote = ""
        if name == "pre-push":
            remote = args[0] if args else ""
            tips = [line.split()[1] for line in stdin.splitlines() if len(line.split()) == 4]
            tips = [sha for sha in tips if sha.strip("0")]
            if remote in {r.name for r in self.remotes()}:
                with contextlib.suppress(RepositoryError):  # offline: what is known here
                    self._remotes().fetch_records(remote)
        else:
            merging = repo.git_dir / "MERGE_HEAD"
            tips = [repo.head() or ""]
            if merging.exists():
                tips += merging.read_text().split()
            tips += [arg for arg in args if arg]  # pre-rebase: the upstream and the branch
        found = [sha for sha in tips if sha and repo.has_object(sha, "commit")]
        held = pending(repo, known_records(repo), found)
        if not held:
            return []
        action = {
            "pre-push": "this push",
            "pre-rebase": "this rebase",
        }.get(name, "this merge")
        return [
            Diagnostic(
                ".",
                0,
                f"{action} would bring back commits that purge {record.id} "
                f"({record.kind}) removed from history; abort it and run "
                f"{sync_hint(remote or 'origin')} instead, which applies the purge to this "
                "store's own commits and keeps every change they made",
            )
            for record in held
        ]

    def _repaired_saves(self) -> list[Diagnostic]:
        """A save whose writer was killed, repaired now (opening the store does it, under
        the write lock): a person's commit must not take it in under their name."""
        self.store.repo.recover()
        problems = []
        for finished, paths in self.store.repo.recovered:
            done = (
                f"was finished as its own commit {finished[:12]}"
                if finished
                else "was undone (it had not reached its last step)"
            )
            problems += [
                Diagnostic(
                    path,
                    1,
                    f"a gitmem save cut short (its writer was "
                    f"killed) {done}; your commit was stopped so that it "
                    "does not take that save in: run your commit again",
                )
                for path in paths
            ]
        return problems

    def namespaces(self) -> list[str]:
        """The namespaces that hold sessions in this store (the default one is not listed)."""
        found = []
        for name in subfolders(self.store.repo, "namespaces"):
            try:
                found.append(decode_id(name))
            except InvalidSessionId:
                continue
        return sorted(found)


def clone_store(url: str, path: str | os.PathLike[str], open_store: Callable[[Path, bool], T]) -> T:
    """Clone the memory store at ``url`` into ``path`` and open it with ``open_store(target,
    init)`` (``init``: the remote was empty, so a fresh store starts there).

    Raises:
        RepositoryError: the remote cannot be reached or is not a gitmem store (the
            half-made clone is removed again).
    """
    target = Path(path)
    existed = target.exists()
    clone(url, target)
    try:
        repo_head = run_git(target, "rev-parse", "--verify", "-q", "HEAD^{commit}", ok=None)
        if repo_head.returncode != 0:  # an empty remote: start the store on main
            run_git(target, "symbolic-ref", "HEAD", "refs/heads/main")
            return open_store(target, True)
        probe = Repository(target)  # before the manager refuses it as "not a store"
        try:
            Remotes(probe).check_is_store(repo_head.stdout.strip(), redact(url))
        finally:
            probe.close()
        return open_store(target, False)
    except RepositoryError:
        _remove_tree(target, keep_root=existed)
        raise
