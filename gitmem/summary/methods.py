"""``Summaries``: summaries for ``MemoryManager`` — manual, triggered after saves, idle.

A summary is its own commit (``Gitmem-Op: summarize`` with the model, the trigger and the
interactions it covers), so reverting it undoes exactly the summary and keeps later turns.
In archive mode the summarized turns move to ``archive/<session>.md`` in the same commit;
they are never deleted and ``load_memory(..., include_archive=True)`` returns them. Before
anything is written the loss guard compares the new summary with the previous one: a
summary that drops too many facts is refused with a report, or committed to the side
branch ``gitmem/review/<session>`` for a person to accept or reject.
"""

from __future__ import annotations

import copy
import logging
import os
import re
import shlex
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import TypedDict, Unpack
from urllib.parse import unquote, urlsplit

from gitmem.core import SessionStore
from gitmem.errors import (
    ConflictError,
    GitmemError,
    NothingToSummarize,
    SessionNotFound,
    SummaryHeldForReview,
    SummaryLossError,
    SummaryRefused,
    ValidationError,
)
from gitmem.format.parse import parse_bytes
from gitmem.format.render import render
from gitmem.guard.secrets import redact
from gitmem.llm.chat import ask_json
from gitmem.llm.config import LLMConfig, llm_budget
from gitmem.llm.embeddings import EmbedConfig, embed_texts
from gitmem.models import Interaction, Review, Session, Summary, SummaryOutcome, as_when, now
from gitmem.store.objects import object_id
from gitmem.store.transaction import Transaction
from gitmem.summary.account import without_markup
from gitmem.summary.engines import IDLE, MANUAL, Summarizer, SummaryResult, default_summarizer
from gitmem.summary.extractive import SummaryExtractor
from gitmem.summary.loss import LossReport, check_loss, covers_label
from gitmem.summary.triggers import (
    TRIGGERS,
    SummaryConfig,
    check_triggers,
    parse_duration,
    uncovered,
)
from gitmem.text import one_line, topic_terms

log = logging.getLogger(__name__)

REVIEW_PREFIX = "refs/heads/gitmem/review/"
# a store needs this many sessions before "in most sessions" says a word is common
COMMON_MIN_SESSIONS = 4

# the user:password@ (or token@) part of a URL, left out of fallback reasons
_USERINFO = re.compile(r"([a-z][a-z0-9+.-]*://)[^\s/?#@]+@", re.IGNORECASE)


def _ref_part(text: str) -> str:
    # a reversible, always-valid ref component (no '.', no '..', no '.lock' endings)
    return "".join(
        ch
        if ch.isascii() and (ch.isalnum() or ch in "-_")
        else "".join(f"%{b:02X}" for b in ch.encode("utf-8", "surrogatepass"))
        for ch in text
    )


