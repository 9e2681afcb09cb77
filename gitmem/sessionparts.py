"""``SessionParts``: the part files a huge session continues in, a part of the store.

A session whose file would hold more than :data:`PART_TURNS` turns moves its oldest turns into
numbered part files beside it (``<id>~0001.md``, see ``format/paths.py``), so a save
rewrites (hashes, compresses, writes) one small file at any session size. This module finds a
session's parts at a commit or in a transaction, keeps the ids of their turns for the next
save, and rolls the hot file's oldest turns over into new parts; the store
(:class:`~gitmem.core.SessionStore`) holds one and calls it on its save path.
"""

from __future__ import annotations

import operator
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence

from gitmem.errors import ValidationError
from gitmem.format.parse import parse_bytes
from gitmem.format.paths import PART_MARK, SUFFIX, part_of, part_path, session_path
from gitmem.format.render import render
from gitmem.models import Interaction, Session
from gitmem.store.repository import Repository
from gitmem.store.transaction import Transaction, content

# a session whose file would hold more turns than this continues in part files of this
# many turns each, so that a save rewrites (hashes, compresses, writes) a small file
PART_TURNS = 250

# the id of a turn in its heading, ``### <time> {#<id>}``
_TURN_ID = re.compile(rb"^### [^\n]*\{#([^\s{}]+)\}[ \t]*\r?$", re.MULTILINE)


