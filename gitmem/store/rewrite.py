"""Rewriting history in one process: every commit of every ref, with a rule for file content.

:class:`HistoryRewrite` walks the commits reachable from the refs (parents first), rewrites
only the blobs the rule changes, and rebuilds the trees and commits above them. Everything
else is kept byte for byte: a commit's headers (author, committer, dates, encoding) stay,
its message changes only where the rule says, and a commit whose tree, parents and message
did not change is the same object, so it keeps its id. Nothing is written until
:meth:`HistoryRewrite.write`, and no ref moves here: the caller moves them all at once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from gitmem.store.objects import MODE_TREE, ObjectDatabase, Tree

_SUBMODULE = b"160000"


class ContentRule(Protocol):
    """What a rewrite changes: file content by path, and commit and tag messages."""

    # True when blob() ignores the path: one answer per blob id, however many paths hold it
    path_free: bool

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

    def __init__(self, objects: ObjectDatabase, rule: ContentRule) -> None:
        self.objects = objects
        self.rule = rule
        self._blobs: dict[tuple[str, str], str | None] = {}
        self._trees: dict[tuple[str, str], str | None] = {}
        self._changed_paths: dict[tuple[str, str], list[str]] = {}
        self._commits: dict[str, str] = {}
        self.result = RewriteResult()

    # --- the walk ------------------------------------------------------------------------

    def run(self, refs: dict[str, str]) -> RewriteResult:
        """Rewrite every commit reachable from ``refs`` (name -> object id); objects are
        staged, not written."""
        self.objects.staged.clear()
        tips = sorted(set(refs.values()))
        if tips:
            _, out = self.objects.runner.run_git("rev-list", "--topo-order", "--reverse", *tips)
            for line in out.decode().splitlines():
                commit = line.split()[0]
                self._commit(commit)
        for ref, old in refs.items():
            new = self._ref_target(old)
            if new != old:
                self.result.refs[ref] = (old, new)
        return self.result

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
        body = self.objects.read_object(commit, "commit")
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

    def _tree(self, tree: str, prefix: str) -> str | None:
        """The new id of ``tree`` at ``prefix``, or None when nothing is left in it."""
        key = (tree, prefix)
        if key in self._trees:
            return self._trees[key]
        parsed = Tree.parse(self.objects.read_object(tree, "tree"))
        edited: Tree | None = None
        changed: list[str] = []
        for name, (mode, sha) in list(parsed.entries.items()):
            path = prefix + name.decode("utf-8", "surrogateescape")
            if mode == MODE_TREE:
                new: str | None = self._tree(sha.hex(), path + "/")
                changed += self._changed_paths.get((sha.hex(), path + "/"), [])
            elif mode == _SUBMODULE or not self.rule.wants(path):
                continue
            else:
                new = self._blob(sha.hex(), path)
                if new != sha.hex():
                    changed.append(path)
            if new == sha.hex():
                continue
            edited = edited or parsed.copy()
            if new is None:
                edited.remove(name)
            else:
                edited.set(name, mode, bytes.fromhex(new))
        result: str | None = tree
        if edited is not None:
            data = edited.serialize()
            result = self.objects.stage("tree", data) if data else None
        self._trees[key] = result
        if changed:
            self._changed_paths[key] = changed
        return result

    def _blob(self, blob: str, path: str) -> str | None:
        key = (blob, "" if self.rule.path_free else path)
        if key in self._blobs:
            return self._blobs[key]
        data = self.objects.read_object(blob, "blob")
        new_data = self.rule.blob(path, data)
        if new_data is None:
            result: str | None = None
        elif new_data == data:
            result = blob
        else:
            result = self.objects.stage("blob", new_data)
        self._blobs[key] = result
        return result
