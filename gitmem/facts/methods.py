"""Curated long-term memory for ``MemoryManager``: facts with provenance in ``memory/MEMORY.md``.

Sessions hold what was said; the memory file holds what the agent knows across sessions
("lives in Berlin", "prefers tea"), one fact per bullet, each with a stable id and the
turns it came from (:mod:`gitmem.format.facts` is the file format). Every change is one
commit with ``Gitmem-Op: remember | update-fact | forget | supersede | pin-fact |
unpin-fact`` and ``Gitmem-Fact: <ids>``, so ``gitmem facts blame`` can say which agent and
model wrote each fact, and a revert undoes one change by fact id. A fact tagged ``pinned``
comes first in every context. A person may edit the file by hand: the
edit is committed before gitmem's next write, and a file that no longer parses is never
written over (ParseError with ``path:line``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

from gitmem.core import SessionStore
from gitmem.errors import FactNotFound, ParseError, ValidationError
from gitmem.facts.factindex import PINNED_TAG, FactIndex, WeighedFact
from gitmem.facts.rowcache import FactRowsCache
from gitmem.facts.shape import FactShape
from gitmem.format.facts import (
    DEFAULT_SECTION,
    Fact,
    FactSource,
    MemoryFile,
    as_moment,
    changed_run,
    derived_id,
    fact_line,
    memory_of_rows,
    parse_facts,
    render_facts,
    splice_facts,
    strict_rows,
)
from gitmem.format.paths import memory_path
from gitmem.guard.redact import redact_fact, redact_sections
from gitmem.models import as_when
from gitmem.store.gitlog import LogEntry
from gitmem.store.transaction import Transaction
from gitmem.text import one_line

MAX_FACT_BYTES = 8192
# a memory file this long (~1,000 facts) keeps its cut lines on disk for a new process
ROWS_CACHED_ABOVE = 100_000  # a fact is a sentence or two; a document belongs in a session
MERGE_ATTRIBUTE = b"memory/*.md merge=gitmem text eol=lf\n"

SourceLike = tuple[str, str | None] | str | FactSource


@dataclass(frozen=True)
class FactBlame:
    """Who last wrote a fact: the commit, its agent and model, and the operation."""

    fact: Fact
    commit: str
    author: str
    agent: str | None
    model: str | None
    op: str | None
    when: datetime
    subject: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.fact.id,
            "text": self.fact.text,
            "section": self.fact.section,
            "commit": self.commit,
            "author": self.author,
            "agent": self.agent,
            "model": self.model,
            "op": self.op,
            "when": self.when.isoformat(),
            "subject": self.subject,
        }


def as_sources(source: SourceLike | Iterable[SourceLike] | None) -> tuple[FactSource, ...]:
    """``("s1", "i3")``, ``"s1#i3"``, ``"s1"``, a FactSource or a list of them."""
    if source is None:
        return ()
    if isinstance(source, (str, FactSource)) or (
        isinstance(source, tuple)
        and len(source) == 2
        and isinstance(source[0], str)
        and (source[1] is None or isinstance(source[1], str))
    ):
        items: list[Any] = [source]
    else:
        items = list(source)
    out = []
    for item in items:
        if isinstance(item, FactSource):
            out.append(item)
        elif isinstance(item, str):
            session, _, turn = item.partition("#")
            out.append(FactSource(session=session, interaction=turn or None))
        else:
            out.append(FactSource(session=item[0], interaction=item[1]))
    return tuple(out)


class Facts:
    """Curated facts: remember, update, forget, supersede, list, blame (see module docs)."""

    def __init__(self, store: SessionStore) -> None:
        self.store = store
        self._fact_cache: dict[str, tuple[MemoryFile, FactIndex | None]] = {}
        self._fact_lock = threading.Lock()
        # each fact's rendered line, by the identity of the (frozen) Fact object it renders
        self._fact_lines: dict[int, tuple[Fact, str]] = {}
        self._fact_terms: dict[str, frozenset[str]] = {}  # words -> terms, for the index
        self._last_render: tuple[MemoryFile, bytes] | None = None  # the version written last
        # the shape of a version of the file, by the identity of its (frozen) MemoryFile
        self._shapes: dict[int, tuple[MemoryFile, FactShape]] = {}
        self.max_fact_bytes = MAX_FACT_BYTES
        self._rows = FactRowsCache(store.repo.state_dir / "facts-rows")

    @property
    def facts_path(self) -> str:
        """The memory file's path in the store (per namespace)."""
        return memory_path(self.store.namespace)

    # --- reading -------------------------------------------------------------------------

    def _memory_blob(
        self, blob_id: str, *, head: bool = True
    ) -> tuple[MemoryFile, FactIndex | None]:
        """The parsed file of blob ``blob_id`` (and its index, once made); ``head``: the
        file at the branch's tip, whose cut lines a large file keeps for a new process
        (an older version's would only take their place)."""
        with self._fact_lock:
            found = self._fact_cache.get(blob_id)
        if found is None:
            found = self._cache_memory(blob_id, self._read_blob(blob_id, head))
        return found

    def _read_blob(self, blob_id: str, head: bool) -> MemoryFile:
        """The file of blob ``blob_id``: built from its cut lines when a process kept them
        (a large file), else read from git (and, at ``head``, its lines kept when it is
        large)."""
        rows = self._rows.load(self.facts_path, blob_id)
        if rows is not None:
            try:
                return memory_of_rows(rows)
            except (ValueError, TypeError, AttributeError, IndexError):
                pass  # not rows as the cache writes them: read the blob
        data = self.store.repo.blob(blob_id)
        rows = strict_rows(data) if len(data) > ROWS_CACHED_ABOVE else None
        if rows is None:
            return parse_facts(data, self.facts_path)
        memory = memory_of_rows(rows)
        if head:
            self._rows.save(self.facts_path, blob_id, rows)
        return memory

    def _cache_memory(
        self, blob_id: str, memory: MemoryFile
    ) -> tuple[MemoryFile, FactIndex | None]:
        found = (memory, None)
        with self._fact_lock:
            if len(self._fact_cache) > 32:
                self._fact_cache.clear()
            self._fact_cache[blob_id] = found
        return found

    def _shape(self, memory: MemoryFile) -> FactShape:
        with self._fact_lock:
            found = self._shapes.get(id(memory))
        if found is not None and found[0] is memory:
            return found[1]
        shape = FactShape.of(memory)
        self._keep_shape(memory, shape)
        return shape

    def _keep_shape(
        self, memory: MemoryFile, shape: FactShape, moved_from: MemoryFile | None = None
    ) -> None:
        """Keep ``shape`` for ``memory``; ``moved_from``: the version it was the shape of
        before it changed into this one's (that version's is computed again if needed)."""
        with self._fact_lock:
            if moved_from is not None:
                self._shapes.pop(id(moved_from), None)
            if len(self._shapes) > 4:
                self._shapes.clear()
            self._shapes[id(memory)] = (memory, shape)

    def _render_facts(
        self,
        memory: MemoryFile,
        before: MemoryFile | None = None,
        run: tuple[int, int] | None = None,
    ) -> bytes:
        """The file's bytes; a fact rendered before (the same object) costs a lookup, and a
        change of ``before`` (the version rendered last) splices the changed lines into its
        bytes, so a change to one fact of a large file does not render every other one."""
        lines = self._fact_lines

        def line(fact: Fact) -> str:
            found = lines.get(id(fact))
            if found is None or found[0] is not fact:
                found = lines[id(fact)] = (fact, fact_line(fact))
            return found[1]

        with self._fact_lock:
            last, data = self._last_render, None
            if before is not None and last is not None and last[0] is before:
                data = splice_facts(before, last[1], memory, line, run)
            if data is None:
                data = render_facts(memory, line).encode("utf-8", "surrogatepass")
            self._last_render = (memory, data)
            if len(lines) > 2 * len(memory.facts) + 256:  # keep only this version's lines
                self._fact_lines = {id(f): lines[id(f)] for f in memory.facts}
        return data

    def memory_file(self, *, commit: str | None = None) -> MemoryFile:
        """The parsed memory file at HEAD (or ``commit``); an empty one if there is none.
        Raises ParseError (``path:line``) if the committed file is broken."""
        found = self.store.repo.entry(self.facts_path, commit)
        if found is None:
            return MemoryFile()
        return self._memory_blob(found[1], head=commit is None)[0]

    def _fact_index(self, commit: str | None) -> FactIndex:
        found = self.store.repo.entry(self.facts_path, commit)
        if found is None:
            return FactIndex(())
        memory, index = self._memory_blob(found[1], head=commit is None)
        if index is None:
            with self._fact_lock:  # the terms cache is shared
                index = FactIndex(memory.facts, self._fact_terms)
                self._fact_cache[found[1]] = (memory, index)
        return index

    def candidates(
        self, query: str, commit: str | None, limit: int
    ) -> list[tuple[str, str, float]]:
        return self._fact_index(commit).candidates(query, limit)

    def weigh(
        self, query: str, session_id: str, commit: str | None, limit: int
    ) -> tuple[list[WeighedFact], bool]:
        """The facts for a context about ``query`` in ``session_id``, those that matter
        first (pinned, matches, this session's), at most ``limit``; and whether that is
        every current fact."""
        return self._fact_index(commit).weigh(query, session_id, limit)

    def facts(
        self,
        section: str | None = None,
        query: str | None = None,
        *,
        as_of: datetime | str | None = None,
        commit: str | None = None,
        tags: Iterable[str] = (),
        include_past: bool = False,
        limit: int | None = None,
    ) -> list[Fact]:
        """The facts, in file order (with ``query``: best match first, matches only).

        Args:
            section: only this section.
            query: rank by the words (stemmed, CJK-aware) they share with the query.
            as_of: the memory as it was at that moment (a datetime or ISO date): the file
                of the last commit before it, and only the facts valid then.
            commit: read the file at this commit (``mm.at(rev).facts()`` sets it).
            tags: only facts with all of these tags.
            include_past: also facts that were replaced or whose ``valid until`` passed.
            limit: at most this many.
        """
        moment = None
        if as_of is not None:
            moment = as_when(as_of, "as_of")
            assert moment is not None
            commit = self.store.repo.resolve(moment)
        picked: Iterable[Fact]
        if query is None:  # the file alone: its terms are analysed for a query only
            picked = self.memory_file(commit=commit).facts
        else:
            picked = [f for _, f in self._fact_index(commit).rank(query)]
        wanted = set(tags)
        at = None if moment is None else moment.astimezone(UTC).replace(tzinfo=None)
        out = []
        for fact in picked:
            if section is not None and fact.section != section:
                continue
            if wanted and not wanted <= set(fact.tags):
                continue
            if not include_past and not fact.current(at):
                continue
            if at is not None and fact.valid_from and as_moment(fact.valid_from) > at:
                continue
            out.append(fact)
            if limit is not None and len(out) >= limit:
                break
        return out

    def fact(self, fact_id: str, *, commit: str | None = None) -> Fact:
        """One fact by id (current or past); FactNotFound if the file has none."""
        found = self.memory_file(commit=commit).get(fact_id)
        if found is None:
            where = "" if commit is None else f" at {commit[:12]}"
            raise FactNotFound(
                f"no fact {fact_id!r} in {self.facts_path}{where} (see `gitmem facts list --all`)"
            )
        return found

    # --- writing -------------------------------------------------------------------------

    def _guard_fact(self, txn: Transaction, fact: Fact) -> Fact:
        """A new or changed fact, size-checked and with its secrets redacted."""
        size = len(fact.text.encode("utf-8", "surrogatepass"))
        if size > self.max_fact_bytes:
            raise ValidationError(
                f"fact {fact.id!r} is {size:,} bytes, over the {self.max_fact_bytes:,}-byte "
                "limit for a fact (mm.max_fact_bytes); save long text as a session turn and "
                "remember a sentence about it"
            )
        return self._redact_fact(txn, fact)

    def _redact_fact(self, txn: Transaction, fact: Fact) -> Fact:
        """``fact`` with its secrets redacted (counted on ``txn``)."""
        if not self.store.guard.secret_config.redact:
            return fact
        fact, counts = redact_fact(fact, self.store.guard.secret_config)
        for kind, n in counts.items():
            txn.redacted[kind] = txn.redacted.get(kind, 0) + n
        return fact

    def _redact_sections(self, txn: Transaction, memory: MemoryFile) -> MemoryFile:
        """``memory`` with its section headings' secrets redacted (counted on ``txn``)."""
        if not self.store.guard.secret_config.redact:
            return memory
        memory, counts = redact_sections(memory, self.store.guard.secret_config)
        for kind, n in counts.items():
            txn.redacted[kind] = txn.redacted.get(kind, 0) + n
        return memory

    def _read_facts(self, txn: Transaction) -> MemoryFile:
        """The file as the lock holder sees it; a person's uncommitted edit is committed
        first (it must parse: a broken file is never written over)."""
        path = self.facts_path
        edited = txn.hand_edit(path)
        if edited is not None:
            memory = parse_facts(edited, path)
            redacted = self._redact_sections(
                txn, memory.with_facts(self._redact_fact(txn, f) for f in memory.facts)
            )
            if redacted != memory:  # a pasted secret is not recorded, as in a session file
                memory, edited = redacted, render_facts(redacted).encode("utf-8")
            txn.write(path, edited)
            txn.commit(
                f"Record hand edit of {path}",
                trailers={"Gitmem-Op": "edit"},
                identity=self.store.hand_identity(),
                body="A person edited this file outside gitmem; recorded before the next change.",
            )
            return memory
        if path in txn.pending:
            data = txn.read(path)
            return MemoryFile() if data is None else parse_facts(data, path)
        found = self.store.repo.entry(path, txn.head())  # parsed once per version (the cache)
        return MemoryFile() if found is None else self._memory_blob(found[1])[0]

    def change_facts(
        self,
        change: Callable[[MemoryFile], MemoryFile],
        *,
        op: str,
        subject: str,
        body: str = "",
        trailers: dict[str, str] | None = None,
    ) -> str | None:
        """Read-modify-write the memory file as one commit (``Gitmem-Op: op``); returns the
        commit id, or None when ``change`` changed nothing. Facts that are new or changed
        are guarded (size, secrets); ``Gitmem-Fact`` lists their ids and the removed ones."""
        return self._write_change(change, op, subject, body, trailers)[0]

    def _write_change(
        self,
        change: Callable[[MemoryFile], MemoryFile],
        op: str,
        subject: str,
        body: str = "",
        trailers: dict[str, str] | None = None,
        runs: dict[int, tuple[int, int]] | None = None,
    ) -> tuple[str | None, dict[str, Fact]]:
        """:meth:`change_facts`, also returning the new and changed facts as written (by
        id). ``runs``: the :func:`changed_run` of the version ``change`` returned, by its
        identity, when the change knows it (no comparison of the two versions then)."""
        self.store.no_batch("a change to the facts")
        written: dict[str, Fact] = {}
        with self.store.repo.transaction() as txn:

            def write() -> str | None:
                written.clear()
                before = self._read_facts(txn)
                after = change(before)
                # only the run between the facts both share (the same objects) can differ
                run = (runs or {}).get(id(after)) or changed_run(before.facts, after.facts)
                start, end = run
                changed = after.facts[start : len(after.facts) - end]
                old = {f.id: f for f in before.facts[start : len(before.facts) - end]}
                same = [(g := old.get(f.id)) is f or g == f for f in changed]
                guarded = [
                    f if kept else self._guard_fact(txn, f)
                    for f, kept in zip(changed, same, strict=True)
                ]
                if any(g is not f for g, f in zip(guarded, changed, strict=True)):
                    facts = (*after.facts[:start], *guarded, *after.facts[start + len(changed) :])
                    after = after.model_copy(update={"facts": facts})  # same order
                if after.sections != before.sections:  # a new heading: as a fact's section
                    after = self._redact_sections(txn, after)
                if after == before:
                    return None
                data = self._render_facts(after, before, run)
                txn.write(self.facts_path, data)
                self._merge_attributes(txn)
                touched = [f.id for f, kept in zip(guarded, same, strict=True) if not kept]
                written.update((f.id, f) for f, kept in zip(guarded, same, strict=True) if not kept)
                gone = set(old) - {f.id for f in guarded}
                ids = [*touched, *sorted(gone)]
                all_trailers = self.store.trailers(op, [])
                if ids:
                    all_trailers["Gitmem-Fact"] = ", ".join(ids[:20]) + (
                        f" (+{len(ids) - 20})" if len(ids) > 20 else ""
                    )
                all_trailers.update(trailers or {})
                sha = txn.commit(
                    self.store.guard.safe_text(subject), body=body, trailers=all_trailers
                )
                found = None if sha is None else self.store.repo.entry(self.facts_path, sha)
                if found is not None:  # its blob id, hashed once by the commit
                    self._cache_memory(found[1], after)
                return sha

            return txn.rebuilding(write), dict(written)

    def _merge_attributes(self, txn: Transaction) -> None:
        """Stores made before facts existed merge ``memory/*.md`` by fact id too."""
        current = txn.read(".gitattributes") or b""
        if MERGE_ATTRIBUTE.split(b" ")[0] + b" merge=gitmem" not in current:
            if current and not current.endswith(b"\n"):
                current += b"\n"
            txn.write(".gitattributes", current + MERGE_ATTRIBUTE)

    def remember(
        self,
        text: str,
        *,
        section: str = DEFAULT_SECTION,
        source: SourceLike | Iterable[SourceLike] | None = None,
        tags: Iterable[str] = (),
        valid_from: date | datetime | str | None = None,
        valid_until: date | datetime | str | None = None,
        confidence: float | None = None,
        fact_id: str | None = None,
        by_hand: bool = False,
    ) -> Fact:
        """Add a fact to ``section`` as one commit and return it (with its new id).

        ``source`` is where it was learned: ``(session, interaction)``, ``"session#turn"``,
        ``"session"`` or a list of them. Without one the fact says which agent wrote it, or
        with ``by_hand`` that a person did (the CLI's ``facts add``). The same text in the
        same section is not added twice: the existing fact gains the new sources instead.
        """
        if not isinstance(text, str) or not text.strip():
            raise ValidationError("a fact needs text (got an empty one)")
        sources = as_sources(source)
        by = None if sources or by_hand else self.writer()
        made: list[Fact] = []
        runs: dict[int, tuple[int, int]] = {}

        def change(memory: MemoryFile) -> MemoryFile:
            same = None
            runs.clear()  # (of an earlier attempt)
            shape = self._shape(memory)
            if text in shape.texts:  # most texts are new
                same = next(
                    (
                        f
                        for f in memory.facts
                        if f.text == text and f.section == section and f.current()
                    ),
                    None,
                )
            if same is not None and fact_id is None:
                more = tuple(dict.fromkeys([*same.sources, *sources]))
                updated = same.model_copy(update={"sources": more})
                made.append(updated)
                return memory.with_facts(updated if f is same else f for f in memory.facts)
            taken = shape.ids
            if fact_id is not None and fact_id in taken:
                raise ValidationError(f"fact id {fact_id!r} is taken in {self.facts_path}")
            fact = _new_fact(
                fact_id or derived_id(text, taken),
                text,
                section,
                sources,
                tags,
                valid_from,
                valid_until,
                confidence,
                by,
            )
            made.append(fact)
            placed = shape.place(memory, fact)
            if placed is None:
                return memory.with_facts([*memory.facts, fact])
            after, at = placed
            runs[id(after)] = (at, len(memory.facts) - at)
            self._keep_shape(after, shape, moved_from=memory)
            return after

        _, written = self._write_change(
            change, "remember", f"Remember: {one_line(text, 60)}", runs=runs
        )
        return written.get(made[-1].id) or self.fact(made[-1].id)

    def update_fact(
        self,
        fact_id: str,
        text: str | None = None,
        *,
        section: str | None = None,
        tags: Iterable[str] | None = None,
        valid_from: date | datetime | str | None = None,
        valid_until: date | datetime | str | None = None,
        confidence: float | None = None,
        source: SourceLike | Iterable[SourceLike] | None = None,
    ) -> Fact:
        """Change a fact in place (its id stays) as one commit; FactNotFound if unknown."""
        update: dict[str, Any] = {}
        if text is not None:
            if not text.strip():
                raise ValidationError(f"fact {fact_id!r}: the new text is empty")
            update["text"] = text
        if section is not None:
            update["section"] = section
        if tags is not None:
            update["tags"] = tuple(tags)
        if valid_from is not None:
            update["valid_from"] = _iso(valid_from)
        if valid_until is not None:
            update["valid_until"] = _iso(valid_until)
        if confidence is not None:
            update["confidence"] = confidence
        extra = as_sources(source)

        def change(memory: MemoryFile) -> MemoryFile:
            old = self._require(memory, fact_id)
            fields = {**old.model_dump(), **update}
            fields["sources"] = tuple(dict.fromkeys([*old.sources, *extra]))
            new = _checked(fields)
            return memory.with_facts(new if f is old else f for f in memory.facts)

        self.change_facts(
            change,
            op="update-fact",
            subject=f"Update fact {fact_id}: {one_line(text or '', 50)}".rstrip(": "),
        )
        return self.fact(fact_id)

    def forget(self, fact_id: str, reason: str = "") -> str:
        """Remove a fact as one commit (``Gitmem-Reason``); history keeps it. Returns the
        commit id; FactNotFound if there is no such fact."""

        def change(memory: MemoryFile) -> MemoryFile:
            old = self._require(memory, fact_id)
            return memory.with_facts(f for f in memory.facts if f is not old)

        trailers = {"Gitmem-Reason": one_line(reason, 200)} if reason.strip() else {}
        sha = self.change_facts(
            change,
            op="forget",
            subject=f"Forget fact {fact_id}",
            body=reason.strip(),
            trailers=trailers,
        )
        assert sha is not None  # removing a fact always changes the file
        return sha

    def supersede(
        self,
        old_id: str,
        new: str,
        *,
        reason: str = "",
        source: SourceLike | Iterable[SourceLike] | None = None,
        when: date | datetime | str | None = None,
    ) -> Fact:
        """Replace fact ``old_id`` by ``new`` (an existing fact's id, or the new text), as
        one commit: the old fact stays in the file, ``valid until`` ``when`` (default today)
        and ``replaced by`` the new one. Returns the new fact."""
        until = _iso(when or datetime.now(UTC).date())
        made: list[str] = []

        def change(memory: MemoryFile) -> MemoryFile:
            old = self._require(memory, old_id)
            if old.replaced_by is not None:
                raise ValidationError(
                    f"fact {old_id!r} was already replaced by {old.replaced_by!r}"
                )
            target = memory.get(new)
            facts = list(memory.facts)
            if target is None:
                sources = as_sources(source)
                target = _new_fact(
                    derived_id(new, {f.id for f in facts}),
                    new,
                    old.section,
                    sources,
                    old.tags,
                    until,
                    None,
                    None,
                    None if sources else self.writer(),
                )
                facts.insert(facts.index(old) + 1, target)
            elif target.id == old.id:
                raise ValidationError(f"fact {old_id!r} cannot supersede itself")
            made.append(target.id)
            ended = old.model_copy(
                update={"valid_until": old.valid_until or until, "replaced_by": target.id}
            )
            return memory.with_facts(ended if f is old else f for f in facts)

        trailers = {"Gitmem-Reason": one_line(reason, 200)} if reason.strip() else {}
        self.change_facts(
            change,
            op="supersede",
            body=reason.strip(),
            trailers=trailers,
            subject=f"Supersede fact {old_id}: {one_line(new, 50)}",
        )
        return self.fact(made[-1])

    def pin_fact(self, fact_id: str, pinned: bool = True) -> Fact:
        """Pin fact ``fact_id`` (the tag ``pinned``): it comes first in every
        ``retrieve_context``, within the facts' share of the budget, whatever the query.
        ``pinned=False`` unpins it. One commit (``Gitmem-Op: pin-fact`` / ``unpin-fact``),
        none when it already was so; FactNotFound if unknown."""

        def change(memory: MemoryFile) -> MemoryFile:
            old = self._require(memory, fact_id)
            if pinned and old.replaced_by is not None:
                raise ValidationError(
                    f"fact {fact_id!r} was replaced by {old.replaced_by!r}: pin that one"
                )
            tags = tuple(t for t in old.tags if t != PINNED_TAG)
            tags += (PINNED_TAG,) if pinned else ()
            if set(tags) == set(old.tags):
                return memory
            new = _checked({**old.model_dump(), "tags": tags})
            return memory.with_facts(new if f is old else f for f in memory.facts)

        verb = "Pin" if pinned else "Unpin"
        self.change_facts(change, op=f"{verb.lower()}-fact", subject=f"{verb} fact {fact_id}")
        return self.fact(fact_id)

    def writer(self) -> str:
        return str(getattr(self.store.local, "agent", None) or self.store.agent)

    def _require(self, memory: MemoryFile, fact_id: str) -> Fact:
        found = memory.get(fact_id)
        if found is None:
            raise FactNotFound(
                f"no fact {fact_id!r} in {self.facts_path} (see `gitmem facts list --all`)"
            )
        return found

    # --- who wrote what ------------------------------------------------------------------

    def fact_history(self, *, commit: str | None = None) -> list[LogEntry]:
        """The commits that changed the memory file, newest first."""
        return self.store.repo.file_log([self.facts_path], commit)

    def fact_blame(self, *, commit: str | None = None) -> list[FactBlame]:
        """For each fact of the file at HEAD (or ``commit``), the commit that last changed
        it: its author, ``Gitmem-Agent``, ``Gitmem-Model`` and ``Gitmem-Op``."""
        current = self.memory_file(commit=commit).facts
        wanted = {f.id: f for f in current}
        out: dict[str, FactBlame] = {}
        entries = self.fact_history(commit=commit)
        for at, entry in enumerate(entries):  # newest first: a fact is blamed where it
            if not wanted:  # last took its present form
                break
            older = entries[at + 1] if at + 1 < len(entries) else None
            before = self._version(older)
            for fact_id in list(wanted):
                if before.get(fact_id) != wanted[fact_id]:
                    out[fact_id] = _blame(wanted.pop(fact_id), entry)
        return [out[f.id] for f in current if f.id in out]

    def _version(self, entry: LogEntry | None) -> MemoryFile:
        if entry is None:
            return MemoryFile()
        try:
            return self.memory_file(commit=entry.sha)
        except ParseError:
            return MemoryFile()  # a broken version: what came after it is blamed on its fix


