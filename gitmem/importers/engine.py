"""What every importer shares: merging imported sessions into the store as one commit.

An importer reads another tool's files (nanobot, OpenClaw, chat exports, LoCoMo) and yields
gitmem :class:`~gitmem.models.Session` objects whose interaction ids are stable (see
:func:`stable_id`): the same turn read again gets the same id, however the source has
shifted it. :func:`run_import` merges them into the store additively (:func:`merge_session`):
turns the store lacks are appended, turns it has are kept as stored (also turns the source
has since dropped, and turns saved by hand), and a stored turn the source now has
otherwise is reported as differing, never overwritten. The whole import is one commit
(``Gitmem-Op: import`` plus ``Gitmem-Source``); an unchanged source makes no commit, a
malformed input (:class:`ImportFormatError`, naming ``file:line``) or ``dry_run`` changes
nothing.

Foreign keys become session ids through :func:`safe_session_id`: verbatim when gitmem can
store them, else a readable form plus a hash, so a key like ``../x`` or one with a NUL
stays inside the store and two keys never share a session.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import stat
import unicodedata
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass
from datetime import tzinfo
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from gitmem.errors import BranchMoved, ConflictError, GitmemError, ValidationError
from gitmem.format.paths import MAX_NAME_BYTES, encode_id, portability_problem
from gitmem.guard.secrets import redact
from gitmem.manager import MemoryManager
from gitmem.models import Interaction, Result, Session, Summary
from gitmem.store.transaction import MAX_REBUILDS

# a session id longer than this (in characters) is shortened with a hash
MAX_ID_CHARS = 120


class ImportFormatError(ValidationError):
    """An input file does not hold what its importer reads; the message names file:line."""

    def __init__(self, where: str, problem: str) -> None:
        super().__init__(f"{where}: {problem}")
        self.where = where


def time_zone(name: str | None) -> tzinfo | None:
    """The zone an importer reads naive timestamps in: ``name`` (IANA, e.g.
    ``Europe/Berlin``, or ``UTC``), or None for this machine's local zone."""
    if not name:
        return None
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValidationError(
            f"--tz {name!r} is not a known time zone (e.g. Europe/Berlin, UTC)"
        ) from None


def stable_id(prefix: str, *parts: str) -> str:
    """An interaction id that depends only on ``parts`` (e.g. key, first timestamp, text).

    Positions are never part of it: nanobot and OpenClaw compact their files, so a turn's
    index changes while its content does not.
    """
    digest = hashlib.sha256("\x1f".join(parts).encode("utf-8", "surrogatepass")).hexdigest()
    return f"{prefix}-{digest[:16]}"


