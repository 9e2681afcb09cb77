"""Rewriting history in one process: every commit of every ref, with a rule for file content.

:class:`HistoryRewrite` walks the commits reachable from the refs (parents first), rewrites
only the blobs the rule changes, and rebuilds the trees and commits above them. Everything
else is kept byte for byte: a commit's headers (author, committer, dates, encoding) stay,
its message changes only where the rule says, and a commit whose tree, parents and message
did not change is the same object, so it keeps its id. Nothing is written until
:meth:`HistoryRewrite.write`, and no ref moves here: the caller moves them all at once.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

from gitmem.store.git import run_git
from gitmem.store.objects import MODE_TREE, ObjectDatabase

_SUBMODULE = b"160000"


# one tree entry: mode, name, binary id
_ENTRY = re.compile(rb"([0-7]+) ([^\0]*)\0(.{20})", re.DOTALL)


class ContentRule(Protocol):
    """What a rewrite changes: file content by path, and commit and tag messages."""

    # True when blob() ignores the path: one answer per blob id, however many paths hold it
    path_free: bool

    @property
    def folders(self) -> tuple[str, ...] | None:
        """The folders that may hold a file it changes (None: any)."""

    def wants(self, path: str) -> bool:
        """Whether the file at ``path`` may change (False: its blob is not even read)."""

    def blob(self, path: str, data: bytes) -> bytes | None:
        """The new content of the file (``data`` when unchanged), or None to remove it."""

    def message(self, message: bytes) -> bytes:
        """The new message of a commit or tag (``message`` when unchanged)."""


@dataclass
class RewriteResult:
    """What a rewrite would change: commit id maps and the refs that move."""

    commits: dict[str, str] = field(default_factory=dict)  # old -> new, changed ones only
    files: dict[str, list[str]] = field(default_factory=dict)  # old commit -> paths changed
    messages: list[str] = field(default_factory=list)  # old commits whose message changed
    refs: dict[str, tuple[str, str]] = field(default_factory=dict)  # ref -> (old, new)


class HistoryRewrite:
    """One rewrite of a store's history by a :class:`ContentRule` (see the module docs)."""

    def __init__(
        self,
        objects: ObjectDatabase,
        rule: ContentRule,
        *,
        known: dict[str, str] | None = None,
        keep: Iterable[str] = (),
    ) -> None:
        """``known``: commits already rewritten elsewhere (old -> new), taken as they are;
        ``keep``: commits that neither they nor their ancestors are rewritten."""
        self.objects = objects
        self.rule = rule
        self._keep = sorted(set(keep))
        self._blobs: dict[tuple[str, str], str | None] = {}
        self._trees: dict[tuple[str, str], str | None] = {}
        self._changed_paths: dict[tuple[str, str], list[str]] = {}
        self._commits: dict[str, str] = dict(known or {})
        self._read: dict[str, bytes] = {}  # read ahead, in one pass
        # binary ids of trees and blobs the rule leaves as they are, wherever they are
        # (only for a rule that ignores paths)
        self._same: set[bytes] = set()
        self.result = RewriteResult()

    # --- the walk ------------------------------------------------------------------------

    def run(self, refs: dict[str, str]) -> RewriteResult:
        """Rewrite every commit reachable from ``refs`` (name -> object id); objects are
        staged, not written."""
        self.objects.staged.clear()
        tips = sorted(set(refs.values()))
        if tips:
            self._read_ahead(tips)
            out = self._rev_list(tips, "--topo-order", "--reverse")
            for line in out.decode().splitlines():
                commit = line.split()[0]
                self._commit(commit)
        for ref, old in refs.items():
            new = self._ref_target(old)
            if new != old:
                self.result.refs[ref] = (old, new)
        return self.result

    def _read_ahead(self, tips: list[str]) -> None:
        """Read every commit and tree (and blob, when the rule may change any) through one
        ``cat-file --batch``: a request per object costs ten times more."""
        only = [] if self.rule.folders is None else ["--filter=blob:none"]
        out = self._rev_list(tips, "--objects", *only)
        shas = [line[:40].decode() for line in out.splitlines()]
        for sha, _kind, data in self.objects.runner.stream_objects(shas):
            if data is not None:
                self._read[sha] = data

    def _rev_list(self, tips: list[str], *options: str) -> bytes:
        """``git rev-list`` of ``tips`` without what the kept commits reach (read from
        stdin: there may be thousands)."""
        revs = tips + ["^" + sha for sha in self._keep]
        stdin = ("\n".join(revs) + "\n").encode()
        root = self.objects.runner.root
        return run_git(
            root, "-c", "core.quotepath=false", "rev-list", *options, "--stdin", stdin=stdin
        ).out

    def _object(self, sha: str, kind: str) -> bytes:
        data = self._read.pop(sha, None)
        return data if data is not None else self.objects.read_object(sha, kind)

    def write(self) -> None:
        """Write the staged objects (one pack)."""
        self.objects.flush()

    def _ref_target(self, sha: str) -> str:
        if sha in self._commits:
            return self._commits[sha]
        kind = self.objects.runner.git("cat-file", "-t", sha).strip()
        if kind != "tag":
            return sha  # a tree or blob tagged directly is left as it is
        body = self.objects.read_object(sha, "tag")
        header, sep, message = body.partition(b"\n\n")
        target = header[7:47].decode()
        new_target = self._ref_target(target)
        new_body = b"object " + new_target.encode() + header[47:] + sep + self.rule.message(message)
        if new_body == body:
            return sha
        return self.objects.stage("tag", new_body)

    def _commit(self, commit: str) -> None:
        body = self._object(commit, "commit")
        header, sep, message = body.partition(b"\n\n")
        lines = header.split(b"\n")
        tree = lines[0][5:].decode()
        new_tree = self._tree(tree, "") or self._empty_tree()
        new_message = self.rule.message(message)
        out = [b"tree " + new_tree.encode()]
        for line in lines[1:]:
            if line.startswith(b"parent "):
                old_parent = line[7:].decode()
                line = b"parent " + self._commits.get(old_parent, old_parent).encode()
            out.append(line)
        new_body = b"\n".join(out) + sep + new_message
        if new_body == body:
            self._commits[commit] = commit
            return
        new = self.objects.stage("commit", new_body)
        self._commits[commit] = new
        self.result.commits[commit] = new
        if new_tree != tree:
            self.result.files[commit] = sorted(self._changed_paths.get((tree, ""), []))
        if new_message != message:
            self.result.messages.append(commit)

    def _empty_tree(self) -> str:
        return self.objects.stage("tree", b"")

    def _descend(self, path: str) -> bool:
        folders = self.rule.folders
        return folders is None or any(f == path or f.startswith(path + "/") for f in folders)

    def _tree(self, tree: str, prefix: str) -> str | None:
        """The new id of ``tree`` at ``prefix``, or None when nothing is left in it."""
        key = (tree, "" if self.rule.path_free else prefix)
        if key in self._trees:
            return self._trees[key]
        data = self._object(tree, "tree")
        # (offset, end, new id or None) of the entries that change; names and modes stay,
        # so the order does too and the bytes are edited in place
        edits: list[tuple[int, int, str | None]] = []
        changed: list[str] = []
        same = self._same
        for match in _ENTRY.finditer(data):
            mode, name, sha = match.groups()
            if sha in same:
                continue  # the common case: a file or folder already seen, unchanged
            hexsha = sha.hex()
            new = self._entry(mode, name, hexsha, prefix, changed)
            if new != hexsha:
                edits.append((match.start(), match.end(), new))
            elif self.rule.path_free:
                same.add(sha)
        result: str | None = tree
        if edits:
            body = bytearray(data)
            for start, end, new in reversed(edits):
                if new is None:
                    del body[start:end]
                else:
                    body[end - 20 : end] = bytes.fromhex(new)
            result = self.objects.stage("tree", bytes(body)) if body else None
        self._trees[key] = result
        if changed:
            self._changed_paths[key] = changed
        return result

    def _entry(
        self, mode: bytes, name: bytes, hexsha: str, prefix: str, changed: list[str]
    ) -> str | None:
        """The new id of one entry of a tree (its changed files added to ``changed``)."""
        free = self.rule.path_free
        if mode == MODE_TREE:
            path = prefix + name.decode("utf-8", "surrogateescape")
            if not self._descend(path):
                return hexsha
            new = self._tree(hexsha, path + "/")
            changed += self._changed_paths.get((hexsha, "" if free else path + "/"), [])
            return new
        if mode == _SUBMODULE:
            return hexsha
        path = prefix + name.decode("utf-8", "surrogateescape")
        if not self.rule.wants(path):
            return hexsha
        new = self._blob(hexsha, path)
        if new != hexsha:
            changed.append(path)
        return new

    def _blob(self, blob: str, path: str) -> str | None:
        key = (blob, "" if self.rule.path_free else path)
        if key in self._blobs:
            return self._blobs[key]
        data = self._object(blob, "blob")
        new_data = self.rule.blob(path, data)
        if new_data is None:
            result: str | None = None
        elif new_data == data:
            result = blob
        else:
            result = self.objects.stage("blob", new_data)
        self._blobs[key] = result
        return result
