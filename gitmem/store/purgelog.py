"""The record of purges, and applying a purge made elsewhere to this store's history.

A purge (``gitmem purge``) rewrites history and records what it did under
``refs/gitmem/purges``: one JSON file per purge with the old -> new commit map, the target's
kind, a salted hash of the target and the marker that replaced it, never the content itself.
The record travels with the store (``push`` sends it, ``fetch`` brings a remote's copy to
``refs/gitmem/from/<remote>/purges``).

A clone that still holds the old commits applies a purge it learns of without being told the
content: it has the old commits and the remote has the new ones, so comparing the two shows
exactly what was removed. :class:`LearnedRule` takes those removals (the text that became the
marker, the lines and turn blocks that went, the files that went) and :func:`replay` rewrites
the clone's own commits on top of the new history with them. Commits the purge rewrote are
replaced by the purge's own new commits, so both stores agree on every id.
"""

from __future__ import annotations

import contextlib
import difflib
import hashlib
import json
import os
import re
import shutil
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from gitmem.errors import ConflictError, LockTimeout
from gitmem.store.git import run_git
from gitmem.store.locks import git_gc_lock
from gitmem.store.objects import Signature
from gitmem.store.repository import Repository
from gitmem.store.rewrite import HistoryRewrite, RewriteResult

PURGES_REF = "refs/gitmem/purges"
_FETCHED = "refs/gitmem/from/"
# state under .git/gitmem that is not a cache of the content: the lock (and journal), temp
# files, the housekeeping record
_KEPT_STATE = frozenset({"write.lock", "housekeeping.lock", "tmp", "packed"})
_HEADING = re.compile(rb"^#{2,3} ")
_TURN_HEADING = re.compile(rb"^#{2,3} .*\{#[^}\s]+")
# a learned removal shorter than this, or without a letter or digit, is not applied to other
# files: "\n" -> "" would take every blank line with it
_MIN_FRAGMENT = 4
_WORDY = re.compile(rb"[A-Za-z0-9\x80-\xff]")  # a letter or digit, or any non-ASCII


def fetched_purges_ref(remote: str) -> str:
    """Where ``fetch`` keeps a remote's record of purges."""
    return f"{_FETCHED}{remote}/purges"


def purges_refspec(remote: str) -> str:
    """The fetch refspec that brings a remote's record (a glob: a remote without a record
    is no error)."""
    return f"+{PURGES_REF}*:{_FETCHED}{remote}/purges*"


def is_record_ref(ref: str) -> bool:
    """Whether ``ref`` holds a record of purges (never rewritten by a purge)."""
    return ref == PURGES_REF or (ref.startswith(_FETCHED) and ref.endswith("/purges"))


def content_refs(repo: Repository) -> dict[str, str]:
    """Every ref a purge rewrites: all but the records, the stash (which it drops) and
    symbolic refs (``refs/remotes/origin/HEAD`` moves with the ref it names)."""
    listed = run_git(
        repo.root, "for-each-ref", "--format=%(refname) %(objectname) %(symref)", "refs/"
    )
    found = {}
    for line in listed.stdout.splitlines():
        ref, sha, target = [*line.split(" "), "", ""][:3]
        if sha and not target and not is_record_ref(ref) and ref != "refs/stash":
            found[ref] = sha
    return found


@dataclass(frozen=True)
class PurgeRecord:
    """One purge as recorded: enough to apply it elsewhere, never the content."""

    id: str
    kind: str
    salted_hash: str
    salt: str
    time: str
    map: dict[str, str]
    marker: str
    purge_commit: str | None

    def matches(self, value: str) -> bool:
        """Whether ``value`` is what this purge removed (checked against the salted hash)."""
        text = f"{self.salt}:{self.kind}:{value}".encode()
        return hashlib.sha256(text).hexdigest() == self.salted_hash