def safe_session_id(key: str) -> str:
    """``key`` as a session id: verbatim when the store can name a file after it and it
    holds no secret, else its printable part (secrets replaced, control characters, NULs
    and edge spaces dropped, cut to ``MAX_ID_CHARS``) and ``~`` plus a hash of the whole
    key, so distinct keys stay distinct and an import is never stopped by one key.
    """
    shown, secrets = redact(key, label=True)  # a key holding a token: named without it
    if not secrets and _storable(key):
        return key
    cleaned = "".join(
        ch for ch in shown if unicodedata.category(ch) not in ("Cc", "Cs", "Zl", "Zp")
    ).strip()
    digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    # keep the readable part short enough that the encoded name fits any file system
    head = cleaned[:MAX_ID_CHARS]
    while head and len(encode_id(head).encode()) > MAX_NAME_BYTES - 20:
        head = head[: len(head) // 2]
    return f"{head.strip()}~{digest}" if head.strip() else f"key~{digest}"


def _storable(key: str) -> bool:
    if not key or key != key.strip() or len(key) > MAX_ID_CHARS or "~" in key:
        return False
    if any(unicodedata.category(ch) in ("Cc", "Cs", "Zl", "Zp") for ch in key):
        return False
    try:
        encode_id(key)
    except GitmemError:
        return False
    return portability_problem(key) is None


@dataclass(frozen=True)
class Merged:
    """An imported session merged into the stored one (see :func:`merge_session`).

    Attributes:
        session: the result; the stored ``Session`` object itself when nothing changes.
        added: ids of the imported turns the store did not have.
        differing: ids of turns the store has with other content than the file; the
            stored version is kept.
        summary: True when the imported summary replaced (or became) the stored one.
        extended: ids of stored turns the source has since given more messages (a reply
            written after the last import); they now hold the new messages too.
    """

    session: Session
    added: tuple[str, ...] = ()
    differing: tuple[str, ...] = ()
    summary: bool = False
    extended: tuple[str, ...] = ()


def merge_session(  # noqa: C901
    stored: Session | None,
    imported: Session,
    *,
    elsewhere: Collection[str] = (),
    same: Callable[[Interaction, Interaction], bool] | None = None,
) -> Merged:
    """``imported`` added to ``stored`` without losing anything ``stored`` has.

    Turns are matched by id: an imported turn the store lacks (neither in ``stored`` nor
    among ``elsewhere``, e.g. the ids a summary moved to the archive part) is appended in
    file order; a stored turn is kept as it is, and listed in ``differing`` when ``same``
    (default: equal timestamp and messages) says the file has it otherwise, unless the
    file only has more messages after the stored ones (``extended``). Participants
    and tags are joined, the project is kept if set, the time span is widened, the
    source's metadata keys are set. The imported summary is taken when the store has none,
    or when the stored one came from the same model and is older (the source summarised
    again); a summary gitmem or a person wrote is kept.
    """
    if stored is None:
        return Merged(
            imported,
            tuple(t.id for t in imported.interactions),
            summary=imported.summary is not None,
        )
    equal = same or (lambda a, b: a.timestamp == b.timestamp and a.messages == b.messages)
    have = {turn.id: turn for turn in stored.interactions}
    added: list[Interaction] = []
    differing: list[str] = []
    grown: dict[str, Interaction] = {}
    for turn in imported.interactions:
        kept = have.get(turn.id)
        if kept is None:
            if turn.id not in elsewhere:
                added.append(turn)
                have[turn.id] = turn
        elif equal(kept, turn):
            continue
        elif _grew(kept, turn, equal):
            grown[turn.id] = turn  # the source added replies to a turn: nothing is lost
        else:
            differing.append(turn.id)
    update: dict[str, Any] = {}
    if added or grown:
        update["interactions"] = [grown.get(t.id, t) for t in stored.interactions] + added
    for name in ("participants", "tags", "links"):
        joined = list(dict.fromkeys([*getattr(stored, name), *getattr(imported, name)]))
        if joined != getattr(stored, name):
            update[name] = joined
    if stored.project is None and imported.project is not None:
        update["project"] = imported.project
    if imported.created < stored.created:
        update["created"] = imported.created
    if imported.last_active > stored.last_active:
        update["last_active"] = imported.last_active
    extra = {**stored.extra, **imported.extra}
    if extra != stored.extra:
        update["extra"] = extra
    if _newer_summary(stored.summary, imported.summary):
        update["summary"] = imported.summary
    session = stored.model_copy(update=update) if update else stored
    return Merged(
        session, tuple(t.id for t in added), tuple(differing), "summary" in update, tuple(grown)
    )


def _grew(
    kept: Interaction, turn: Interaction, equal: Callable[[Interaction, Interaction], bool]
) -> bool:
    """True when ``turn`` is ``kept`` with more messages after it (a reply that came later)."""
    if len(turn.messages) <= len(kept.messages):
        return False
    return equal(kept, turn.model_copy(update={"messages": turn.messages[: len(kept.messages)]}))


def _newer_summary(stored: Summary | None, imported: Summary | None) -> bool:
    if imported is None:
        return False
    if stored is None:
        return True
    return (
        stored.model == imported.model
        and stored.text != imported.text
        and imported.generated >= stored.generated
    )


class ImportResult(Result):
    """What an import did: the session ids it touched (in source order), the turns it
    ``added``, the stored turns kept although the source has them otherwise
    (``differing``, both as (session id, interaction id) pairs), how many source turns the
    store already had (``skipped``), the sessions whose summary was taken, and the commit
    (None when nothing changed or on a dry run)."""

    source: str = ""
    sessions: list[str] = []  # noqa: RUF012  (pydantic copies it for each instance)
    added: list[tuple[str, str]] = []  # noqa: RUF012
    differing: list[tuple[str, str]] = []  # noqa: RUF012
    summaries: list[str] = []  # noqa: RUF012
    extended: list[tuple[str, str]] = []  # noqa: RUF012
    skipped: int = 0
    commit: str | None = None
    commits: list[str] = []  # noqa: RUF012  (more than one when a huge import went in parts)
    dry_run: bool = False
    warnings: list[str] = []  # noqa: RUF012  (source files left out, and why)
    unchanged_files: int = 0  # files merged before and unchanged since: not read again

    def to_dict(self) -> dict[str, Any]:
        """What ``gitmem import ... --json`` prints."""
        return {
            "source": self.source,
            "sessions": self.sessions,
            "commit": self.commit,
            "warnings": self.warnings,
            "commits": self.commits,
            "dry_run": self.dry_run,
            "turns_added": len(self.added),
            "added": [{"session_id": s, "interaction_id": i} for s, i in self.added],
            "skipped": self.skipped,
            "unchanged_files": self.unchanged_files,
            "summaries": self.summaries,
            "extended": [{"session_id": s, "interaction_id": i} for s, i in self.extended],
            "conflicts": [{"session_id": s, "interaction_id": i} for s, i in self.differing],
        }

    def describe(self) -> str:
        """One line for people: what changed, or that nothing did."""
        what = (
            f"{len(self.sessions)} session(s), {len(self.added)} new turn(s), "
            f"{self.skipped} already stored"
        )
        if self.extended:
            what += f", {len(self.extended)} turn(s) with new replies"
        if self.summaries:
            what += f", {len(self.summaries)} summary(ies)"
        if self.differing:
            what += f", {len(self.differing)} stored turn(s) kept that differ from the source"
        if self.dry_run:
            return f"would import {what} (dry run, nothing written)"
        tail = f" in {self.commit[:12]}" if self.commit else " (nothing changed, no commit)"
        if len(self.commits) > 1:
            tail = f" in {len(self.commits)} commits (parts), the last {self.commits[-1][:12]}"
        return f"imported {what}{tail}"


# an input bigger than this (bytes) is checked in a first pass, then committed in parts of
# about this many characters of messages (each a commit): what a batch holds in memory grows
# with its size (about 7 times the input), and a 1 GB export must not need gigabytes
PART_SIZE = 128_000_000


class _DryRun(Exception):
    """Raised inside the batch so that a dry run leaves the store as it was."""


def run_import(
    mm: MemoryManager,
    sessions: Iterable[Session],
    *,
    source: str,
    subject: str,
    dry_run: bool = False,
    progress: Callable[[ImportResult], None] | None = None,
    reread: Callable[[], Iterable[Session]] | None = None,
    size: int = 0,
    part_size: int = PART_SIZE,
    warnings: Iterable[str] = (),
) -> ImportResult:
    """Merge ``sessions`` into ``mm`` as one commit (``Gitmem-Op: import``,
    ``Gitmem-Source: source``) and say what changed.

    ``sessions`` may be a generator that reads files lazily; any error it raises (e.g.
    :class:`ImportFormatError`) drops the whole import. A session id may come more than
    once (e.g. one per source file): each part merges into what the earlier ones left.
    ``progress(result so far)`` is called after each session.

    Huge inputs: when the input is over ``part_size`` bytes (``size``) and ``reread`` can
    read it again, it is first read through once to check it (a malformed line still
    changes nothing), then committed in parts of about ``part_size`` characters of messages
    (``Gitmem-Import-Part: n``), so memory stays flat however big the input.
    """
    result = ImportResult(source=source, dry_run=dry_run, warnings=list(warnings))
    if reread is None:  # read once only: the batch keeps its changes to make them again
        _one_batch(mm, iter(sessions), result, subject, source, dry_run, progress, None)
        return result
    if size <= part_size:
        _flat_batches(mm, sessions, reread, result, subject, source, dry_run, progress, None)
        return result
    for _session in reread():
        pass  # the whole input is read once first: an error in it writes nothing
    _flat_batches(mm, reread(), reread, result, subject, source, dry_run, progress, part_size)
    return result


def _flat_batches(
    mm: MemoryManager,
    sessions: Iterable[Session],
    reread: Callable[[], Iterable[Session]],
    result: ImportResult,
    subject: str,
    source: str,
    dry_run: bool,
    progress: Callable[[ImportResult], None] | None,
    limit: int | None,
) -> None:
    """Commit ``sessions`` in flat batches (one, or parts of about ``limit`` characters):
    files go into the object database as they are rendered and no session is kept, so
    memory stays flat. A person's commit to the same files during a batch writes nothing
    of it: that batch is read from ``reread`` and merged again on top of their commit."""
    remaining = iter(sessions)
    taken = 0  # sessions merged into the batches committed so far
    part = 1 if limit is not None else None
    for _attempt in range(MAX_REBUILDS):
        before = result.model_copy(deep=True)
        tally = _Tally()
        try:
            more = _one_batch(
                mm,
                _tallied(remaining, tally),
                result,
                subject if part is None else f"{subject} (part {part})",
                source,
                dry_run,
                progress,
                limit,
                part,
                flat=True,
            )
        except BranchMoved:
            for name in type(result).model_fields:
                setattr(result, name, getattr(before, name))
            remaining = itertools.islice(iter(reread()), taken, None)
            continue
        taken += tally.taken
        if not more:
            return
        part = (part or 1) + 1
    raise ConflictError(f"{subject}: the branch kept moving under the import; nothing more written")


@dataclass
class _Tally:
    taken: int = 0


def _tallied(sessions: Iterator[Session], tally: _Tally) -> Iterator[Session]:
    """The sessions of ``sessions``, counting in ``tally`` those taken."""
    for session in sessions:
        tally.taken += 1
        yield session


def _one_batch(
    mm: MemoryManager,
    sessions: Iterator[Session],
    result: ImportResult,
    subject: str,
    source: str,
    dry_run: bool,
    progress: Callable[[ImportResult], None] | None,
    limit: int | None,
    part: int | None = None,
    *,
    flat: bool = False,
) -> bool:
    """Merge sessions from ``sessions`` into one commit; with ``limit``, stop after about
    that many characters of messages and return True when more are left."""
    trailers = {"Gitmem-Source": source}
    if part is not None:
        trailers["Gitmem-Import-Part"] = str(part)
    size, more = 0, False
    try:
        with mm.batch(subject, trailers=trailers, flat=flat) as done:
            base = mm.head()  # the batch holds the write lock: the branch stays here
            for imported in sessions:
                _merge_one(mm, imported, result, base)
                if imported.id not in result.sessions:
                    result.sessions.append(imported.id)
                if progress is not None:
                    progress(result)
                if limit is not None:
                    size += sum(len(m.content) for t in imported.interactions for m in t.messages)
                    if size > limit:
                        more = True
                        break
            if dry_run:
                raise _DryRun
        if done.commit is not None:
            result.commit = done.commit
            result.commits.append(done.commit)
    except _DryRun:
        pass
    return more


def _merge_one(
    mm: MemoryManager, imported: Session, result: ImportResult, base: str | None
) -> None:
    # a summary may have moved turns to the archive part
    archived = mm.load_archive(imported.id, commit=base) if base else None
    elsewhere = {t.id for t in archived.interactions} if archived else set()

    def same(stored: Interaction, given: Interaction) -> bool:
        return same_turn(mm, stored, given)

    def change(current: Session | None) -> Session | None:
        merged = merge_session(current, imported, elsewhere=elsewhere, same=same)
        result.added += [(imported.id, iid) for iid in merged.added]
        result.differing += [(imported.id, iid) for iid in merged.differing]
        result.extended += [(imported.id, iid) for iid in merged.extended]
        result.skipped += len(imported.interactions) - len(merged.added) - len(merged.extended)
        if merged.summary and imported.id not in result.summaries:
            result.summaries.append(imported.id)
        return merged.session

    mm.change_session(imported.id, change, op="import", subject=f"Import {imported.id}")


def same_turn(mm: MemoryManager, stored: Interaction, imported: Interaction) -> bool:
    """Equal, counting a secret the source has as the marker the store has in its place."""
    if stored.timestamp != imported.timestamp or len(stored.messages) != len(imported.messages):
        return False
    config = mm.secret_config
    for kept, given in zip(stored.messages, imported.messages, strict=True):
        if kept.speaker != given.speaker:
            return False
        if kept.content != given.content and (
            not config.redact or redact(given.content, config)[0] != kept.content
        ):
            return False
    return True


def source_file_problem(path: Path, root: Path) -> str | None:
    """Why an importer must leave ``path`` out, or None: only regular files are read (a
    FIFO would block, a folder fails), and a link only when it stays inside ``root`` (else
    anyone who can make a link there could have any readable file committed)."""
    try:
        if path.is_symlink() and not path.resolve().is_relative_to(root.resolve()):
            return f"{path}: a link to {path.resolve()}, outside {root}; left out"
        if not stat.S_ISREG(path.stat().st_mode):
            return f"{path}: not a regular file; left out"
    except OSError as exc:
        return f"{path}: cannot be read ({exc.strerror or exc}); left out"
    return None


def json_object(line: str | bytes, where: str) -> dict[str, Any]:
    """One JSONL line as an object, or ImportFormatError naming ``where`` (file:line)."""
    try:
        record = json.loads(line.decode("utf-8") if isinstance(line, bytes) else line)
    except UnicodeDecodeError as exc:
        raise ImportFormatError(where, f"not UTF-8 ({exc.reason})") from None
    except json.JSONDecodeError as exc:
        raise ImportFormatError(where, f"not JSON ({exc.msg})") from None
    except RecursionError:
        raise ImportFormatError(where, "not JSON that can be read: nested too deeply") from None
    if not isinstance(record, dict):
        raise ImportFormatError(where, "expected a JSON object")
    return record


def numbered_lines(path: str, handle: Iterable[bytes]) -> Iterator[tuple[int, str]]:
    """Lines of a file opened in binary, decoded one at a time (memory stays flat on huge
    files), with 1-based numbers; bad UTF-8 names the line."""
    for number, raw in enumerate(handle, 1):
        try:
            yield number, raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ImportFormatError(f"{path}:{number}", f"not UTF-8 ({exc.reason})") from None


@dataclass
class Meter:
    """How far a reader is through its input, for a progress bar: bytes ``done`` of
    ``total`` (0 when unknown). Readers add to ``done`` as they consume lines."""

    total: int = 0
    done: int = 0
