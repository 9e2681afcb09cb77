"""``purge``: remove content from the whole history of a store, as one auditable operation.

A target (a text, a pattern, a session, one turn, one fact, or every secret the scan finds)
becomes a :class:`~gitmem.store.rewrite.ContentRule`; :class:`HistoryRewrite` rewrites every
commit of every ref with it under the write lock. The refs then move in one ``update-ref``
transaction (the commit point: a kill before it leaves the store as it was, after it the
journal lets the next writer bring the working files to the new HEAD), one commit
``Gitmem-Op: purge`` goes on top naming the target's kind and a salted hash of it, and the
purge is recorded under ``refs/gitmem/purges`` (old -> new commit ids, for remotes and
clones). Last, reflogs, stashes, caches and unreachable objects are dropped, so no object
in the store holds the content any more.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets as random_source
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from gitmem.core import SessionStore
from gitmem.errors import ValidationError
from gitmem.format.facts import FactSource, line_sources, source_token
from gitmem.format.paths import (
    archive_path,
    id_from_part_path,
    is_facts_path,
    memory_path,
    session_path,
)
from gitmem.guard.secrets import SecretConfig, find_secrets
from gitmem.models import Result
from gitmem.store.objects import Signature, signature
from gitmem.store.purgelog import (
    PURGES_REF,
    content_refs,
    drop_old_objects,
    move_refs,
    stage_record_commit,
)
from gitmem.store.rewrite import HistoryRewrite, RewriteResult

MARKER = "[purged]"
_TURN_HEADING = re.compile(rb"^#{2,3} ")


class PurgedCommit(Result):
    """A commit the purge changes: its id before (and after), the files, whether its message."""

    commit: str
    new: str | None = None
    files: list[str] = []  # noqa: RUF012 (pydantic copies it)
    message: bool = False


class PurgeReport(Result):
    """What a purge changed (or, with ``dry_run``, would change); never the content itself."""

    id: str
    kind: str
    salted_hash: str
    dry_run: bool
    commits: list[PurgedCommit] = []  # noqa: RUF012
    refs: dict[str, list[str]] = {}  # noqa: RUF012 (ref -> [old, new]; new "" when deleted)
    purge_commit: str | None = None
    removed: dict[str, int] = {}  # noqa: RUF012 (what the clean-up dropped, by kind)
    caches: list[str] = []  # noqa: RUF012


# --- the targets ----------------------------------------------------------------------------


def _text_of(data: bytes) -> str:
    return data.decode("utf-8", "surrogateescape")


def _bytes_of(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


@dataclass
class EverywhereRule:
    """A replacement run on every file and commit message (text, pattern, secrets)."""

    replace: Callable[[bytes], bytes]
    path_free: bool = True
    folders: tuple[str, ...] | None = None

    def wants(self, path: str) -> bool:
        return True

    def blob(self, path: str, data: bytes) -> bytes | None:
        return self.replace(data)

    def message(self, message: bytes) -> bytes:
        return self.replace(message)


def _replace_text(text: bytes, marker: bytes, data: bytes) -> bytes:
    """Every occurrence of ``text`` becomes the marker."""
    return data.replace(text, marker) if text in data else data


def _replace_pattern(pattern: re.Pattern[str], marker: str, data: bytes) -> bytes:
    """Every match of ``pattern`` becomes the marker."""
    text = _text_of(data)
    new = pattern.sub(marker.replace("\\", "\\\\"), text)
    return data if new == text else _bytes_of(new)


def _replace_secrets(config: SecretConfig, marker: str, data: bytes) -> bytes:
    """Every secret the history scan finds becomes the marker."""
    text = _text_of(data)
    found = list(find_secrets(text, config))
    if not found:
        return data
    for hit in reversed(found):
        text = text[: hit.start] + marker + text[hit.end :]
    return _bytes_of(text)


def _trailer_values(message: bytes, key: bytes) -> list[str]:
    prefix = key + b": "
    return [
        line[len(prefix) :].decode("utf-8", "replace").strip()
        for line in message.split(b"\n")
        if line.startswith(prefix)
    ]


def _masked_subject(message: bytes, marker: bytes) -> bytes:
    """The message with the text after its subject's first ``: `` (a turn's or fact's
    words in gitmem's subjects) replaced by the marker."""
    subject, sep, rest = message.partition(b"\n")
    head, colon, _words = subject.partition(b": ")
    return (head + colon + marker if colon else subject) + sep + rest


def _paths(session_id: str, namespace: str | None) -> tuple[str, str]:
    """A session's file and its archive part."""
    return session_path(session_id, namespace), archive_path(session_id, namespace)