def read_records(repo: Repository, ref: str) -> list[PurgeRecord]:
    """The purges recorded at ``ref`` (none if it does not exist), oldest first."""
    commit = repo.refs.read(ref)
    if commit is None:
        return []
    found = []
    for name, (_mode, sha) in repo.tree(repo.commit_tree(commit)).entries.items():
        if not name.endswith(b".json"):
            continue
        data = json.loads(repo.blob(sha.hex()))
        found.append(
            PurgeRecord(
                id=data["id"],
                kind=data["kind"],
                salted_hash=data["salted_hash"],
                salt=data["salt"],
                time=data["time"],
                map=dict(data["map"]),
                marker=data.get("marker", "[purged]"),
                purge_commit=data.get("purge_commit"),
            )
        )
    return sorted(found, key=lambda r: (r.time, r.id))


def stage_record_commit(
    repo: Repository, parents: list[str], files: dict[str, bytes], sig: Signature, message: str
) -> str:
    """A commit of the record: the first parent's files plus ``files`` (name -> JSON)."""
    base = repo.objects.commit_tree(parents[0]) if parents else None
    entries: dict[str, bytes | None] = {
        name: bytes.fromhex(repo.objects.stage("blob", data)) for name, data in files.items()
    }
    tree = repo.objects.stage_tree(base, entries)
    return repo.objects.stage_commit(tree, parents, sig, message)


def join_records(
    repo: Repository, ours: str | None, theirs: str | None, sig: Signature
) -> str | None:
    """The record holding every purge of both ``ours`` and ``theirs`` (commit ids of two
    records; either may be None); a new commit only when each has purges the other lacks.
    The caller writes the staged objects."""
    if theirs is None or theirs == ours or not repo.has_object(theirs, "commit"):
        return ours
    if ours is None or _is_ancestor(repo, ours, theirs):
        return theirs
    if _is_ancestor(repo, theirs, ours):
        return ours
    missing = {
        name.decode(): repo.blob(sha.hex())
        for name, (_mode, sha) in repo.tree(repo.commit_tree(theirs)).entries.items()
    }
    message = "Join records of purges\n\nGitmem-Op: purge-record\n"
    return stage_record_commit(repo, [ours, theirs], missing, sig, message)


def _is_ancestor(repo: Repository, older: str, newer: str) -> bool:
    done = run_git(repo.root, "merge-base", "--is-ancestor", older, newer, ok=(0, 1))
    return done.returncode == 0


def reachable(repo: Repository, tips: Iterable[str], commits: set[str]) -> set[str]:
    """Those of ``commits`` reachable from ``tips``."""
    wanted = sorted(set(tips))
    if not wanted or not commits:
        return set()
    done = run_git(repo.root, "rev-list", "--stdin", stdin=("\n".join(wanted) + "\n").encode())
    return {line for line in done.stdout.split() if line in commits}


def known_records(repo: Repository) -> list[PurgeRecord]:
    """Every purge recorded here or fetched from any remote, oldest first."""
    found = {}
    for ref in [PURGES_REF, *repo.refs(_FETCHED)]:
        if is_record_ref(ref):
            found.update({record.id: record for record in read_records(repo, ref)})
    return sorted(found.values(), key=lambda r: (r.time, r.id))


def pending(repo: Repository, records: list[PurgeRecord], tips: Iterable[str]) -> list[PurgeRecord]:
    """The purges whose old commits ``tips`` still reach (not applied here yet)."""
    old = {sha for record in records for sha in record.map}
    held = reachable(repo, tips, old)
    return [record for record in records if held.intersection(record.map)]


# --- learning what a purge removed ----------------------------------------------------------


def _between(old: bytes, pieces: list[bytes]) -> list[bytes] | None:
    """The parts of ``old`` that the marker replaced, given the new text cut at the
    markers; None if ``old`` is not the pieces with something between them."""
    pattern = b"(.*?)".join(re.escape(piece) for piece in pieces)
    found = re.fullmatch(pattern, old, re.DOTALL)
    return None if found is None else [part for part in found.groups() if part]


