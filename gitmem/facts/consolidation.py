"""``Consolidator``: ``mm.consolidate()``, its review branch and its triggers.

Consolidation turns what was said since the last consolidation (new summaries' key facts, new
turns) into changes of the memory file: an LLM proposes add / update / supersede / forget
through the store's OpenAI-compatible settings (``Summaries.ask_json``), or the offline
extractor adds salient sentences (:mod:`gitmem.facts.extract`). Whatever the engine, the
proposal is a diff applied as one commit ``Gitmem-Op: consolidate`` through
:meth:`Facts.change_facts` (the one write path), unless the loss guard fires: a proposal
removing more than the threshold of the facts, or touching one written by hand, goes to the
branch ``gitmem/review-facts`` (or is refused) and waits for ``review_facts_accept`` /
``review_facts_reject``. An LLM that fails, answers garbage or names unknown fact ids never
loses anything: the offline path runs instead and the commit says why (``Gitmem-Fallback``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any, Literal

from gitmem.core import SessionStore
from gitmem.errors import GitmemError, ValidationError
from gitmem.facts.extract import KeyFact, NewTurn, extract
from gitmem.facts.methods import Facts
from gitmem.facts.proposal import (
    OFFLINE,
    SYSTEM,
    Change,
    Consolidation,
    FactsConfig,
    Unusable,
    apply_changes,
    check_loss,
    parse_proposal,
    prompt,
    rebase,
    unified,
)
from gitmem.format.facts import MemoryFile, parse_facts, render_facts
from gitmem.format.paths import id_from_path
from gitmem.models import Session, as_when
from gitmem.store.gitlog import LogEntry, looks_like_date
from gitmem.summary.methods import Summaries
from gitmem.text import one_line, split_sentences

log = logging.getLogger("gitmem.facts")

REVIEW_REF = "refs/heads/gitmem/review-facts"
OFFLINE_MODEL = "gitmem-offline"

OnLoss = Literal["review", "refuse"]


class Consolidator:
    """Consolidation of facts from summaries and turns (see module docs)."""

    def __init__(self, store: SessionStore, facts: Facts, summaries: Summaries) -> None:
        self.store = store
        self.facts = facts  # the one write path of the memory file
        self.summaries = summaries  # the LLM that consolidates
        self._facts_config: FactsConfig | None = None

    @property
    def facts_config(self) -> FactsConfig:
        """``git config gitmem.facts.*`` (read once; set it to override)."""
        if self._facts_config is None:
            found = self.store.git_config("gitmem.facts")
            self._facts_config = FactsConfig.from_git(dict(found))
        return self._facts_config

    @facts_config.setter
    def facts_config(self, value: FactsConfig) -> None:
        self._facts_config = value

    # --- what is new -----------------------------------------------------------------------

    def _last_consolidation(self) -> LogEntry | None:
        found = self.store.repo.log(
            [self.facts.facts_path], trailers={"Gitmem-Op": "consolidate"}, limit=1
        )
        return found[0] if found else None

    def _material(
        self, since: datetime | str | None, sessions: Iterable[str] | None
    ) -> tuple[list[KeyFact], list[NewTurn]]:
        base: str | None = None
        moment: datetime | None = None
        if since is None:
            last = self._last_consolidation()
            base = None if last is None else last.sha
        elif isinstance(since, datetime) or looks_like_date(since):
            moment = as_when(since, "since")
        else:
            base = self.store.repo.resolve(since)
        head = self.store.head()
        wanted = None if sessions is None else set(sessions)
        if base is not None and head is not None:
            changed = {
                id_from_path(c.path, self.store.namespace)
                for c in self.store.repo.diff_tree(base, head)
            }
            found = [
                s
                for s in (self.store.load_memory(i) for i in sorted(i for i in changed if i))
                if s is not None
            ]
        else:
            found = self.store.list_sessions(since=moment)
        if wanted is not None:
            found = [s for s in found if s.id in wanted]
        found.sort(key=lambda s: (s.created, s.id))
        key_facts: list[KeyFact] = []
        turns: list[NewTurn] = []
        for session in found:
            old = None if base is None else self.store.load_memory(session.id, commit=base)
            known = {t.id for t in old.interactions} if old else set()
            turns += [
                NewTurn(session.id, t)
                for t in session.interactions
                if t.id not in known and (moment is None or t.timestamp >= moment)
            ]
            before = set(_key_facts(old)) if old else set()
            covers = tuple(session.summary.covers) if session.summary else ()
            key_facts += [
                KeyFact(text, session.id, covers)
                for text in _key_facts(session)
                if text not in before
            ]
        return key_facts, turns

    # --- consolidating ---------------------------------------------------------------------

    def consolidate(
        self,
        since: datetime | str | None = None,
        *,
        offline: bool | None = None,
        apply: bool = True,
        on_loss: OnLoss | None = None,
        sessions: Iterable[str] | None = None,
        budget: int | None = None,
        trigger: str = "manual",
    ) -> Consolidation:
        """Propose fact changes from what was said since ``since`` and apply them as one
        commit (``Gitmem-Op: consolidate``).

        Args:
            since: a datetime or ISO date (turns from then on), a revision (what changed
                after that commit); default: since the last consolidation.
            offline: True never asks the LLM; default: the LLM when one is configured
                (``gitmem.facts.offline`` or an offline summary setting keep it offline).
            apply: False only proposes (``status="proposed"``, nothing written).
            on_loss: when the loss guard fires, ``"review"`` commits the proposal to the
                branch ``gitmem/review-facts``, ``"refuse"`` writes nothing (default
                ``gitmem.facts.onLoss``, else review).
            sessions: only these sessions.
            budget: tokens of new facts an offline run may add (``gitmem.facts.budget``).
            trigger: recorded in ``Gitmem-Trigger``.

        Returns:
            A :class:`~gitmem.facts.proposal.Consolidation`: changes, diff, engine, status,
            commit / branch, the fallback note and the rejected changes.
        """
        self.store.no_batch("consolidate()")
        config = self.facts_config
        memory = self.facts.memory_file()
        key_facts, turns = self._material(since, sessions)
        fallback: str | None = None
        rejected: list[str] = []
        changes: list[Change] | None = None
        engine = OFFLINE
        if not (offline or config.offline) and (key_facts or turns):
            try:
                asked = self.summaries.ask_json(SYSTEM, prompt(memory.facts, key_facts, turns))
                if asked is not None:
                    engine = asked[1]
                    speakers = {m.speaker for t in turns for m in t.turn.messages}
                    changes, rejected = parse_proposal(asked[0], memory, speakers)
            except (GitmemError, Unusable) as exc:  # the call failed, or its answer did
                fallback = f"LLM {exc}" if engine == OFFLINE else f"LLM {engine}: {exc}"
                changes, engine = None, OFFLINE
        if changes is None:
            picked = extract(memory.facts, key_facts, turns, budget or config.budget)
            changes = [
                Change(
                    op="add",
                    text=c.text,
                    section=c.section,
                    sources=c.sources,
                    reason=f"offline: salient sentence of {c.origin}",
                )
                for c in picked
            ]
        agent = self.facts.writer()
        today = datetime.now(UTC).date().isoformat()
        after, notes = apply_changes(memory, changes, today=today, agent=agent)
        rejected += notes
        result = Consolidation(
            changes=changes,
            engine=engine,
            fallback=fallback,
            rejected=rejected,
            diff=unified(render_facts(memory), render_facts(after), self.facts.facts_path),
            loss=check_loss(memory, changes, config.threshold),
        )
        if not apply:
            return result
        if not changes or after == memory:
            result.status = "unchanged"
            return result
        assert result.loss is not None
        trailers = {
            "Gitmem-Engine": "offline" if engine == OFFLINE else "llm",
            "Gitmem-Trigger": trigger,
        }
        # which model wrote these facts (blame shows it): never the manager's own model
        trailers["Gitmem-Model"] = engine if engine != OFFLINE else OFFLINE_MODEL
        if fallback:
            trailers["Gitmem-Fallback"] = one_line(self.store.guard.safe_text(fallback), 200)
        body = "\n".join(
            [c.describe() for c in changes[:50]]
            + ([f"(+{len(changes) - 50} more)"] if len(changes) > 50 else [])
            + ([f"Fell back to offline: {fallback}"] if fallback else [])
            + [f"Rejected: {r}" for r in rejected[:20]]
        )
        subject = f"Consolidate facts: {_count(changes)} ({engine})"
        if result.loss.fires:
            if (on_loss or config.on_loss) == "refuse":
                result.status = "refused"
                return result
            result.branch, result.commit = self._hold_facts(
                memory, after, subject, body, trailers, result.loss.render()
            )
            result.status = "review"
            return result

        def change(current: MemoryFile) -> MemoryFile:
            return apply_changes(current, changes, today=today, agent=agent)[0]

        result.commit = self.facts.change_facts(
            change, op="consolidate", subject=subject, body=body, trailers=trailers
        )
        result.status = "committed" if result.commit else "unchanged"
        return result

    # --- the review branch -----------------------------------------------------------------

    def review_facts_branch(self) -> str:
        """The branch a held consolidation waits on (``gitmem/review-facts``)."""
        if self.store.namespace is None:
            return REVIEW_REF[len("refs/heads/") :]
        part = "".join(
            ch
            if ch.isascii() and (ch.isalnum() or ch in "-_")
            else "".join(f"%{b:02X}" for b in ch.encode("utf-8", "surrogatepass"))
            for ch in self.store.namespace
        )
        return f"gitmem/review-facts-ns/{part}"

    def _hold_facts(
        self,
        memory: MemoryFile,
        after: MemoryFile,
        subject: str,
        body: str,
        trailers: dict[str, str],
        report: str,
    ) -> tuple[str, str]:
        branch = self.review_facts_branch()
        with self.store.repo.transaction() as txn:
            parent = txn.head()
            if parent is None:
                raise ValidationError("the store has no commit to hold a review on")
            if self.facts.memory_file(commit=parent) != memory:
                raise GitmemError(
                    "the memory file changed while consolidating; run consolidate again"
                )
            all_trailers = {
                **self.store.trailers("consolidate", []),
                **trailers,
                "Gitmem-Review": "pending",
            }
            message = "\n\n".join(
                [
                    f"Review: {subject}",
                    report,
                    body,
                    "\n".join(f"{k}: {v}" for k, v in all_trailers.items()),
                ]
            )
            data = render_facts(after).encode("utf-8")
            commit = self.store.repo.commit_on_ref(
                "refs/heads/" + branch, {self.facts.facts_path: data}, message, parent=parent
            )
        log.warning("consolidation held for review on %s (%s): %s", branch, commit[:12], report)
        return branch, commit

    def _held(self) -> tuple[str, str]:
        ref = "refs/heads/" + self.review_facts_branch()
        sha = self.store.repo.refs(ref).get(ref)
        if sha is None:
            raise GitmemError(
                "no consolidation is waiting for review (see `gitmem facts consolidate`)"
            )
        return ref, sha

    def review_facts_show(self) -> dict[str, Any]:
        """The held consolidation: its branch, commit, message (loss report) and diff."""
        ref, sha = self._held()
        parent = self.store.repo.parents(sha)[0]
        return {
            "branch": ref[len("refs/heads/") :],
            "commit": sha,
            "parent": parent,
            "message": self.store.repo.git("log", "-1", "--format=%B", sha),
            "diff": self.store.repo.git("diff", parent, sha),
        }

    def review_facts_accept(self) -> str | None:
        """Apply the held consolidation on top of the facts as they are now (by fact id:
        facts written since are kept) as one commit, and drop the branch."""
        ref, sha = self._held()
        parent = self.store.repo.parents(sha)[0]
        path = self.facts.facts_path
        base = _file(self.store, path, parent)
        held = _file(self.store, path, sha)
        trailers = {"Gitmem-Review": "accepted", "Gitmem-Reviewed-Commit": sha}
        commit = self.facts.change_facts(
            lambda now: rebase(base, held, now),
            op="consolidate",
            subject="Accept reviewed consolidation of facts",
            body=f"Held on {ref[len('refs/heads/') :]} ({sha[:12]}), accepted.",
            trailers=trailers,
        )
        self.store.repo.set_ref(ref, None, sha)
        return commit

    def review_facts_reject(self) -> str:
        """Drop the held consolidation's branch; returns the dropped commit's id."""
        ref, sha = self._held()
        self.store.repo.set_ref(ref, None, sha)
        return sha

    # --- triggers --------------------------------------------------------------------------

    def after_save(self, session_id: str) -> None:
        try:
            config = self.facts_config
            if config.every is not None or config.idle is not None:
                self.maybe_consolidate()
        except Exception as exc:  # a trigger must never break a save
            log.warning("facts consolidation trigger failed: %s", exc)

    def maybe_consolidate(self, *, now: datetime | str | None = None) -> Consolidation | None:
        """Consolidate if ``gitmem.facts.every`` (that many summaries since the last
        consolidation) or ``gitmem.facts.idle`` (the store was quiet that long before its
        newest commit, or until ``now``) says so. Never raises: a failure is logged and
        returned as ``status="failed"``."""
        try:
            config = self.facts_config
            trigger = None
            last = self._last_consolidation()
            if config.every is not None:
                summaries = self.store.repo.log(
                    trailers={"Gitmem-Op": "summarize"}, since=None if last is None else last.time
                )
                if last is not None:
                    summaries = [e for e in summaries if e.sha != last.sha]
                if len(summaries) >= config.every:
                    trigger = "every"
            if trigger is None and config.idle is not None:
                recent = self.store.repo.log(limit=2)
                moment = as_when(now, "now")
                # quiet until ``now``, or before the newest commit (the save that woke it)
                gap = (
                    moment - recent[0].time
                    if moment is not None and recent
                    else recent[0].time - recent[1].time
                    if len(recent) == 2
                    else None
                )
                if gap is not None and gap >= config.idle:
                    trigger = "idle"
            if trigger is None:
                return None
            return self.consolidate(trigger=trigger)
        except Exception as exc:
            log.warning("facts consolidation failed: %s", exc)
            return Consolidation(
                changes=[],
                diff="",
                engine=OFFLINE,
                status="failed",
                rejected=[f"{type(exc).__name__}: {exc}"],
            )


def _file(mm: SessionStore, path: str, commit: str) -> MemoryFile:
    data = mm.repo.read(path, commit)
    return parse_facts(data or b"# Memory\n", path)


def _key_facts(session: Session) -> list[str]:
    """A session's summary key facts (the summary's bullets when it stores none apart)."""
    summary = session.summary
    if summary is None:
        return []
    if summary.facts:
        return list(summary.facts)
    return [s for s in split_sentences(summary.text) if len(s) > 3]


def _count(changes: list[Change]) -> str:
    counts: dict[str, int] = {}
    for change in changes:
        counts[change.op] = counts.get(change.op, 0) + 1
    return ", ".join(f"{n} {op}" for op, n in counts.items())