def _is_session_file(path: str, session_id: str, namespace: str | None) -> bool:
    """Whether ``path`` is a session's file, one of its parts or its archive part."""
    return path in _paths(session_id, namespace) or id_from_part_path(path, namespace) == session_id


def _memory_folder(namespace: str | None) -> str:
    return memory_path(namespace).rsplit("/", 1)[0]


def _own_facts(path: str, namespace: str | None) -> bool:
    """Whether ``path`` is a memory file of ``namespace`` (another's never names its
    sessions)."""
    return is_facts_path(path) and path.rsplit("/", 1)[0] == _memory_folder(namespace)


def _folders(session_id: str, namespace: str | None) -> tuple[str, ...]:
    """The folders of a session's file and archive part."""
    return tuple(path.rsplit("/", 1)[0] for path in _paths(session_id, namespace))


def remove_sourced_facts(
    data: bytes, session_id: str, turn_id: str | None = None, told: set[bytes] | None = None
) -> bytes:
    """A memory file without the facts that came from a session (or one turn of it): they
    may retell what is purged. Their texts are added to ``told``."""
    whole = source_token(FactSource(session=session_id)).encode()
    turn = source_token(FactSource(session=session_id, interaction=turn_id)).encode()

    def came_from(source: bytes) -> bool:
        if turn_id is not None:
            return source == turn
        return source == whole or source.startswith(whole + b"#")

    lines = data.splitlines(keepends=True)
    gone = [line for line in lines if any(came_from(s) for s in line_sources(line))]
    if not gone:
        return data
    if told is not None:
        told.update(line.strip()[2:].rpartition(b" {#")[0] for line in gone)
    return b"".join(line for line in lines if line not in gone)


def _mask_lines(message: bytes, texts: set[bytes], marker: bytes) -> bytes:
    """``message`` with every line that quotes one of ``texts`` masked after its first
    ``: `` (a consolidation's "add: <fact>")."""
    if not texts:
        return message
    lines = message.split(b"\n")
    for at, line in enumerate(lines):
        if any(text and text in line for text in texts):
            head, colon, _rest = line.partition(b": ")
            lines[at] = head + colon + marker if colon else marker
    return b"\n".join(lines)


def remove_summaries_of(data: bytes, turn_id: str) -> bytes:
    """A session file without the summary sections that cover turn ``turn_id``: they may
    retell it (a new summary can be made from the turns that are left)."""
    lines = data.splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if line.startswith(b"## ")]
    drop: list[tuple[int, int]] = []
    for at, start in enumerate(starts):
        end = starts[at + 1] if at + 1 < len(starts) else len(lines)
        if not lines[start].startswith(b"## Summary"):
            continue
        covers = [
            line.split(b":", 1)[1] for line in lines[start:end] if line.startswith(b"**Covers**:")
        ]
        ids = {part.strip().decode("utf-8", "replace") for c in covers for part in c.split(b",")}
        if turn_id in ids:
            drop.append((start, end))
    for start, end in reversed(drop):
        del lines[start:end]
    if not drop:
        return data
    kept = b"".join(lines)
    return kept.rstrip(b"\n") + b"\n" if kept.strip() else b""


@dataclass
class SessionRule:
    """A session's file, parts and archive part gone, and the facts that came from it; its
    commits' subjects masked."""

    session_id: str
    namespace: str | None
    marker: bytes
    path_free: bool = False
    told: set[bytes] = field(default_factory=set)  # texts of the facts removed

    @property
    def folders(self) -> tuple[str, ...]:
        return (*_folders(self.session_id, self.namespace), _memory_folder(self.namespace))

    def wants(self, path: str) -> bool:
        mine = _is_session_file(path, self.session_id, self.namespace)
        return mine or _own_facts(path, self.namespace)

    def blob(self, path: str, data: bytes) -> bytes | None:
        if is_facts_path(path):
            return remove_sourced_facts(data, self.session_id, told=self.told)
        mine = _is_session_file(path, self.session_id, self.namespace)
        return None if mine else data

    def message(self, message: bytes) -> bytes:
        named = ", ".join(_trailer_values(message, b"Gitmem-Session")).split(", ")
        if self.session_id in named:
            message = _masked_subject(message, self.marker)
        return _mask_lines(message, self.told, self.marker)


