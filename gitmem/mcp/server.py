"""The gitmem MCP server: tools, resources and a prompt over one store.

Each tool is a thin wrapper over a function of ``tools.py``: it validates its arguments
through its signature (the SDK turns it into the input schema), runs the work through
:class:`~gitmem.aio.AsyncMemoryManager` (a worker thread, as the calling client's agent) so
concurrent calls do not wait on each other's disk and git work, and answers with a
short text plus structured content. A ``GitmemError`` becomes a tool error carrying gitmem's
own message; any other exception is logged on the server's stderr and the client gets a
one-line error, never a traceback. ``--read-only`` registers only the reads; ``--allow-undo``
adds revert, rollback and undo_agent.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BaseModel, Field

from gitmem.aio import AsyncMemoryManager
from gitmem.errors import GitmemError, ValidationError
from gitmem.manager import MemoryManager
from gitmem.mcp import sdk, tools
from gitmem.mcp.sdk import CallToolResult, Context
from gitmem.mcp.tools import Answer

log = logging.getLogger("gitmem.mcp")

INSTRUCTIONS = """\
gitmem is your long-term conversation memory: every conversation is a session (a Markdown
file in a git repository) and every save is a commit, so nothing you store is lost and every
change can be traced and undone.
- After each exchange worth remembering, call save_interaction with the session id, the
  user's message and your reply.
- Before answering something that may depend on earlier conversations, call search (or
  get_context for a ready-made, token-bounded context for the current session).
- history, diff and blame say who changed what and when; load_session reads a whole session.
- remember keeps a lasting fact (with the session and turn it came from); facts lists them.
"""

# argument types with the descriptions a model reads in the input schema
SessionId = Annotated[
    str,
    Field(
        description="The session id, e.g. 'telegram:4711' or 'cli:alice'.",
        min_length=1,
        max_length=400,
    ),
]
Rev = Annotated[
    str | None,
    Field(
        description="A revision: a commit sha, HEAD~3, a branch, or "
        "an ISO date such as 2026-11-30T12:00."
    ),
]
When = Annotated[
    str | None, Field(description="An ISO date/time, e.g. 2026-11-30 or 2026-11-30T12:00:00+01:00.")
]
Tags = Annotated[list[str] | None, Field(description="Only sessions with all of these tags.")]


class Said(BaseModel):
    """One message of a turn, from any speaker."""

    speaker: str = Field(
        description="Who said it: 'user', 'assistant', or a name.", min_length=1, max_length=200
    )
    content: str = Field(description="What was said (Markdown is kept as written).")


@dataclass
class ServerOptions:
    """What the server exposes and accepts."""

    read_only: bool = False
    allow_undo: bool = False
    max_bytes: int = tools.MAX_SAVE_BYTES


class _Runner:
    """Runs a tool's work through the async manager and shapes the answer or the error."""

    def __init__(self, amm: AsyncMemoryManager) -> None:
        self.amm = amm

    async def __call__(
        self, ctx: Any, work: Callable[[MemoryManager], Answer], *, write: bool = False
    ) -> CallToolResult:
        client = sdk.client_name(ctx) if write else None
        acting: contextlib.AbstractContextManager[None] = contextlib.nullcontext()
        if client is not None:
            with contextlib.suppress(ValidationError):  # a name no commit can carry
                acting = self.amm.acting_as(client)
        try:
            with acting:
                answer = await self.amm.run(work)
        except GitmemError as exc:
            return sdk.tool_result(
                str(exc), {"error": str(exc), "kind": type(exc).__name__}, error=True
            )
        except Exception as exc:  # a bug: the log gets the traceback, the client one line
            log.exception("tool call failed")
            message = f"internal error ({type(exc).__name__}); the gitmem server's log has details"
            return sdk.tool_result(message, {"error": message, "kind": "InternalError"}, error=True)
        return sdk.tool_result(answer.text, answer.data)


def build_server(
    mm: MemoryManager, options: ServerOptions, http: sdk.HttpOptions | None = None
) -> Any:
    """An MCP server (of the installed SDK major) over ``mm``'s store: give ``mm`` the
    ``via="mcp"`` its commits should carry, and the ``agent`` of clients without a name."""
    server = sdk.new_server("gitmem", INSTRUCTIONS, http)
    amm = AsyncMemoryManager.over(mm)
    run = _Runner(amm)
    _add_reads(server, run)
    if not options.read_only:
        _add_writes(server, run, options)
        if options.allow_undo:
            _add_undo(server, run)
    _add_resources(server, amm)
    return server