def learn_fragments(old: bytes, new: bytes, marker: bytes) -> list[tuple[bytes, bytes]]:
    """(removed, replacement) pairs that turn ``old`` into ``new``: the text a marker
    replaced, and whole lines where more changed (a turn's block, a fact's line)."""
    a = old.splitlines(keepends=True)
    b = new.splitlines(keepends=True)
    pairs: list[tuple[bytes, bytes]] = []
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag in ("equal", "insert"):
            continue
        gone, came = b"".join(a[i1:i2]), b"".join(b[j1:j2])
        pieces = came.split(marker)
        parts = _between(gone, pieces) if tag == "replace" and len(pieces) > 1 else None
        if parts:
            pairs += [(part, marker) for part in parts]
        else:
            pairs.append((gone, came))
    return pairs


@dataclass
class LearnedRule:
    """A purge's removals, learned from its old and new commits, as a rewrite rule."""

    marker: bytes
    substitutions: dict[bytes, bytes] = field(default_factory=dict)
    removed: dict[str, set[bytes]] = field(default_factory=dict)  # path -> blocks of it
    verified: set[str] = field(default_factory=set)  # ids of purges whose target was checked
    path_free: bool = False

    @property
    def folders(self) -> tuple[str, ...] | None:
        return None

    def wants(self, path: str) -> bool:
        return True

    def blob(self, path: str, data: bytes) -> bytes | None:
        blocks = self.removed.get(path)
        if blocks:
            for block in sorted(blocks, key=len, reverse=True):
                data = data.replace(block, b"")
            if not any(_TURN_HEADING.match(line) for line in data.splitlines()):
                return None  # nothing of the session's own is left
        return self._substitute(data)

    def message(self, message: bytes) -> bytes:
        return self._substitute(message)

    def _substitute(self, data: bytes) -> bytes:
        for gone, came in self.substitutions.items():
            if gone in data:
                data = data.replace(gone, came)
        return data

    def add(self, gone: bytes, came: bytes, *, exact: bool = False) -> None:
        if exact or (len(gone) >= _MIN_FRAGMENT and _WORDY.search(gone)):
            self.substitutions[gone] = came
            # longest first: a block that holds a shorter fragment goes whole
            self.substitutions = dict(
                sorted(self.substitutions.items(), key=lambda kv: len(kv[0]), reverse=True)
            )

    def remove_file(self, path: str, data: bytes) -> None:
        """A file the purge removed: its blocks (from each heading on) go wherever it
        lives on, and what is left of it with no turn of its own goes too."""
        lines = data.splitlines(keepends=True)
        starts = [i for i, line in enumerate(lines) if _HEADING.match(line)]
        blocks = self.removed.setdefault(path, set())
        for at, start in enumerate(starts):
            end = starts[at + 1] if at + 1 < len(starts) else len(lines)
            blocks.add(b"".join(lines[start:end]))