def remove_turn(data: bytes, turn_id: str) -> bytes:
    """A session file without the turn ``turn_id``'s block: from its heading to the next
    heading of a turn or section; every other byte stays."""
    lines = data.splitlines(keepends=True)
    tag = ("{#" + turn_id + "}").encode()
    start = next(
        (
            i
            for i, line in enumerate(lines)
            if _TURN_HEADING.match(line) and line.rstrip().endswith(tag)
        ),
        None,
    )
    if start is None:
        return data
    end = next((i for i in range(start + 1, len(lines)) if _TURN_HEADING.match(lines[i])), None)
    if end is not None:
        return b"".join(lines[:start] + lines[end:])
    kept = b"".join(lines[:start]).rstrip(b"\n")
    return kept + b"\n" if kept else b""


@dataclass
class TurnRule:
    """One turn's block gone from its session's file, parts and archive part, in every commit,
    with the summaries that cover it and the facts that came from it."""

    session_id: str
    turn_id: str
    namespace: str | None
    marker: bytes
    path_free: bool = False
    told: set[bytes] = field(default_factory=set)  # texts of the facts removed

    @property
    def folders(self) -> tuple[str, ...]:
        return (*_folders(self.session_id, self.namespace), _memory_folder(self.namespace))

    def wants(self, path: str) -> bool:
        mine = _is_session_file(path, self.session_id, self.namespace)
        return mine or _own_facts(path, self.namespace)

    def blob(self, path: str, data: bytes) -> bytes | None:
        if is_facts_path(path):
            return remove_sourced_facts(data, self.session_id, self.turn_id, self.told)
        return remove_summaries_of(remove_turn(data, self.turn_id), self.turn_id)

    def message(self, message: bytes) -> bytes:
        if self.turn_id in _trailer_values(message, b"Gitmem-Interaction"):
            message = _masked_subject(message, self.marker)
        return _mask_lines(message, self.told, self.marker)


def remove_fact(data: bytes, fact_id: str) -> bytes:
    """A memory file without the line of fact ``fact_id``."""
    tag = re.compile(rb"^\s*[-*] .*\{#" + re.escape(fact_id.encode()) + rb"[ }]")
    lines = data.splitlines(keepends=True)
    kept = [line for line in lines if not tag.match(line)]
    return data if len(kept) == len(lines) else b"".join(kept)


@dataclass
class FactRule:
    """One fact's line gone from the memory files, in every commit."""

    fact_id: str
    namespace: str | None
    marker: bytes
    path_free: bool = False

    @property
    def folders(self) -> tuple[str, ...]:
        return (_memory_folder(self.namespace),)

    def wants(self, path: str) -> bool:
        return is_facts_path(path)

    def blob(self, path: str, data: bytes) -> bytes | None:
        return remove_fact(data, self.fact_id)

    def message(self, message: bytes) -> bytes:
        if self.fact_id in _trailer_values(message, b"Gitmem-Fact"):
            return _masked_subject(message, self.marker)
        return message


Rule = EverywhereRule | SessionRule | TurnRule | FactRule


@dataclass(frozen=True)
class PurgeTarget:
    """What to purge: exactly one of the fields is set."""

    text: str | None = None
    pattern: str | None = None
    session: str | None = None
    turn: str | None = None  # SESSION#TURN
    fact: str | None = None
    secrets: bool = False

    def kind_and_value(self) -> tuple[str, str]:
        chosen = [
            (kind, value)
            for kind, value in (
                ("text", self.text),
                ("pattern", self.pattern),
                ("session", self.session),
                ("turn", self.turn),
                ("fact", self.fact),
                ("secrets", "secrets" if self.secrets else None),
            )
            if value
        ]
        if len(chosen) != 1:
            raise ValidationError(
                "name exactly one thing to purge: text, pattern, session, turn, fact or secrets"
            )
        return chosen[0]

    def rule(self, namespace: str | None, config: SecretConfig, marker: str) -> Rule:
        kind, value = self.kind_and_value()
        mark = marker.encode()
        if kind == "text":
            return EverywhereRule(partial(_replace_text, value.encode(), mark))
        if kind == "pattern":
            try:
                pattern = re.compile(value)
            except re.error as exc:
                raise ValidationError(
                    f"the pattern is not a valid regular expression: {exc}"
                ) from None
            return EverywhereRule(partial(_replace_pattern, pattern, marker))
        if kind == "session":
            return SessionRule(value, namespace, mark)
        if kind == "turn":
            session_id, sep, turn_id = value.rpartition("#")
            if not sep or not session_id or not turn_id:
                raise ValidationError("a turn is named SESSION#TURN, e.g. s1#i3f4cff87")
            return TurnRule(session_id, turn_id, namespace, mark)
        if kind == "fact":
            return FactRule(value, namespace, mark)
        return EverywhereRule(partial(_replace_secrets, config, marker))