def _add_reads(server: Any, run: _Runner) -> None:
    async def load_session(
        ctx: Context,
        session: SessionId,
        at: Rev = None,
        last: Annotated[int | None, Field(ge=1, description="Only the last N turns.")] = None,
        include_archive: Annotated[
            bool, Field(description="Also the turns a summary moved to the archive.")
        ] = False,
        cursor: Annotated[
            str | None,
            Field(
                description="The 'next' of the previous answer: the page after it (a large "
                "session comes in pages).",
                max_length=40,
            ),
        ] = None,
        limit: Annotated[
            int | None, Field(ge=1, description="At most this many turns in a page.")
        ] = None,
    ) -> CallToolResult:
        return await run(
            ctx,
            lambda mm: tools.load_session(mm, session, at, last, include_archive, cursor, limit),
        )

    async def list_sessions(
        ctx: Context,
        tags: Tags = None,
        participant: Annotated[
            str | None, Field(description="Only sessions where this speaker takes part.")
        ] = None,
        project: Annotated[str | None, Field(description="Only this project.")] = None,
        since: When = None,
        until: When = None,
        at: Rev = None,
        limit: Annotated[int, Field(ge=1, le=1000, description="At most this many.")] = 50,
    ) -> CallToolResult:
        return await run(
            ctx,
            lambda mm: tools.list_sessions(mm, tags, participant, project, since, until, at, limit),
        )

    async def search(
        ctx: Context,
        query: Annotated[
            str, Field(min_length=1, description="What to look for, in any language.")
        ],
        k: Annotated[int, Field(ge=1, le=200, description="At most this many hits.")] = 10,
        tags: Tags = None,
        project: Annotated[str | None, Field(description="Only this project.")] = None,
        participant: Annotated[
            str | None, Field(description="Only sessions where this speaker takes part.")
        ] = None,
        speaker: Annotated[
            str | None, Field(description="Only turns this person spoke in (any case).")
        ] = None,
        sessions: Annotated[list[str] | None, Field(description="Only these sessions.")] = None,
        since: When = None,
        until: When = None,
        include_links: Annotated[
            bool,
            Field(
                description=(
                    "Also add the sessions linked to or from the hits' sessions (links or [[id]]): "
                    "their summaries, or their best-matching turns; marked link_out / link_in."
                )
            ),
        ] = False,
    ) -> CallToolResult:
        return await run(
            ctx,
            lambda mm: tools.search(
                mm,
                query,
                k,
                tags,
                project,
                participant,
                sessions,
                since,
                until,
                include_links,
                speaker=speaker,
            ),
        )

    async def get_context(
        ctx: Context,
        session: SessionId,
        query: Annotated[str, Field(min_length=1, description="The user's new message.")],
        max_tokens: Annotated[
            int,
            Field(
                ge=tools.CONTEXT_TOKENS_MIN,
                le=tools.CONTEXT_TOKENS_MAX,
                description="Token budget of the whole context.",
            ),
        ] = 2000,
        k: Annotated[int, Field(ge=0, le=200, description="Memories to retrieve.")] = 8,
        recent: Annotated[int, Field(ge=0, le=1000, description="Recent turns to include.")] = 8,
        rerank: Annotated[
            bool,
            Field(
                description="Let the configured LLM choose and condense "
                "the memories (lexical order if it "
                "fails)."
            ),
        ] = False,
    ) -> CallToolResult:
        return await run(
            ctx, lambda mm: tools.get_context(mm, session, query, max_tokens, k, recent, rerank)
        )

    async def history(
        ctx: Context,
        session: Annotated[
            str | None, Field(description="Only this session (default: the whole store).")
        ] = None,
        op: Annotated[
            str | None,
            Field(description="Only this operation: save, summarize, revert, rollback, import..."),
        ] = None,
        agent: Annotated[str | None, Field(description="Only commits of this agent.")] = None,
        model: Annotated[str | None, Field(description="Only commits of this model.")] = None,
        since: When = None,
        until: When = None,
        limit: Annotated[int, Field(ge=1, le=1000, description="At most this many.")] = 20,
        changes: Annotated[
            bool,
            Field(description="Also say which turns, summary and metadata each commit changed."),
        ] = False,
    ) -> CallToolResult:
        return await run(
            ctx,
            lambda mm: tools.history(mm, session, op, agent, model, since, until, limit, changes),
        )

    async def diff(
        ctx: Context,
        session: Annotated[
            str | None, Field(description="The session (default: every session).")
        ] = None,
        a: Rev = None,
        b: Annotated[str | None, Field(description="The newer revision (default: HEAD).")] = None,
    ) -> CallToolResult:
        return await run(ctx, lambda mm: tools.diff(mm, session, a, b))

    async def blame(ctx: Context, session: SessionId, at: Rev = None) -> CallToolResult:
        return await run(ctx, lambda mm: tools.blame(mm, session, at))

    async def facts(
        ctx: Context,
        query: Annotated[
            str | None, Field(description="Only facts about these words, best match first.")
        ] = None,
        section: Annotated[str | None, Field(description="Only this section, e.g. 'User'.")] = None,
        at: Rev = None,
        include_past: Annotated[
            bool, Field(description="Also facts that were replaced or ended.")
        ] = False,
        limit: Annotated[int, Field(ge=1, le=1000, description="At most this many.")] = 50,
    ) -> CallToolResult:
        return await run(ctx, lambda mm: tools.facts(mm, query, section, at, include_past, limit))

    for fn, title, text in (
        (
            search,
            "Search memory",
            "Find stored conversation turns and summaries relevant to a "
            "query (keyword + fuzzy, any language), best first; each hit names its session, turn "
            "id, score, snippet and commit. Use before answering anything that may depend on "
            "earlier conversations.",
        ),
        (
            get_context,
            "Context for a reply",
            "Chat messages for the next reply in a session: "
            "its summary, the relevant memories and the recent turns, within a token budget. Use "
            "at the start of a turn to recall what matters for the user's new message.",
        ),
        (
            load_session,
            "Load a session",
            "A whole session (turns, summary, tags), or the "
            "last N turns, optionally as it was at a past revision. A large one comes in pages: "
            "while 'next' is set, call again with cursor=next.",
        ),
        (
            list_sessions,
            "List sessions",
            "Sessions, most recently active first, filtered by "
            "tag, participant, project or activity date.",
        ),
        (
            history,
            "Change history",
            "The audit trail, newest first: which commit, agent and "
            "model changed what and when, for one session or the whole store.",
        ),
        (
            diff,
            "Diff revisions",
            "What changed in a session (or the store) between two "
            "revisions: turns added/removed/changed, summary and metadata changes.",
        ),
        (
            blame,
            "Blame a session",
            "Who (commit, agent, model) last changed each turn and the summary of a session.",
        ),
        (
            facts,
            "Curated facts",
            "What you know across sessions: the curated facts of the "
            "memory file (memory/MEMORY.md), each with its id and where it came from; with a "
            "query, the matching ones best first.",
        ),
    ):
        sdk.add_tool(server, fn, name=fn.__name__, title=title, description=text, read_only=True)