def learn_rule(repo: Repository, records: list[PurgeRecord]) -> LearnedRule:
    """What ``records``' purges removed, from their old and new commits held here.

    Three passes over git, whatever the number of commits: one ``cat-file`` for every
    commit, one ``diff-tree --stdin`` for every (old, new) pair, one ``cat-file`` for the
    distinct blobs that changed."""
    rule = LearnedRule(marker=(records[0].marker if records else "[purged]").encode())
    pairs = [(record, old, new) for record in records for old, new in record.map.items()]
    bodies = {
        sha: data
        for sha, kind, data in repo.runner.stream_objects(
            sorted({sha for _, old, new in pairs for sha in (old, new)})
        )
        if kind == "commit" and data is not None
    }
    held = [(record, old, new) for record, old, new in pairs if old in bodies and new in bodies]
    candidates: dict[str, set[bytes]] = {record.id: set() for record in records}
    for record, old, new in held:
        before, after = (bodies[sha].partition(b"\n\n")[2] for sha in (old, new))
        if before != after:
            for gone, came in learn_fragments(before, after, record.marker.encode()):
                _learn(rule, gone, came, record.marker.encode(), candidates[record.id])
    changed = _changed_blobs(repo, [(old, new) for _, old, new in held])
    blobs = {
        sha: data
        for sha, kind, data in repo.runner.stream_objects(
            sorted({sha for _, _, was, now in changed for sha in (was, now) if sha})
        )
        if data is not None
    }
    # a blob pair tells the same whichever record's commits hold it: learn it once, with
    # the marker of the first record that rewrote it
    marker_of = {old: record.marker.encode() for record, old, _new in reversed(held)}
    record_of = {old: record.id for record, old, _new in reversed(held)}
    for commit, path, was, now in changed:
        marker = marker_of[commit]
        if now is None:
            rule.remove_file(path, blobs[was])
            continue
        for gone, came in learn_fragments(blobs[was], blobs[now], marker):
            _learn(rule, gone, came, marker, candidates[record_of[commit]])
    for record in records:
        for text in candidates[record.id]:
            if record.matches(text.decode("utf-8", "surrogateescape")):
                rule.add(text, record.marker.encode(), exact=True)  # the text itself
                rule.verified.add(record.id)
    return rule


_ZERO = "0" * 40


def _commits_here(repo: Repository, shas: list[str]) -> set[str]:
    """Those of ``shas`` that are commits in this store: one ``cat-file --batch-check``."""
    if not shas:
        return set()
    stdin = "".join(sha + "\n" for sha in shas).encode()
    done = run_git(repo.root, "cat-file", "--batch-check", stdin=stdin)
    return {line.split(" ")[0] for line in done.stdout.splitlines() if " commit " in line}


def _changed_blobs(
    repo: Repository, pairs: list[tuple[str, str]]
) -> list[tuple[str, str, str, str | None]]:
    """(old commit, path, old blob, new blob or None when removed) of each file that differs
    between the pairs' commits, each (path, old, new) once: one ``git diff-tree``."""
    if not pairs:
        return []
    # a line "A B" of two commits compares A with B as its parent: the new commit first
    old_of = {new: old for old, new in pairs}
    stdin = "".join(f"{new} {old}\n" for old, new in pairs).encode()
    done = run_git(repo.root, "diff-tree", "--stdin", "-r", "--no-renames", "-z", stdin=stdin)
    tokens = done.out.split(b"\0")
    found: list[tuple[str, str, str, str | None]] = []
    seen: set[tuple[str, str, str]] = set()
    commit, at = "", 0
    while at < len(tokens):
        token = tokens[at].decode("utf-8", "surrogateescape")
        at += 1
        if not token.startswith(":"):
            commit = old_of.get(token.strip(), commit)
            continue
        path = tokens[at].decode("utf-8", "surrogateescape")
        at += 1
        _mode_a, _mode_b, was, now, status = token[1:].split(" ")[:5]
        if status.startswith("A") or was == _ZERO or (path, was, now) in seen:
            continue  # a purge adds no file
        seen.add((path, was, now))
        found.append((commit, path, was, None if now == _ZERO else now))
    return found


def _learn(
    rule: LearnedRule,
    gone: bytes,
    came: bytes,
    marker: bytes,
    candidates: set[bytes],
) -> None:
    if came == marker:
        candidates.add(gone)
    rule.add(gone, came)


# --- applying ---------------------------------------------------------------------------------


def compose_maps(records: list[PurgeRecord]) -> dict[str, str]:
    """old -> newest id over purges applied one after another (oldest record first)."""
    known: dict[str, str] = {}
    for record in records:
        for old, new in list(known.items()):
            known[old] = record.map.get(new, new)
        for old, new in record.map.items():
            known.setdefault(old, new)
    return known