# --- the operation --------------------------------------------------------------------------


class Purges:
    """Purging content from a store's whole history (see the module docs)."""

    def __init__(self, store: SessionStore) -> None:
        self.store = store

    def purge(
        self, target: PurgeTarget, *, dry_run: bool = False, marker: str = MARKER
    ) -> PurgeReport:
        """Rewrite every ref's history without ``target``; see the module docs."""
        kind, value = target.kind_and_value()
        rule = target.rule(self.store.namespace, self.store.guard.secret_config, marker)
        salt = random_source.token_hex(16)
        report = PurgeReport(
            id=time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + salt[:8],
            kind=kind,
            salted_hash=hashlib.sha256(f"{salt}:{kind}:{value}".encode()).hexdigest(),
            dry_run=dry_run,
        )
        repo = self.store.repo
        with repo.transaction("a purge"):
            refs = content_refs(repo)
            rewrite = HistoryRewrite(repo.objects, rule)
            done = rewrite.run(refs)
            self._describe(report, done)
            if dry_run or not done.commits:
                repo.objects.staged.clear()
                return report
            self._publish(report, rewrite, salt, marker)
            # under the write lock: a save elsewhere has written its objects before its
            # branch moves, and pruning now would take them
            self._clean_up(report)
        return report

    @staticmethod
    def _describe(report: PurgeReport, done: RewriteResult) -> None:
        messages = set(done.messages)
        report.commits = [
            PurgedCommit(
                commit=old, new=new, files=done.files.get(old, []), message=old in messages
            )
            for old, new in done.commits.items()
        ]
        report.refs = {ref: [old, new] for ref, (old, new) in done.refs.items()}

    def _publish(
        self, report: PurgeReport, rewrite: HistoryRewrite, salt: str, marker: str
    ) -> None:
        """Write the new objects, the purge commit and the record; move every ref at once."""
        repo = self.store.repo
        branch = repo.refs.branch_ref()
        old_head = repo.refs.read(branch)
        moved = dict(rewrite.result.refs)
        new_head = moved.get(branch, (old_head, old_head))[1] if old_head else None
        rewrite.write()  # unreachable until the refs move: a kill before leaves only garbage
        sig = signature(repo.identity)
        if old_head and new_head:
            message = (
                f"Purge {report.kind} from history\n\n"
                f"Rewrote {len(report.commits)} commits.\n\n"
                f"Gitmem-Op: purge\nGitmem-Purge-Kind: {report.kind}\n"
                f"Gitmem-Purge-Hash: sha256:{report.salted_hash}\n"
                f"Gitmem-Purge-Id: {report.id}\n"
            )
            tree = repo.objects.commit_tree(new_head)
            purge_commit = repo.objects.stage_commit(tree, [new_head], sig, message)
            moved[branch] = (old_head, purge_commit)
            report.purge_commit = purge_commit
            report.refs[branch] = [old_head, purge_commit]
        record = self._record(report, salt, marker, rewrite.result, sig)
        moved[PURGES_REF] = (repo.refs.read(PURGES_REF) or "", record)
        rewrite.write()  # the purge commit and the record
        stash = repo.refs.read("refs/stash")
        if stash:
            report.refs["refs/stash"] = [stash, ""]
        move_refs(repo, moved, "gitmem purge")

    def _record(
        self, report: PurgeReport, salt: str, marker: str, done: RewriteResult, sig: Signature
    ) -> str:
        """The commit of ``refs/gitmem/purges`` with this purge's record added."""
        repo = self.store.repo
        record: dict[str, Any] = {
            "id": report.id,
            "kind": report.kind,
            "salted_hash": report.salted_hash,
            "salt": salt,
            "marker": marker,
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "map": dict(done.commits),
            "refs": report.refs,
            "purge_commit": report.purge_commit,
        }
        parent = repo.refs.read(PURGES_REF)
        data = json.dumps(record, indent=1, sort_keys=True).encode()
        message = f"Record purge {report.id}\n\nGitmem-Op: purge-record\n"
        return stage_record_commit(
            repo, [parent] if parent else [], {f"{report.id}.json": data}, sig, message
        )

    def _clean_up(self, report: PurgeReport) -> None:
        """Drop what still holds the old objects: reflogs, caches, unreachable objects."""
        report.caches, removed = drop_old_objects(self.store.repo)
        report.removed = {"objects": removed, "refs": len(report.refs)}