def _trailer_values(message: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for line in message.splitlines():
        key, sep, value = line.partition(": ")
        if sep and key.startswith("Gitmem-"):
            found.setdefault(key, value.strip())
    return found


class SummarizeOptions(TypedDict, total=False):
    """The options of :meth:`Summaries.summarize` and ``summarize_outcome`` (the defaults
    are those of ``_summarize``: a manual trigger, the configured summarizer, all turns)."""

    trigger: str
    summarizer: Summarizer | None
    offline: bool
    count: int | None
    reason: str


class Summaries:
    """Summaries, archive and review branches for ``MemoryManager`` (see module docs).

    Set ``summarizer`` to summarize with your own :class:`~gitmem.summary.engines.Summarizer`.
    """

    def __init__(self, store: SessionStore) -> None:
        self.store = store
        self.summarizer: Summarizer | None = None
        self._summary_config: SummaryConfig | None = None
        self._default_summarizer: Summarizer | None = None
        self._llm_git: dict[str, str] = {}
        # set it to embed with other settings; else gitmem.embed.* / GITMEM_EMBED_* (read once)
        self.embed_settings: EmbedConfig | None = None
        self._embed_found: tuple[EmbedConfig | None] | None = None
        # (session, turn count, last turn) -> the session's terms, for _common_terms()
        self._session_terms: dict[tuple[str, int, str], frozenset[str]] = {}

    def before_save(self) -> None:
        self.summary_config  # noqa: B018  a bad gitmem.summary.* setting stops the save here

    def after_save(self, session_id: str) -> None:
        """Run the summary triggers if enabled (their outcome is logged; never raises)."""
        if self.summary_config.auto:  # read (and checked) before the commit
            self.maybe_summarize(session_id)

    # --- configuration --------------------------------------------------------------------

    @property
    def summary_config(self) -> SummaryConfig:
        """This store's summary settings: set it, or it is read from git config once
        (``gitmem.summary.*`` and ``gitmem.llm.*``; a save reads it before committing).

        Raises:
            ConfigError: a setting has a value gitmem cannot use.
        """
        if self._summary_config is None:
            found = self.store.git_config("gitmem")
            summary = {k: v for k, v in found if k.lower().startswith("gitmem.summary.")}
            llm = {k: v for k, v in found if k.lower().startswith("gitmem.llm.")}
            config = SummaryConfig.from_git(summary)
            llm_budget(os.environ, llm)  # checked now, so that a bad value stops the save
            self._llm_git = llm
            self._summary_config = config
        return self._summary_config

    @summary_config.setter
    def summary_config(self, value: SummaryConfig) -> None:
        self._summary_config = value
        self._default_summarizer = None

    def llm_config(self) -> LLMConfig | None:
        """The LLM this store summarizes with: ``summary_config.llm``, else the
        ``GITMEM_LLM_*`` / ``OPENAI_*`` variables with ``gitmem.llm.*`` git settings; None
        when no LLM is configured (offline)."""
        config = self.summary_config
        return config.llm or LLMConfig.from_env(git=self._llm_git)

    def ask_json(
        self, system: str, user: str, *, timeout: float | None = None
    ) -> tuple[str, str] | None:
        """The configured LLM's JSON answer and model (fact consolidation and the reranker
        ask through this); None when offline (no LLM, or ``gitmem.summary.offline``)."""
        config = None if self.summary_config.offline else self.llm_config()
        if config is None:
            return None
        if timeout is not None:
            config = replace(config, timeout=min(config.timeout, timeout), max_retries=0)
        return ask_json(config, system, user), config.model

    def embedding_config(self) -> EmbedConfig | None:
        """The embeddings this store searches with: ``embed_settings`` if set, else the
        ``GITMEM_EMBED_*`` variables over ``gitmem.embed.*`` git settings (read once);
        None when no embedding model is configured (search stays lexical).

        Raises:
            ConfigError: a setting has a value gitmem cannot use.
        """
        if self.embed_settings is not None:
            return self.embed_settings
        if self._embed_found is None:
            git = dict(self.store.git_config("gitmem.embed"))
            self._embed_found = (EmbedConfig.from_env(git=git),)
        return self._embed_found[0]

    def embed(
        self, texts: Sequence[str], *, query: bool = False
    ) -> tuple[list[list[float]], EmbedConfig] | None:
        """Vectors from the configured embedding model and that model's settings (search
        asks through this); ``query``: the texts are search queries, not memories."""
        config = self.embedding_config()
        if config is None:
            return None
        return (embed_texts(config, texts, query=query) if texts else []), config

    def _summarizer(self, given: Summarizer | None, offline: bool) -> Summarizer:
        if given is not None:
            return given
        config = self.summary_config
        if offline or config.offline:
            return default_summarizer(offline=True)
        if self.summarizer is not None:
            return self.summarizer
        if self._default_summarizer is None:
            self._default_summarizer = default_summarizer(self.llm_config())
        return self._default_summarizer

    def _common_terms(self) -> frozenset[str]:
        """The terms (stems) that occur in most sessions of this store (of at least
        :data:`COMMON_MIN_SESSIONS`): no keyword of one session. Each session's terms are
        kept while its turns stay the same, so a summary reads only what changed."""
        sessions = self.store.list_sessions()
        if len(sessions) < COMMON_MIN_SESSIONS:
            return frozenset()
        counts: Counter[str] = Counter()
        for session in sessions:
            turns = session.interactions
            key = (session.id, len(turns), turns[-1].id if turns else "")
            found = self._session_terms.get(key)
            if found is None:
                text = "\n".join(m.content for t in turns for m in t.messages)
                found = self._session_terms[key] = frozenset(topic_terms(without_markup(text)))
            counts.update(found)
        return frozenset(t for t, n in counts.items() if n * 2 > len(sessions))

    def _with_store_view(self, engine: Summarizer) -> Summarizer:
        """The offline summarizer told which words every session uses (a copy: the
        caller's object is left alone); any other summarizer as it is."""
        if not isinstance(engine, SummaryExtractor):
            return engine
        viewing = copy.copy(engine)
        viewing.common_terms = engine.common_terms | self._common_terms()
        return viewing

    # --- summarizing ----------------------------------------------------------------------

    def summarize(self, session_id: str, **options: Unpack[SummarizeOptions]) -> str:
        """Summarize the turns not yet covered by the session's summary; one commit.

        Args:
            session_id: the session.
            trigger: recorded in ``Gitmem-Trigger`` (manual, turn-threshold, topic-shift, idle).
            summarizer: use this one instead of the configured one.
            offline: use the offline extractive summarizer.
            count: summarize only the first ``count`` uncovered turns.
            reason: why (goes into the commit message).

        Returns:
            The summary commit's id (:meth:`summarize_outcome` returns the whole outcome).

        Raises:
            SessionNotFound, NothingToSummarize; SummaryRefused or SummaryHeldForReview when
            the loss guard fires; ConflictError if the summary changed meanwhile.
        """
        return self._summarize(session_id, **options)[0]

    def summarize_outcome(
        self, session_id: str, **options: Unpack[SummarizeOptions]
    ) -> SummaryOutcome:
        """Like :meth:`summarize` (same arguments), but returns what happened: the commit, the
        model that wrote the summary and, if the LLM failed, why it fell back to the offline
        one. Raises what :meth:`summarize` raises.
        """
        sha, result = self._summarize(session_id, **options)
        return SummaryOutcome(
            session_id=session_id,
            status="committed",
            trigger=options.get("trigger", MANUAL),
            reason=options.get("reason", ""),
            commit=sha,
            model=result.model,
            fallback=result.fallback,
        )

    def _summarize(
        self,
        session_id: str,
        *,
        trigger: str = MANUAL,
        summarizer: Summarizer | None = None,
        offline: bool = False,
        count: int | None = None,
        reason: str = "",
    ) -> tuple[str, SummaryResult]:
        if trigger not in TRIGGERS:
            raise ValidationError(f"unknown summary trigger {trigger!r} (one of {TRIGGERS})")
        if self.store.in_batch():
            raise ValidationError("summarize() cannot run inside a batch; call it after")
        session = self.store.load_memory(session_id)
        if session is None:
            raise SessionNotFound(f"no session {session_id!r} in {self.store.path}")
        pending = uncovered(session.interactions, session.summary)[:count]
        if not pending:
            raise NothingToSummarize(
                f"session {session_id!r}: all {len(session.interactions)} turns are covered by "
                "its summary already; save more turns first"
            )
        engine = self._with_store_view(self._summarizer(summarizer, offline))
        result = self._without_credentials(
            engine, engine.summarize(pending, previous=session.summary)
        )
        config = self.summary_config
        turns = self._turns_with_archive(session)
        report = check_loss(session.summary, result.content, turns, threshold=config.loss_threshold)
        summary = self._new_summary(session.summary, result)
        if report.fires:
            self._hold(
                session_id,
                session.summary,
                summary,
                result,
                trigger,
                report,
                review=config.on_loss == "review",
            )
        sha = self._write_summary(
            session_id, session.summary, summary, result, trigger, reason, report
        )
        if config.auto_tag and result.content.tags:
            fresh = [t for t in result.content.tags if t not in session.tags]
            if fresh:
                self.store.update_metadata(session_id, add_tags=fresh)
        return sha, result

    def maybe_summarize(
        self, session_id: str, *, now: datetime | str | None = None
    ) -> SummaryOutcome | None:
        """Run the configured triggers for a session and summarize if one fires.

        ``now`` (for the idle trigger): a ``datetime`` or an ISO string; default the clock.

        Never raises: a failure leaves every saved turn in place and is returned (and
        logged) as an outcome with ``status="failed"`` (or refused/review).
        """
        try:
            session = self.store.load_memory(session_id)
            if session is None:
                return None
            decision = check_triggers(
                session.interactions,
                session.summary,
                self.summary_config.triggers,
                last_active=session.last_active,
                now=as_when(now, "now"),
            )
        except Exception as exc:  # a trigger check must never break the caller
            log.warning("summary trigger check for %r failed: %s", session_id, exc)
            return SummaryOutcome(
                session_id=session_id, status="failed", trigger="", error=str(exc)
            )
        if decision is None:
            return None
        return self._attempt(session_id, decision.trigger, decision.reason, decision.count)

    def summarize_idle(
        self,
        older_than: str | timedelta,
        *,
        now: datetime | str | None = None,
        summarizer: Summarizer | None = None,
        offline: bool = False,
    ) -> list[SummaryOutcome]:
        """Summarize every session quiet for ``older_than`` (``"30m"``, ``"2h"``) that has
        uncovered turns — for a cron job or timer. Failures are reported, not raised.
        ``now``: a ``datetime`` or an ISO string (default the clock)."""
        quiet = parse_duration(older_than)
        moment = as_when(now, "now") or datetime.now(UTC)
        outcomes = []
        for session in self.store.list_sessions():
            idle_for = moment - session.last_active
            if idle_for < quiet or not uncovered(session.interactions, session.summary):
                continue
            reason = f"idle for {idle_for} (threshold {quiet})"
            outcomes.append(self._attempt(session.id, IDLE, reason, None, summarizer, offline))
        return outcomes

    def _attempt(
        self,
        session_id: str,
        trigger: str,
        reason: str,
        count: int | None,
        summarizer: Summarizer | None = None,
        offline: bool = False,
    ) -> SummaryOutcome:
        outcome = SummaryOutcome(
            session_id=session_id, status="committed", trigger=trigger, reason=reason
        )
        try:
            outcome.commit, result = self._summarize(
                session_id,
                trigger=trigger,
                summarizer=summarizer,
                offline=offline,
                count=count,
                reason=reason,
            )
            outcome.model, outcome.fallback = result.model, result.fallback
        except SummaryHeldForReview as exc:
            outcome.status, outcome.commit, outcome.error = "review", exc.commit, str(exc)
            outcome.report = exc.report.to_dict()
        except SummaryLossError as exc:
            outcome.status, outcome.error = "refused", str(exc)
            outcome.report = exc.report.to_dict()
        except Exception as exc:  # the turns are saved already; report, never lose them
            outcome.status, outcome.error = "failed", f"{type(exc).__name__}: {exc}"
        if outcome.status != "committed":
            log.warning("summary of %r (%s) not applied: %s", session_id, trigger, outcome.error)
        return outcome

    def _without_credentials(self, engine: Summarizer, result: SummaryResult) -> SummaryResult:
        """``result`` with the LLM's credentials taken out of why it fell back: a server's
        error text can echo the ``Authorization`` header, and a ``base_url`` can carry
        ``user:pass@``; that text goes into the ``Gitmem-Fallback`` trailer and the body."""
        if result.fallback is None and not result.attempts:
            return result
        config = getattr(engine, "config", None)
        known: list[str] = []
        if isinstance(config, LLMConfig):
            parts = urlsplit(config.base_url or "")
            known = [
                k for k in (config.api_key, parts.password, parts.username) if k and len(k) >= 6
            ]

        def clean(text: str) -> str:
            for secret in known:
                text = text.replace(secret, "[REDACTED:api-key]")
            return self.store.guard.safe_text(_USERINFO.sub(r"\1", text))  # the host is enough

        return replace(
            result,
            fallback=None if result.fallback is None else clean(result.fallback),
            attempts=tuple(clean(a) for a in result.attempts),
        )

    # --- building and writing -------------------------------------------------------------

    @staticmethod
    def _new_summary(previous: Summary | None, result: SummaryResult) -> Summary:
        covers = list(dict.fromkeys([*(previous.covers if previous else []), *result.covers]))
        content = result.content
        facts = [one_line(f, 500) for f in content.key_facts]
        if content.summary == "\n".join(f"- {fact}" for fact in facts):
            facts = []  # the text is exactly the facts as bullets: do not store them twice
        return Summary(
            text=content.summary,
            generated=now(),
            model=result.model,
            covers=covers,
            facts=facts,
            keywords=[one_line(k, 100) for k in content.entities],
        )

    def _turns_with_archive(self, session: Session, commit: str | None = None) -> list[Interaction]:
        archived = self.store.load_archive(session.id, commit=commit)
        return [*(archived.interactions if archived else []), *session.interactions]

    def _render(self, path: str, session: Session) -> bytes:
        data = render(session).encode("utf-8")
        self.store.cache_session(path, object_id("blob", data), session)  # spares the next parse
        return data

    def _changes(
        self, txn: Transaction, current: Session, summary: Summary
    ) -> tuple[dict[str, bytes], int]:
        """The files a summary writes: the session, and its archive part in archive mode."""
        path = self.store.path_of(current.id)
        summary = self.store.guard.screen_summary(
            txn, current.id, summary
        )  # sizes, secrets redacted
        if self.summary_config.archive != "archive":
            updated = current.model_copy(update={"summary": summary})
            return {path: self._render(path, updated)}, 0
        covered = set(summary.covers)
        moving = [t for t in current.interactions if t.id in covered]
        staying = [t for t in current.interactions if t.id not in covered]
        updated = current.model_copy(update={"summary": summary, "interactions": staying})
        changes = {path: self._render(path, updated)}
        if moving:
            where = self.store.path_of(current.id, archive=True)
            raw = txn.read(where)
            archive = (
                parse_bytes(raw, where)
                if raw is not None
                else Session(
                    id=current.id,
                    created=moving[0].timestamp,
                    last_active=moving[-1].timestamp,
                    language=current.language,
                    extra={"archive-of": current.id},
                )
            )
            known = {t.id for t in archive.interactions}
            added = [t for t in moving if t.id not in known]
            speakers = [m.speaker for t in added for m in t.messages]
            archive = archive.model_copy(
                update={
                    "interactions": [*archive.interactions, *added],
                    "last_active": max([archive.last_active, *(t.timestamp for t in added)]),
                    "participants": list(dict.fromkeys([*archive.participants, *speakers])),
                }
            )
            changes[where] = self._render(where, archive)
        return changes, len(moving)

    def _current(self, txn: Transaction, session_id: str, expected: Summary | None) -> Session:
        path = self.store.path_of(session_id)
        current = self.store.adopt_hand_edit(txn, path)
        if current is None:
            found = self.store.repo.entry(path, txn.head())
            current = self.store.parse_blob(path, found[1]) if found else None
        if current is None:
            raise SessionNotFound(f"session {session_id!r} was deleted while summarizing")
        if current.summary != expected:
            raise ConflictError(
                f"the summary of session {session_id!r} changed while this one was being made "
                f"(now at {str(txn.head())[:12]}); nothing was written, run summarize again"
            )
        return current

    def _summary_trailers(
        self,
        session_id: str,
        model: str,
        covers: Iterable[str],
        fallback: str | None,
        trigger: str,
        **extra: str,
    ) -> dict[str, str]:
        trailers = self.store.trailers("summarize", [session_id])
        trailers["Gitmem-Model"] = model
        trailers["Gitmem-Trigger"] = trigger
        trailers["Gitmem-Covers"] = covers_label(list(covers))
        if fallback:
            trailers["Gitmem-Fallback"] = one_line(fallback, 200)
        trailers.update({f"Gitmem-{k}": v for k, v in extra.items()})
        return trailers

    def _write_summary(
        self,
        session_id: str,
        previous: Summary | None,
        summary: Summary,
        result: SummaryResult,
        trigger: str,
        reason: str,
        report: LossReport,
    ) -> str:
        with self.store.repo.transaction() as txn:

            def write() -> str | None:
                # on the session as it is now: a person's commit meanwhile is kept
                current = self._current(txn, session_id, previous)
                changes, moved = self._changes(txn, current, summary)
                for path, data in changes.items():
                    txn.write(path, data)
                body = [
                    f"Summary by {result.model} ({result.mode}) of {covers_label(result.covers)}."
                ]
                if reason:
                    body.append(f"Trigger: {reason}.")
                if result.fallback:
                    body.append(f"Fell back to the offline summarizer: {result.fallback}")
                if moved:
                    body.append(
                        f"Moved {moved} summarized turns to "
                        f"{self.store.path_of(session_id, archive=True)}."
                    )
                if report.dropped:
                    body.append(
                        f"Loss guard: {len(report.dropped)} of "
                        f"{len(report.previous_facts)} previous facts dropped, within "
                        f"the {report.threshold:.0%} allowed."
                    )
                extra = {"Archived": str(moved)} if moved else {}
                return txn.commit(
                    f"Summarize {one_line(session_id, 40)}: {len(result.covers)} turns ({trigger})",
                    body="\n".join(body),
                    trailers=self._summary_trailers(
                        session_id, result.model, result.covers, result.fallback, trigger, **extra
                    ),
                )

            sha = txn.rebuilding(write)
        if sha is None:  # the same summary again: nothing changed
            raise NothingToSummarize(f"session {session_id!r}: the summary is unchanged")
        return sha

    # --- review branches ------------------------------------------------------------------

    def _review_prefix(self) -> str:
        if self.store.namespace is None:
            return REVIEW_PREFIX
        return f"refs/heads/gitmem/review-ns/{_ref_part(self.store.namespace)}/"

    def review_branch(self, session_id: str) -> str:
        """The review branch name for a session (``gitmem/review/<session>``)."""
        return (self._review_prefix() + _ref_part(session_id))[len("refs/heads/") :]

    def _hold(
        self,
        session_id: str,
        previous: Summary | None,
        summary: Summary,
        result: SummaryResult,
        trigger: str,
        report: LossReport,
        *,
        review: bool,
    ) -> None:
        # the report quotes the model's proposed facts: never show a secret among them
        shown = redact(report.render(), self.store.guard.secret_config)[0]
        if not review:
            raise SummaryRefused(
                f"summary of session {session_id!r} refused by the loss guard; nothing was "
                f"written.\n{shown}\nRetry with another model or prompt, or set "
                "on_loss='review' to inspect it on a branch",
                session_id,
                report,
            )
        branch = self.review_branch(session_id)
        with self.store.repo.transaction() as txn:
            current = self._current(txn, session_id, previous)
            changes, _moved = self._changes(txn, current, summary)
            parent = txn.head()
            assert parent is not None  # a session exists, so a commit does
            message = "\n\n".join(
                [
                    f"Review summary of {one_line(session_id, 40)}: drops "
                    f"{len(report.dropped)} of {len(report.previous_facts)} facts",
                    report.render(),
                    "\n".join(
                        f"{k}: {v}"
                        for k, v in self._summary_trailers(
                            session_id,
                            result.model,
                            result.covers,
                            result.fallback,
                            trigger,
                            Review="pending",
                        ).items()
                    ),
                ]
            )
            commit = self.store.repo.commit_on_ref(
                "refs/heads/" + branch, dict(changes), message, parent=parent
            )
        quoted = shlex.quote(session_id)  # the hint is pasted into a shell
        raise SummaryHeldForReview(
            f"summary of session {session_id!r} drops too many facts; it was committed to "
            f"branch {branch} ({commit[:12]}) for review, not to the session.\n"
            f"{shown}\nInspect it with `gitmem review show {quoted}`, then "
            f"`gitmem review accept|reject {quoted}`",
            session_id,
            report,
            commit=commit,
            branch=branch,
        )

    def review_list(self) -> list[Review]:
        """Summaries waiting for review in this namespace, by session id."""
        prefix = self._review_prefix()
        out = []
        for ref, sha in sorted(self.store.repo.refs(prefix).items()):
            name = ref[len(prefix) :]
            if "/" in name:
                continue
            out.append(self._review(unquote(name), ref, sha, detail=False))
        return out

    def _review(self, session_id: str, ref: str, sha: str, *, detail: bool) -> Review:
        message = self.store.repo.git("log", "-1", "--format=%B", sha)
        parent = self.store.repo.git("rev-parse", f"{sha}^").strip()
        diff = self.store.repo.git("diff", parent, sha) if detail else ""
        return Review(
            session_id=session_id,
            branch=ref[len("refs/heads/") :],
            commit=sha,
            parent=parent,
            subject=message.split("\n", 1)[0],
            message=message if detail else "",
            diff=diff,
        )

    def _review_ref(self, session_id: str) -> tuple[str, str]:
        ref = "refs/heads/" + self.review_branch(session_id)
        sha = self.store.repo.refs(ref).get(ref)
        if sha is None:
            raise GitmemError(
                f"no summary of session {session_id!r} is waiting for review "
                "(see `gitmem review list`)"
            )
        return ref, sha

    def review_show(self, session_id: str) -> Review:
        """The held summary: its loss report (commit message) and diff against its parent."""
        ref, sha = self._review_ref(session_id)
        return self._review(session_id, ref, sha, detail=True)

    def review_accept(self, session_id: str) -> str:
        """Apply a held summary to the session (one summarize commit) and drop the branch.

        Turns saved since the review was made are kept. Raises ConflictError if the
        session's summary changed since (reject it and summarize again).
        """
        ref, sha = self._review_ref(session_id)
        review = self._review(session_id, ref, sha, detail=False)
        path = self.store.path_of(session_id)
        found, base = self.store.repo.entry(path, sha), self.store.repo.entry(path, review.parent)
        if found is None or base is None:
            raise ConflictError(f"review branch {review.branch} has no file {path}")
        held = self.store.parse_blob(path, found[1]).summary
        expected = self.store.parse_blob(path, base[1]).summary
        assert held is not None
        trailers = _trailer_values(self.store.repo.git("log", "-1", "--format=%B", sha))
        before = set(expected.covers) if expected else set()
        covers = [c for c in held.covers if c not in before]
        trigger = trailers.get("Gitmem-Trigger", MANUAL)
        with self.store.repo.transaction() as txn:

            def write() -> str | None:
                current = self._current(txn, session_id, expected)  # as it is now
                changes, moved = self._changes(txn, current, held)
                for file, data in changes.items():
                    txn.write(file, data)
                extra = {"Review": "accepted", "Reviewed-Commit": sha}
                if moved:
                    extra["Archived"] = str(moved)
                return txn.commit(
                    f"Accept reviewed summary of {one_line(session_id, 40)}",
                    body=f"Summary held for review on {review.branch} ({sha[:12]}), accepted.",
                    trailers=self._summary_trailers(
                        session_id,
                        held.model or "unknown",
                        covers,
                        trailers.get("Gitmem-Fallback"),
                        trigger,
                        **extra,
                    ),
                )

            commit = txn.rebuilding(write)
        self.store.repo.set_ref(ref, None, sha)
        if commit is None:
            raise NothingToSummarize(f"session {session_id!r} already has that summary")
        return commit

    def review_reject(self, session_id: str) -> str:
        """Drop a held summary's review branch; returns the dropped commit's id."""
        ref, sha = self._review_ref(session_id)
        self.store.repo.set_ref(ref, None, sha)
        return sha