def _add_writes(server: Any, run: _Runner, options: ServerOptions) -> None:
    async def save_interaction(
        ctx: Context,
        session: SessionId,
        user: Annotated[str | None, Field(description="The user's message.")] = None,
        assistant: Annotated[str | None, Field(description="Your reply.")] = None,
        messages: Annotated[
            list[Said] | None,
            Field(
                description="Instead of (or after) user/assistant: messages from any "
                "speakers, in order."
            ),
        ] = None,
        tags: Annotated[list[str] | None, Field(description="Tags to add to the session.")] = None,
        metadata: Annotated[
            dict[str, str] | None,
            Field(description="Metadata keys to set on the session (project, links, or any key)."),
        ] = None,
        timestamp: When = None,
    ) -> CallToolResult:
        said = [m.model_dump() for m in messages or []]
        return await run(
            ctx,
            lambda mm: tools.save_interaction(
                mm, session, user, assistant, said, tags, metadata, timestamp, options.max_bytes
            ),
            write=True,
        )

    async def summarize(
        ctx: Context,
        session: SessionId,
        offline: Annotated[
            bool, Field(description="Use the offline summarizer even when an LLM is configured.")
        ] = False,
    ) -> CallToolResult:
        return await run(ctx, lambda mm: tools.summarize(mm, session, offline), write=True)

    async def remember(
        ctx: Context,
        text: Annotated[
            str,
            Field(
                min_length=1,
                max_length=8192,
                description="The fact, one sentence, e.g. 'Lives in Lisbon.'",
            ),
        ],
        section: Annotated[
            str | None, Field(description="Its heading, e.g. 'User', 'Preferences'.")
        ] = None,
        sources: Annotated[
            list[str] | None,
            Field(description="Where you learned it: 'session' or 'session#interaction_id'."),
        ] = None,
        tags: Annotated[list[str] | None, Field(description="Labels for the fact.")] = None,
    ) -> CallToolResult:
        return await run(
            ctx, lambda mm: tools.remember(mm, text, section, sources, tags), write=True
        )

    sdk.add_tool(
        server,
        remember,
        name="remember",
        title="Remember a fact",
        description="Add a lasting fact about the user or the project to the curated "
        "memory file, with where you learned it, as one git commit. It comes first "
        "in every get_context.",
        read_only=False,
    )
    sdk.add_tool(
        server,
        save_interaction,
        name="save_interaction",
        title="Save a turn",
        description="Save one conversation turn (the user's message and your reply, "
        "or messages from any speakers) to a session, as one git commit. Call it "
        "after every exchange worth remembering; the session is created on first "
        "save.",
        read_only=False,
    )
    sdk.add_tool(
        server,
        summarize,
        name="summarize",
        title="Summarize a session",
        description="Write or refresh a session's summary and key facts (a commit; "
        "a summary that would drop facts is held for review instead).",
        read_only=False,
    )