class SessionParts:
    """The part files of the sessions of one store (and namespace)."""

    def __init__(
        self,
        repo: Repository,
        namespace: str | None,
        *,
        parse_blob: Callable[[str, str], Session],
        cached: Callable[[str, str], Session | None],
    ) -> None:
        """``parse_blob`` and ``cached`` read the store's parsed-session cache (a parse
        kept, and a look without parsing)."""
        self.repo = repo
        self.namespace = namespace
        self.parse_blob = parse_blob
        self.cached = cached
        self.turns_per_part = PART_TURNS
        # session path -> its parts' blob ids and the ids of their turns, for the last few
        # sessions saved to that have parts
        self._frozen: OrderedDict[str, tuple[tuple[str, ...], frozenset[str]]] = OrderedDict()
        self._lock = threading.Lock()

    def files(self, session_id: str, commit: str | None = None) -> list[tuple[str, str]]:
        """(path, blob id) of the part files holding a session's older turns, oldest first."""
        return [(path, blob) for _n, path, blob in self._numbered(session_id, commit)]

    def _numbered(self, session_id: str, commit: str | None) -> list[tuple[int, str, str]]:
        path = session_path(session_id, self.namespace)
        folder, name = path.rsplit("/", 1)
        tree = self.repo.folder_tree(folder, commit)
        if tree is None:
            return []
        prefix = (name[: -len(SUFFIX)] + PART_MARK).encode("utf-8")
        found: list[tuple[int, str, str]] = []
        for raw, (_mode, sha) in tree.entries.items():
            if raw.startswith(prefix):
                number = _part_number(raw[len(prefix) :])
                if number is not None:
                    found.append((number, f"{folder}/{raw.decode('utf-8')}", sha.hex()))
        return sorted(found)

    def _stem(self, session_id: str) -> str:
        return session_path(session_id, self.namespace)[: -len(SUFFIX)] + PART_MARK

    def in_transaction(self, txn: Transaction, session_id: str) -> list[tuple[str, Session]]:
        """A session's parts as the transaction sees them (its pending writes first)."""
        head = txn.head()
        files = {p: (n, b) for n, p, b in self._numbered(session_id, head)} if head else {}
        stem = self._stem(session_id)
        out: list[tuple[int, str, Session]] = []
        for path, data in txn.pending.items():
            number = _part_number(path[len(stem) :].encode()) if path.startswith(stem) else None
            if number is not None:
                files.pop(path, None)
                if data is not None:
                    out.append((number, path, parse_bytes(content(data), path)))
        out += [(n, path, self.parse_blob(path, blob)) for path, (n, blob) in files.items()]
        return [(path, session) for _n, path, session in sorted(out, key=lambda x: x[0])]

    def frozen_ids(self, txn: Transaction, session_id: str) -> tuple[list[str], frozenset[str]]:
        """The paths of a session's parts and the ids of their turns, read from the raw
        text unless parsed already, and kept for the next save to the same parts."""
        stem = self._stem(session_id)
        if any(path.startswith(stem) for path in txn.pending):  # written in this batch
            parts = self.in_transaction(txn, session_id)
            return [p for p, _s in parts], frozenset(
                t.id for _p, s in parts for t in s.interactions
            )
        numbered = self._numbered(session_id, txn.head()) if txn.head() else []
        if not numbered:
            return [], frozenset()
        key = tuple(blob for _n, _p, blob in numbered)
        with self._lock:
            held = self._frozen.get(stem)
        if held is not None and held[0] == key:
            ids = held[1]
        else:
            ids = frozenset(i for _n, path, blob in numbered for i in self._ids_in(path, blob))
        with self._lock:
            self._frozen[stem] = (key, ids)
            self._frozen.move_to_end(stem)
            while len(self._frozen) > 16:
                self._frozen.popitem(last=False)
        return [path for _n, path, _b in numbered], ids

    def _ids_in(self, path: str, blob: str) -> Iterable[str]:
        """The turn ids of a session file: from its parsed session when cached, else from
        its turn headings."""
        cached = self.cached(path, blob)
        if cached is not None:
            return [t.id for t in cached.interactions]
        return [m.decode("utf-8", "replace") for m in _TURN_ID.findall(self.repo.blob(blob))]

    def check_new_ids(self, current: Session, updated: Session, frozen: frozenset[str]) -> None:
        """Refuse a turn id that a part of the session already has."""
        if not frozen:
            return
        had = {t.id for t in current.interactions}
        clash = {t.id for t in updated.interactions if t.id not in had} & frozen
        if clash:
            raise ValidationError(
                f"session {updated.id!r} already has an interaction with id {min(clash)!r}"
            )

    def unfrozen(
        self, txn: Transaction, parts: list[tuple[str, Session]], updated: Session
    ) -> tuple[Session, list[str]]:
        """The part of a whole changed session that goes to its file: the turns after
        its parts when those are unchanged, else every turn (the parts are deleted and
        made again by :meth:`roll_over`, in the same bytes where their turns are the same).
        """
        frozen = [turn for _p, part in parts for turn in part.interactions]
        turns = updated.interactions
        if len(turns) >= len(frozen) and all(map(operator.is_, frozen, turns)):
            kept = updated.model_copy(update={"interactions": turns[len(frozen) :]})
            return kept, [path for path, _s in parts]
        for part, _session in parts:
            txn.delete(part)
        return updated, []

    def roll_over(
        self,
        txn: Transaction,
        session_id: str,
        parts: list[str],
        hot: Session,
        flat: bool,
    ) -> Session:
        """``hot`` with its oldest turns moved into new part files while it holds more than
        ``turns_per_part`` turns (in the same commit: splitting a huge session is one commit);
        ``flat``: written as a flat batch writes (see :meth:`~gitmem.core.SessionStore.batch`).
        """
        write = txn.write_now if flat else txn.write
        size = max(1, self.turns_per_part)
        turns = hot.interactions
        if len(turns) <= size:
            return hot
        number = max((part_of(p, self.namespace) or ("", 0))[1] for p in parts) if parts else 0
        while len(turns) > size:
            number += 1
            chunk, turns = turns[:size], turns[size:]
            part = part_session(hot, chunk)
            data = render(part, remember=not flat).encode("utf-8")
            write(part_path(session_id, number, self.namespace), data)
        return hot.model_copy(update={"interactions": turns})


def _part_number(rest: bytes) -> int | None:
    """The number of a part file from its name after the session's name and the mark."""
    digits = rest[: -len(SUFFIX)] if rest.endswith(SUFFIX.encode()) else b""
    return int(digits) if digits.isdigit() and digits.isascii() else None


def joined(session: Session, parts: Sequence[Session]) -> Session:
    """A session's file and its parts as the one session they are: the parts' turns first."""
    if not parts:
        return session
    older = [turn for part in parts for turn in part.interactions]
    return session.model_copy(update={"interactions": [*older, *session.interactions]})


def part_session(session: Session, turns: list[Interaction]) -> Session:
    """The part file's session for ``turns`` of ``session``: its head says only what the
    turns do, so the same turns always give the same bytes."""
    speakers = [m.speaker for turn in turns for m in turn.messages]
    return Session(
        id=session.id,
        created=turns[0].timestamp,
        last_active=max(turn.timestamp for turn in turns),
        participants=list(dict.fromkeys(speakers)),
        language=session.language,
        interactions=turns,
    )