def _blame(fact: Fact, entry: LogEntry) -> FactBlame:
    trailers = entry.trailers
    return FactBlame(
        fact=fact,
        commit=entry.sha,
        author=entry.author,
        agent=_last(trailers, "Gitmem-Agent"),
        model=_last(trailers, "Gitmem-Model"),
        op=_last(trailers, "Gitmem-Op"),
        when=entry.time,
        subject=entry.subject,
    )


def _last(trailers: dict[str, list[str]], key: str) -> str | None:
    values = trailers.get(key)
    return values[-1] if values else None


def _iso(value: date | datetime | str) -> str:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, date):
        return value.isoformat()
    try:
        as_moment(value)  # a clear error for anything else
    except ValueError as exc:
        raise ValidationError(str(exc)) from None
    return value


def _checked(fields: dict[str, Any]) -> Fact:
    try:
        return Fact(**fields)
    except ValueError as exc:  # pydantic's ValidationError is a ValueError
        raise ValidationError(f"fact {fields.get('id')!r}: {exc}") from None


def _new_fact(
    fact_id: str,
    text: str,
    section: str,
    sources: tuple[FactSource, ...],
    tags: Iterable[str],
    valid_from: date | datetime | str | None,
    valid_until: date | datetime | str | None,
    confidence: float | None,
    by: str | None = None,
) -> Fact:
    return _checked(
        {
            "id": fact_id,
            "text": text,
            "section": section,
            "sources": sources,
            "by": by,
            "tags": tuple(tags),
            "confidence": confidence,
            "valid_from": None if valid_from is None else _iso(valid_from),
            "valid_until": None if valid_until is None else _iso(valid_until),
        }
    )