def _add_undo(server: Any, run: _Runner) -> None:
    async def revert(
        ctx: Context,
        commit: Annotated[str, Field(min_length=1, description="The commit to undo (sha).")],
    ) -> CallToolResult:
        return await run(ctx, lambda mm: tools.revert(mm, commit), write=True)

    async def rollback(
        ctx: Context,
        session: SessionId,
        to: Annotated[
            str, Field(min_length=1, description="The revision or ISO date to go back to.")
        ],
    ) -> CallToolResult:
        return await run(ctx, lambda mm: tools.rollback(mm, session, to), write=True)

    async def undo_agent(
        ctx: Context,
        since: Annotated[str, Field(min_length=1, description="Undo from this ISO date/time on.")],
        agent: Annotated[str | None, Field(description="Undo this agent's commits.")] = None,
        model: Annotated[str | None, Field(description="Undo this model's commits.")] = None,
        until: When = None,
        op: Annotated[str | None, Field(description="Only commits with this operation.")] = None,
        dry_run: Annotated[bool, Field(description="Only say what would be undone.")] = False,
    ) -> CallToolResult:
        return await run(
            ctx,
            lambda mm: tools.undo_agent(mm, agent, model, since, until, op, dry_run),
            write=True,
        )

    for fn, title, text in (
        (
            revert,
            "Revert a commit",
            "Undo exactly what one commit changed, as a new commit; turns saved after it are kept.",
        ),
        (
            rollback,
            "Roll a session back",
            "Restore a session as it was at a revision, as a new "
            "commit (history keeps everything).",
        ),
        (
            undo_agent,
            "Undo an agent",
            "Undo everything an agent or model did since a date, as "
            "one commit; dry_run first to see what would go.",
        ),
    ):
        sdk.add_tool(
            server,
            fn,
            name=fn.__name__,
            title=title,
            description=text,
            read_only=False,
            destructive=True,
        )


def _add_resources(server: Any, amm: AsyncMemoryManager) -> None:
    async def read(work: Callable[[MemoryManager], str]) -> str:
        try:
            return await amm.run(work)
        except GitmemError as exc:
            raise sdk.resource_error(str(exc)) from None

    async def session_index() -> str:
        return await read(lambda mm: json.dumps(mm.session_ids(), ensure_ascii=False))

    async def session_file(session_id: str) -> str:
        sid = sdk.uri_value(session_id)
        return await read(lambda mm: tools.session_markdown(mm, sid))

    async def session_history(session_id: str) -> str:
        sid = sdk.uri_value(session_id)
        return await read(
            lambda mm: json.dumps(
                tools.history(mm, sid, None, None, None, None, None, 100, True).data,
                ensure_ascii=False,
            )
        )

    async def session_as_of(session_id: str, rev: str) -> str:
        sid, at = sdk.uri_value(session_id), sdk.uri_value(rev)
        return await read(lambda mm: tools.session_markdown(mm, sid, at))

    for fn, uri, name, mime, text in (
        (
            session_index,
            "gitmem://sessions",
            "sessions",
            "application/json",
            "Every session id in the store.",
        ),
        (
            session_file,
            "gitmem://sessions/{session_id}",
            "session",
            "text/markdown",
            "A session's Markdown file as committed at HEAD.",
        ),
        (
            session_history,
            "gitmem://sessions/{session_id}/history",
            "session-history",
            "application/json",
            "The commits that changed a session, newest first.",
        ),
        (
            session_as_of,
            "gitmem://sessions/{session_id}/at/{rev}",
            "session-as-of",
            "text/markdown",
            "A session as it was at a revision (sha, HEAD~N or an ISO date).",
        ),
    ):
        sdk.add_resource(server, fn, uri, name=name, mime_type=mime, description=text)

    async def recall(session: str, question: str, max_tokens: str = "2000") -> list[Any]:
        try:  # the client sees gitmem's reason (a prompt's other errors reach only the log)
            budget = tools.context_budget(max_tokens)
            context = await amm.run(
                lambda mm: tools.get_context(mm, session, question, budget, 8, 8).text
            )
        except GitmemError as exc:
            raise sdk.prompt_error(str(exc)) from None
        text = (
            f"Here is what you remember of the conversation {session!r} (from gitmem):\n\n"
            f"{context}\n\nWith that in mind: {question}"
        )
        return [{"role": "user", "content": {"type": "text", "text": text}}]

    sdk.add_prompt(
        server,
        recall,
        name="recall",
        title="Recall for a question",
        description="Load what gitmem remembers about a session that is relevant "
        "to a question, then ask it.",
    )