def replay(
    repo: Repository, records: list[PurgeRecord], refs: dict[str, str], keep: Iterable[str] = ()
) -> tuple[HistoryRewrite, RewriteResult]:
    """Rewrite ``refs`` as ``records``' purges rewrote the history they share: their old
    commits become the purges' new ones, and every other commit the refs reach (but
    ``keep`` does not) is rebuilt on top with what the purges removed taken out of it.
    Objects are staged; the caller writes them and moves the refs."""
    composed = compose_maps(records)
    here = _commits_here(repo, [*composed, *composed.values(), *keep])
    known = {old: new for old, new in composed.items() if old in here and new in here}
    kept = [sha for sha in keep if sha in here]
    rule = learn_rule(repo, records)
    rewrite = HistoryRewrite(repo.objects, rule, known=known, keep=[*known, *known.values(), *kept])
    return rewrite, rewrite.run(refs)


def move_refs(repo: Repository, moved: dict[str, tuple[str, str]], reason: str) -> None:
    """Move every ref in ``moved`` (ref -> (old, new); old "" when new) in one git
    transaction and drop the stash (it holds the old content). When the branch moves, the
    journal makes the working files follow it, even after a kill right after the move."""
    branch = repo.refs.branch_ref()
    files: dict[str, list[str | None]] = {}
    if branch in moved:
        old, new = moved[branch]
        changes = repo.objects.diff_trees(old, new) if old and old != new else {}
        dirty = repo.unclean_paths(changes)
        if dirty:
            raise ConflictError(
                f"{', '.join(dirty[:3])} has changes not saved; save or discard them "
                "and try again (nothing was changed)"
            )
        files = {p: [a[1] if a else None, b[1] if b else None] for p, (a, b) in changes.items()}
    lines = [f"update {ref} {new} {old or '0' * 40}" for ref, (old, new) in moved.items()]
    stash = repo.refs.read("refs/stash")
    if stash:
        lines.append(f"delete refs/stash {stash}")
    if files:
        journal = {"ref": branch, "old": moved[branch][0], "new": moved[branch][1], "files": files}
        repo.lock.write_journal(json.dumps(journal).encode())
    stdin = ("\n".join(lines) + "\n").encode()
    run_git(repo.root, "update-ref", "-m", reason, "--stdin", stdin=stdin)
    if files:
        repo.recovery.repair()  # the working files and index entries follow the branch


def drop_old_objects(repo: Repository) -> tuple[list[str], int]:
    """Drop everything that still holds objects no ref reaches: reflogs, gitmem's caches
    (the search index and its vectors among them), unreachable objects. Run under the
    write lock: a save elsewhere writes its objects before its branch moves, and pruning
    then would take them. Returns the caches dropped and how many objects went."""
    before = _object_count(repo.runner.git("count-objects", "-v"))
    repo.runner.run_git("reflog", "expire", "--expire=now", "--expire-unreachable=now", "--all")
    caches = []
    for entry in sorted(repo.state_dir.iterdir()):
        if entry.name in _KEPT_STATE:
            continue
        caches.append(entry.name)
        if entry.is_dir():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                os.unlink(entry)
    repo.revisions.forget_caches()
    repo.objects.forget_trees()
    _prune(repo)
    after = _object_count(repo.runner.git("count-objects", "-v"))
    return caches, max(0, before - after)


def _prune(repo: Repository) -> None:
    """``git gc --prune=now`` under git's gc lock, so no housekeeping repack runs beside it
    (it waits for one that does)."""
    deadline = time.monotonic() + repo.lock_timeout
    while True:
        with git_gc_lock(repo.git_dir) as ours:
            if ours:  # gc itself would take our gc.pid for another gc's: --force
                repo.runner.run_git("gc", "--force", "--prune=now", "--quiet")
                return
        if time.monotonic() > deadline:
            raise LockTimeout(
                f"{repo.root}: a git gc kept running; the purge is done, run "
                "`git gc --prune=now` to drop the old objects"
            )
        time.sleep(0.05)


def _object_count(text: str) -> int:
    fields = dict(line.split(": ", 1) for line in text.splitlines() if ": " in line)
    return int(fields.get("count", 0)) + int(fields.get("in-pack", 0))
