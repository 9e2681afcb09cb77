"""The ``gitmem`` command: parse arguments, call ``MemoryManager``, print the result.

Every command takes ``--json`` (one JSON document on stdout, before or after the
subcommand). Errors go to stderr, or with ``--json`` to stdout as one document
``{"error": message, "kind": exception class}``; exit code 0 on success, 1 on a gitmem
error, 2 on a usage error.
"""

from __future__ import annotations

import contextlib
import json
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import click

from gitmem import locomo, markdown, views
from gitmem.errors import GitmemError, RevisionNotFound, SessionNotFound
from gitmem.manager import MemoryManager
from gitmem.models import Message
from gitmem.revisions import looks_like_date
from gitmem.secrets import DEFAULT_CONFIG, SecretConfig, find_secrets
from gitmem.sharing import HOOK_NAMES
from gitmem.stores import find_store

F = TypeVar("F", bound=Callable[..., Any])
# an option value longer than this is never repeated in an error (a pasted token, not a date)
_SHOWN_MAX = 40


class Context:
    """Global options shared by every subcommand."""

    def __init__(self, repo: str | None, json_out: bool, agent: str, model: str | None) -> None:
        self.repo = repo
        self.json = json_out
        self.agent = agent
        self.model = model

    def manager(self, *, init: bool = False, adopt: bool = False) -> MemoryManager:
        # without --repo, the store is the repository around the current folder (as git
        # finds it); `init` creates one right here instead
        path = self.repo or ("." if init else find_store("."))
        return MemoryManager(path, init=init, adopt=adopt, agent=self.agent, model=self.model)


def _emit(ctx: Context, as_json: bool, data: Any, text: Callable[[], str]) -> None:
    if ctx.json or as_json:
        click.echo(json.dumps(data, ensure_ascii=False, indent=2, default=str))
    else:
        click.echo(text())


def _note_json(click_ctx: click.Context, _param: click.Parameter, value: bool) -> bool:
    # recorded on the shared Context, so an error raised later is printed as JSON too
    found = click_ctx.find_object(Context)
    if value and found is not None:
        found.json = True
    return value


def json_option(fn: F) -> F:
    return click.option("--json", "as_json", is_flag=True, callback=_note_json,
                        help="Print one JSON document.")(fn)  # fmt: skip


class GitmemCommand(click.Command):
    """A command that always takes ``--json``, even one with nothing but a message to say."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not any("--json" in getattr(p, "opts", ()) for p in self.params):
            self.params.append(click.Option(["--json"], is_flag=True, expose_value=False,
                                            callback=_note_json, help="Print one JSON document."))


class _JsonError(click.ClickException):
    """An error shown as one JSON document on stdout, keeping the exit code."""

    def __init__(self, message: str, kind: str, exit_code: int) -> None:
        super().__init__(message)
        self.kind = kind
        self.exit_code = exit_code  # type: ignore[misc]  # click declares it per class

    def show(self, file: Any = None) -> None:
        click.echo(json.dumps({"error": self.message, "kind": self.kind}, ensure_ascii=False))


def _wants_json(click_ctx: click.Context, args: list[str] | None = None) -> bool:
    found = click_ctx.find_object(Context)
    if found is not None and found.json:
        return True
    tokens = list(args if args is not None else click_ctx.meta.get("gitmem.args", ()))
    return "--json" in tokens[: tokens.index("--")] if "--" in tokens else "--json" in tokens


def _shown(value: str, secrets: SecretConfig | None = None) -> str:
    """``value`` quoted for an error message, unless it may be a token pasted into the wrong
    option (long, or a secret pattern matches): stderr ends up in logs and CI output."""
    if len(value) > _SHOWN_MAX or any(find_secrets(value, secrets or DEFAULT_CONFIG)):
        return f"a value of {len(value)} characters (not shown: it may be a secret)"
    return repr(value)


def _parse_when(value: str | None, name: str, secrets: SecretConfig | None = None
                ) -> datetime | None:
    """A date option's value; a bad one is a usage error (exit 2) naming the option."""
    if value is None:
        return None
    try:
        return datetime.fromisoformat(value.strip())
    except ValueError:
        raise click.BadParameter(f"not an ISO date/time: {_shown(value, secrets)}",
                                 param_hint=name) from None  # fmt: skip


@contextlib.contextmanager
def _rev_option(value: str | None, name: str, secrets: SecretConfig | None = None
                ) -> Iterator[None]:
    """Around the use of a REV|DATE option: a value shaped like a date must be one (a usage
    error, exit 2, as for every date option), and an unknown revision is not echoed when it
    may be a secret."""
    text = (value or "").strip()
    if looks_like_date(text):
        _parse_when(text, name, secrets)
    try:
        yield
    except RevisionNotFound as exc:
        shown = _shown(text, secrets)
        if not text or shown == repr(text):
            raise
        raise RevisionNotFound(str(exc).replace(repr(text), shown)) from None


class GitmemGroup(click.Group):
    """Turns gitmem errors into a clean message and exit code 1 (usage errors: 2)."""

    command_class = GitmemCommand
    group_class = type  # subgroups (import, remote, review, ...) behave the same

    def make_context(self, info_name: str | None, args: list[str],
                     parent: click.Context | None = None, **extra: Any) -> click.Context:
        given = list(args)  # parsing consumes the list
        try:
            made = super().make_context(info_name, args, parent=parent, **extra)
        except click.ClickException as exc:
            if isinstance(exc, _JsonError) or not _wants_json(click.Context(self), given):
                raise
            raise _JsonError(exc.format_message(), type(exc).__name__, exc.exit_code) from None
        made.meta.setdefault("gitmem.args", given)  # the whole command line (meta is shared)
        return made

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except GitmemError as exc:
            if _wants_json(ctx):
                raise _JsonError(str(exc), type(exc).__name__, 1) from None
            click.echo(f"error: {exc}", err=True)
            ctx.exit(1)
        except click.ClickException as exc:
            if isinstance(exc, _JsonError) or not _wants_json(ctx):
                raise
            raise _JsonError(exc.format_message(), type(exc).__name__, exc.exit_code) from None


@click.group(cls=GitmemGroup)
@click.option(
    "--repo",
    envvar="GITMEM_REPO",
    type=click.Path(file_okay=False),
    help="The memory store (default: GITMEM_REPO or the current folder).",
)
@click.option("--json", "json_out", is_flag=True, help="Print JSON on every command.")
@click.option(
    "--agent",
    envvar="GITMEM_AGENT",
    default="gitmem",
    show_default=True,
    help="Agent name recorded as commit author.",
)
@click.option("--model", envvar="GITMEM_MODEL", default=None, help="Model name for trailers.")
@click.version_option(package_name="gitmem-store")
@click.pass_context
def cli(
    ctx: click.Context, repo: str | None, json_out: bool, agent: str, model: str | None
) -> None:
    """gitmem: long-term conversation memory as Markdown files in a git repository."""
    ctx.obj = Context(repo, json_out, agent, model)


pass_ctx = click.make_pass_decorator(Context)


@cli.command()
@click.argument("path", required=False, type=click.Path(file_okay=False))
@click.option("--here", is_flag=True,
              help="Make the existing git repository at PATH (or --repo, or the current "
                   "folder) a store on purpose: one commit adding the gitmem merge "
                   "attributes to its .gitattributes.")
@pass_ctx
def init(ctx: Context, path: str | None, here: bool) -> None:
    """Create a memory store (a git repository) at PATH or --repo."""
    if path:
        ctx.repo = path
    mm = ctx.manager(init=True, adopt=here)
    _emit(ctx, False, {"path": str(mm.path), "head": mm.head()},
          lambda: f"Initialized gitmem store in {mm.path}")  # fmt: skip


@cli.command()
@click.argument("session_id")
@click.option("--user", "user_text", help="The user's message.")
@click.option("--assistant", "assistant_text", help="The assistant's reply.")
@click.option(
    "-m",
    "--message",
    "messages",
    multiple=True,
    metavar="SPEAKER: TEXT",
    help="A message from any speaker, e.g. 'Caroline: hi' (repeatable).",
)
@click.option("--tag", "tags", multiple=True, help="Tag the session (repeatable).")
@click.option(
    "--meta", "meta", multiple=True, metavar="KEY=VALUE", help="Set a metadata key (repeatable)."
)
@click.option("--timestamp", help="ISO time of the turn (default: now).")
@click.option("--id", "interaction_id", help="Interaction id (default: generated).")
@json_option
@pass_ctx
def save(
    ctx: Context,
    session_id: str,
    user_text: str | None,
    assistant_text: str | None,
    messages: tuple[str, ...],
    tags: tuple[str, ...],
    meta: tuple[str, ...],
    timestamp: str | None,
    interaction_id: str | None,
    as_json: bool,
) -> None:
    """Save one interaction to SESSION_ID as one commit."""
    turn: list[Message | dict[str, str]] = []
    if user_text is not None:
        turn.append({"role": "user", "content": user_text})
    if assistant_text is not None:
        turn.append({"role": "assistant", "content": assistant_text})
    for item in messages:
        speaker, sep, text = item.partition(":")
        if not sep:
            raise click.BadParameter(
                f"expected 'SPEAKER: TEXT', got {item!r}", param_hint="--message"
            )
        turn.append({"speaker": speaker.strip(), "content": text.removeprefix(" ")})
    if not turn:
        raise click.UsageError("nothing to save: give --user/--assistant or --message")
    metadata: dict[str, str] = {}
    for item in meta:
        key, sep, value = item.partition("=")
        if not sep:
            raise click.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint="--meta")
        metadata[key.strip()] = value.strip()
    mm = ctx.manager()
    sha = mm.save_messages(
        session_id,
        turn,
        _parse_when(timestamp, "--timestamp", mm.secret_config),
        interaction_id,
        tags=tags,
        metadata=metadata,
    )
    _emit(ctx, as_json, {"session_id": session_id, "commit": sha}, lambda: sha or "no change")


@cli.command()
@click.argument("session_id")
@click.option("--raw", is_flag=True, help="Print the Markdown file as stored.")
@click.option("--at", metavar="REV|DATE", help="As the store was then (sha, HEAD~3, ISO date).")
@json_option
@pass_ctx
def show(ctx: Context, session_id: str, raw: bool, at: str | None, as_json: bool) -> None:
    """Show a session (parsed, or --raw Markdown)."""
    mm = ctx.manager()
    with _rev_option(at, "--at", mm.secret_config):
        session = mm.load_memory(session_id, commit=mm.resolve(at) if at else None)
    if session is None:
        when = f" at {at}" if at else ""
        raise SessionNotFound(f"no session {session_id!r} in {mm.path}{when}")
    if raw and not (ctx.json or as_json):
        click.echo(markdown.render(session), nl=False)
        return

    _emit(ctx, as_json, session.model_dump(mode="json"), lambda: views.session_text(session))


@cli.command("list")
@click.option("--tag", "tags", multiple=True, help="Only sessions with this tag (repeatable).")
@click.option("--participant", help="Only sessions where this speaker takes part.")
@click.option("--project", help="Only sessions of this project.")
@click.option("--since", help="Last active at or after this ISO date/time.")
@click.option("--until", help="Last active at or before this ISO date/time.")
@click.option("--at", metavar="REV|DATE", help="As the store was then (sha, HEAD~3, ISO date).")
@json_option
@pass_ctx
def list_(
    ctx: Context,
    tags: tuple[str, ...],
    participant: str | None,
    project: str | None,
    since: str | None,
    until: str | None,
    at: str | None,
    as_json: bool,
) -> None:
    """List sessions, most recently active first."""
    mm = ctx.manager()
    with _rev_option(at, "--at", mm.secret_config):
        commit = mm.resolve(at) if at else None
    sessions = mm.list_sessions(
        tags=tags,
        participant=participant,
        project=project,
        since=_parse_when(since, "--since", mm.secret_config),
        until=_parse_when(until, "--until", mm.secret_config),
        commit=commit,
    )
    rows = [views.session_summary(s) for s in sessions]
    _emit(
        ctx,
        as_json,
        rows,
        lambda: (
            "\n".join(
                f"{r['id']}\t{r['interactions']} turns\t{r['last_active']}\t{','.join(r['tags'])}"
                for r in rows
            )
            or "no sessions"
        ),
    )


@cli.command()
@json_option
@pass_ctx
def check(ctx: Context, as_json: bool) -> None:
    """Validate every memory file; print path:line problems, exit 1 if any."""
    mm = ctx.manager()
    problems = mm.check()
    _emit(
        ctx,
        as_json,
        [{"path": p.path, "line": p.line, "problem": p.problem} for p in problems],
        lambda: "\n".join(str(p) for p in problems) or "all memory files parse cleanly",
    )
    if problems:
        sys.exit(1)


@cli.command()
@click.option(
    "--path",
    type=click.Path(file_okay=False),
    help="Where to build the demo store (default: a new temporary folder).",
)
@pass_ctx
def demo(ctx: Context, path: str | None) -> None:
    """Run the whole lifecycle on built-in defaults (offline, no API key)."""
    from gitmem.demo import run_demo

    target = Path(path) if path else Path(tempfile.mkdtemp(prefix="gitmem-demo-"))
    if not ctx.json:
        run_demo(target, echo=click.echo)
        return
    lines: list[str] = []
    run_demo(target, echo=lines.append)
    _emit(ctx, True, {"path": str(target), "log": "\n".join(lines).splitlines()}, str)


# --- retrieval ---


@cli.command()
@click.argument("query")
@click.option("-k", "--k", "k", default=10, show_default=True, type=click.IntRange(1, 1000),
              help="How many hits at most.")
@click.option("--tag", "tags", multiple=True, help="Only sessions with this tag (repeatable).")
@click.option("--project", help="Only sessions of this project.")
@click.option("--participant", help="Only sessions where this speaker takes part.")
@click.option("--session", "sessions", multiple=True, help="Only this session (repeatable).")
@click.option("--since", help="Only turns at or after this ISO date/time.")
@click.option("--until", help="Only turns at or before this ISO date/time.")
@click.option("--links", is_flag=True, help="Add summaries of sessions the hits link to.")
@click.option("--explain", is_flag=True, help="Show every candidate and its score components.")
@json_option
@pass_ctx
def search(ctx: Context, query: str, k: int, tags: tuple[str, ...], project: str | None,
           participant: str | None, sessions: tuple[str, ...], since: str | None,
           until: str | None, links: bool, explain: bool, as_json: bool) -> None:
    """Search the memory for QUERY (keyword + fuzzy ranking, any language)."""
    mm = ctx.manager()
    hits = mm.search(
        query, k, tags=tags, project=project, participant=participant,
        session=sessions or None, since=_parse_when(since, "--since", mm.secret_config),
        until=_parse_when(until, "--until", mm.secret_config), include_links=links,
        explain=explain,
    )  # fmt: skip

    def text() -> str:
        lines = [views.hit_line(at, hit) for at, hit in enumerate(hits, 1)]
        if not hits:
            lines.append("no relevant memories")
            lines.extend(f"note: {n}" for n in hits.notes)
        if hits.explanation is not None:
            lines.append("")
            lines.extend(views.explain_search(hits.explanation))
        return "\n".join(lines)

    data: dict[str, Any] = {"query": query, "hits": [h.model_dump(mode="json") for h in hits],
                            "notes": hits.notes}
    if hits.explanation is not None:
        data["explanation"] = hits.explanation
    _emit(ctx, as_json, data, text)


@cli.command()
@click.argument("session_id")
@click.argument("query")
@click.option("--max-tokens", default=2000, show_default=True, type=click.IntRange(1),
              help="Token budget of the whole context.")
@click.option("-k", "--k", "k", default=8, show_default=True, type=click.IntRange(0, 200),
              help="Memories to retrieve at most.")
@click.option("--recent", default=8, show_default=True, type=click.IntRange(0, 1000),
              help="Recent turns of the session to include at most.")
@click.option("--explain", is_flag=True, help="Show the search, the budget and what was cut.")
@json_option
@pass_ctx
def context(ctx: Context, session_id: str, query: str, max_tokens: int, k: int, recent: int,
            explain: bool, as_json: bool) -> None:
    """Assemble chat messages for SESSION_ID's next turn about QUERY, within a budget."""
    mm = ctx.manager()
    messages = mm.retrieve_context(session_id, query, max_tokens, k=max(k, 1),
                                   recent_turns=recent, explain=explain)

    def text() -> str:
        lines: list[str] = []
        info = messages.explanation
        if info is not None:
            if info["search"] is not None:
                lines.extend(views.explain_search(info["search"]))
                lines.append("")
            budget = info["budget"]
            lines.append(f"budget: {budget['used']} of {budget['budget']} tokens used "
                         f"({budget['counter']})")
            for piece in budget["included"]:
                lines.append(f"  + {piece['source']:<7} {piece['tokens']:>5}  {piece['ref']}")
            for piece in budget["cut"]:
                lines.append(f"  - {piece['source']:<7} {piece['tokens']:>5}  {piece['ref']}"
                             f"  ({piece['reason']})")
            lines.extend(f"note: {n}" for n in info["notes"])
            lines.append("")
        for message in messages:
            lines.append(f"[{message['role']}]")
            lines.append(message["content"])
        return "\n".join(lines) or "(no context)"

    data: dict[str, Any] = {"session_id": session_id, "messages": list(messages)}
    if messages.explanation is not None:
        data["explanation"] = messages.explanation
    _emit(ctx, as_json, data, text)


@cli.command()
@json_option
@pass_ctx
def reindex(ctx: Context, as_json: bool) -> None:
    """Rebuild the search index from the store's HEAD (never needed for correctness)."""
    mm = ctx.manager()
    start = time.perf_counter()
    quiet = ctx.json or as_json
    with click.progressbar(length=1, label="indexing sessions", file=sys.stderr,
                           hidden=quiet) as bar:  # fmt: skip

        def progress(done: int, total: int) -> None:
            bar.length = max(total, 1)
            bar.update(done - bar.pos)

        report = mm.reindex(progress)
    seconds = time.perf_counter() - start
    data = {"commit": report.commit, "sessions": report.indexed,
            "unreadable": report.unreadable, "seconds": round(seconds, 3)}
    _emit(ctx, as_json, data, lambda: (
        f"indexed {report.indexed} sessions at {str(report.commit)[:12]} in {seconds:.2f} s"
        + "".join(f"\nunreadable (see `gitmem check`): {p}" for p in report.unreadable)
    ))  # fmt: skip


@cli.group("import")
def import_() -> None:
    """Import conversations from other formats."""


@import_.command("locomo")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("--convs", help="Only these conversations, e.g. 0-2 or 0,3 (default: all).")
@json_option
@pass_ctx
def import_locomo(ctx: Context, file: str, convs: str | None, as_json: bool) -> None:
    """Import a LoCoMo benchmark file: one session per LoCoMo session, turn ids kept."""
    mm = ctx.manager()
    quiet = ctx.json or as_json
    ids = mm.import_locomo(
        file, convs=convs, progress=None if quiet else (lambda text: click.echo(text, err=True))
    )
    differing = [f"{sid} {iid}" for sid, iid in ids.differing]
    if differing and not quiet:
        click.echo(f"kept {len(differing)} stored turn(s) that differ from {file} "
                   "(session, interaction):\n  " + "\n  ".join(differing), err=True)
    _emit(ctx, as_json, {"sessions": list(ids), "commit": ids.commit, "added": len(ids.added),
                         "differing": [{"session_id": s, "interaction_id": i}
                                       for s, i in ids.differing]},
          lambda: f"imported {len(ids)} sessions from {file}: {len(ids.added)} new turns"
          + ("" if ids.commit else " (nothing changed, no commit)"))


@cli.group()
def bench() -> None:
    """Benchmarks that go through a real store."""


@bench.command("locomo")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("--convs", help="Only these conversations, e.g. 0-2 (default: all).")
@click.option("--depth", default=50, show_default=True, type=click.IntRange(25, 1000),
              help="Hits asked per question.")
@json_option
@pass_ctx
def bench_locomo(ctx: Context, file: str, convs: str | None, depth: int, as_json: bool) -> None:
    """Retrieval recall on LoCoMo (R@5/10/25 of turns, S@1/3 of sessions) per category."""
    quiet = ctx.json or as_json
    result = MemoryManager.bench_locomo(
        file, convs=convs, depth=depth,
        progress=None if quiet else (lambda text: click.echo(text, err=True)),
    )  # fmt: skip
    _emit(ctx, as_json, result, lambda: (
        locomo.table(result["rows"]) + f"\nimport {result['import_s']} s, "
        f"index {result['index_s']} s ({', '.join(result['conversations'])})"
    ))  # fmt: skip


# --- sharing ---


@cli.group()
def remote() -> None:
    """Manage the remotes a store shares memory with."""


@remote.command("add")
@click.argument("name")
@click.argument("url")
@pass_ctx
def remote_add(ctx: Context, name: str, url: str) -> None:
    """Add remote NAME at URL (authentication stays with git: ssh agent, credential helper)."""
    added = ctx.manager().remote_add(name, url)
    _emit(ctx, False, {"name": added.name, "url": added.url},
          lambda: f"added remote {added.name} {added.url}")  # fmt: skip


@remote.command("list")
@json_option
@pass_ctx
def remote_list(ctx: Context, as_json: bool) -> None:
    """List the remotes and their URLs."""
    found = ctx.manager().remotes()
    _emit(ctx, as_json, [{"name": r.name, "url": r.url} for r in found],
          lambda: "\n".join(f"{r.name}\t{r.url}" for r in found) or "no remotes")  # fmt: skip


def _remote_options(fn: F) -> F:
    fn = click.option("--branch", help="Branch to share (default: the current one).")(fn)
    return click.argument("remote_name", default="origin", metavar="[REMOTE]")(fn)


@cli.command()
@_remote_options
@json_option
@pass_ctx
def push(ctx: Context, remote_name: str, branch: str | None, as_json: bool) -> None:
    """Push the memory to REMOTE (default origin); refuses if the remote moved (use sync)."""
    sent = ctx.manager().push(remote_name, branch)
    _emit(ctx, as_json, {"remote": remote_name, "pushed": sent},
          lambda: "pushed" if sent else "remote already up to date")  # fmt: skip


@cli.command()
@_remote_options
@json_option
@pass_ctx
def pull(ctx: Context, remote_name: str, branch: str | None, as_json: bool) -> None:
    """Fetch REMOTE and merge its memory into this store (sessions merged by meaning)."""
    result = ctx.manager().pull(remote_name, branch)
    _emit(ctx, as_json, result.as_dict(), lambda: views.sync_text(result, "pull"))


@cli.command()
@_remote_options
@click.option("--attempts", default=8, show_default=True, help="Rounds if the remote moves.")
@json_option
@pass_ctx
def sync(ctx: Context, remote_name: str, branch: str | None, attempts: int, as_json: bool) -> None:
    """Fetch, merge and push REMOTE, retrying when it moved meanwhile."""
    result = ctx.manager().sync(remote_name, branch, attempts=attempts)
    _emit(ctx, as_json, result.as_dict(), lambda: views.sync_text(result, "sync"))


@cli.command()
@click.argument("url")
@click.argument("path", required=False, type=click.Path(file_okay=False))
@pass_ctx
def clone(ctx: Context, url: str, path: str | None) -> None:
    """Clone the memory store at URL into PATH and wire its merge driver."""
    target = path or Path(url.rstrip("/")).name.removesuffix(".git") or "memory"
    mm = MemoryManager.clone(url, target, agent=ctx.agent, model=ctx.model)
    _emit(ctx, False, {"path": str(mm.path), "head": mm.head()},
          lambda: f"cloned {url} into {mm.path}")  # fmt: skip


@cli.command("merge-file")
@click.argument("base", type=click.Path(dir_okay=False, exists=True))
@click.argument("ours", type=click.Path(dir_okay=False, exists=True))
@click.argument("theirs", type=click.Path(dir_okay=False, exists=True))
@click.argument("path")
def merge_file_command(base: str, ours: str, theirs: str, path: str) -> None:
    """Git merge driver (%O %A %B %P): merge a session file by meaning into OURS."""
    code, messages = MemoryManager.merge_file(Path(base), Path(ours), Path(theirs), path)
    found = click.get_current_context().find_object(Context)
    if found is not None and found.json:
        click.echo(json.dumps({"exit": code, "messages": messages}, ensure_ascii=False))
    else:
        for line in messages:
            click.echo(line, err=True)
    sys.exit(code)


@cli.command()
@click.argument("name", type=click.Choice(HOOK_NAMES))
@click.argument("args", nargs=-1)
@click.pass_context
def hook(click_ctx: click.Context, name: str, args: tuple[str, ...]) -> None:
    """Do the work of git hook NAME (what the scripts in hooks/ call)."""
    ctx: Context = click_ctx.find_object(Context)  # type: ignore[assignment]
    if name == "pre-commit" and args:
        problems = MemoryManager.validate_files(args)  # files from the pre-commit framework
    else:
        # git runs hooks in the top folder of the store; GITMEM_REPO may name another one
        parent = click_ctx.parent
        given = parent is not None and (
            parent.get_parameter_source("repo") == click.core.ParameterSource.COMMANDLINE
        )
        mm = MemoryManager(ctx.repo if given and ctx.repo else ".", agent=ctx.agent)
        problems = mm.run_hook(name, args)
    if ctx.json:
        click.echo(json.dumps([{"path": p.path, "line": p.line, "problem": p.problem}
                               for p in problems], ensure_ascii=False))  # fmt: skip
        sys.exit(1 if problems else 0)
    for problem in problems:
        click.echo(str(problem), err=True)
    if problems:
        click.echo("gitmem: commit refused: fix the memory files above (`gitmem check`)", err=True)
        sys.exit(1)


@cli.group()
def hooks() -> None:
    """Manage gitmem's git hooks in a store."""


@hooks.command("install")
@pass_ctx
def hooks_install(ctx: Context) -> None:
    """Install the pre-commit, post-merge and post-checkout hooks (existing ones still run)."""
    written = ctx.manager().install_hooks()
    _emit(
        ctx, False, [str(p) for p in written], lambda: "\n".join(f"installed {p}" for p in written)
    )


# --- summaries ---


@cli.command()
@click.argument("session_id", required=False)
@click.option("--llm/--offline", "use_llm", default=None,
              help="Force the LLM (GITMEM_LLM_* / OPENAI_*) or the offline summarizer "
                   "(default: the LLM when one is configured).")
@click.option("--idle", metavar="DURATION",
              help="Summarize every session quiet for DURATION (30m, 2h, 1d) instead of one.")
@click.option("--count", type=click.IntRange(min=1), help="Summarize only the first N new turns.")
@json_option
@pass_ctx
def summarize(ctx: Context, session_id: str | None, use_llm: bool | None, idle: str | None,
              count: int | None, as_json: bool) -> None:
    """Summarize SESSION_ID's new turns as one commit (or, with --idle, all idle sessions)."""
    from gitmem.summarize import LLMSummarizer, Summarizer, parse_duration
    from gitmem.summarizing import outcome_lines

    if (session_id is None) == (idle is None):
        raise click.UsageError("give a SESSION_ID or --idle DURATION (not both)")
    engine: Summarizer | None = None
    mm = ctx.manager()
    if use_llm:
        config = mm.llm_config()
        if config is None:
            raise click.UsageError(
                "--llm: no LLM configured; set GITMEM_LLM_BASE_URL / GITMEM_LLM_MODEL / "
                "GITMEM_LLM_API_KEY (or the OPENAI_* variables)")
        engine = LLMSummarizer(config)
    if idle is not None:
        try:
            quiet = parse_duration(idle)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--idle") from None
        outcomes = mm.summarize_idle(quiet, summarizer=engine, offline=use_llm is False)
        _emit(ctx, as_json, [o.to_dict() for o in outcomes],
              lambda: "\n".join(outcome_lines(outcomes)) or f"no session idle for {idle}")
        if any(o.status != "committed" for o in outcomes):
            sys.exit(1)
        return
    assert session_id is not None
    sha = mm.summarize(session_id, summarizer=engine, offline=use_llm is False, count=count)
    outcome = mm.last_summary
    if outcome is not None and outcome.fallback and not (ctx.json or as_json):
        click.echo(f"warning: {outcome.fallback}; used the offline summarizer", err=True)
    _emit(ctx, as_json, outcome.to_dict() if outcome else {"commit": sha}, lambda: sha)


@cli.group()
def review() -> None:
    """Summaries held by the loss guard on gitmem/review/<session> branches."""


@review.command("list")
@json_option
@pass_ctx
def review_list(ctx: Context, as_json: bool) -> None:
    """List summaries waiting for review."""
    items = ctx.manager().review_list()
    _emit(ctx, as_json, [i.to_dict() for i in items],
          lambda: "\n".join(f"{i.session_id}\t{i.branch}\t{i.commit[:12]}\t{i.subject}"
                            for i in items) or "no summaries waiting for review")


@review.command("show")
@click.argument("session_id")
@json_option
@pass_ctx
def review_show(ctx: Context, session_id: str, as_json: bool) -> None:
    """Show a held summary: the loss report and its diff."""
    item = ctx.manager().review_show(session_id)
    _emit(ctx, as_json, item.to_dict(), lambda: f"{item.message.rstrip()}\n\n{item.diff}")


@review.command("accept")
@click.argument("session_id")
@json_option
@pass_ctx
def review_accept(ctx: Context, session_id: str, as_json: bool) -> None:
    """Apply a held summary to the session (one commit) and drop its branch."""
    sha = ctx.manager().review_accept(session_id)
    _emit(ctx, as_json, {"session_id": session_id, "commit": sha}, lambda: sha)


@review.command("reject")
@click.argument("session_id")
@json_option
@pass_ctx
def review_reject(ctx: Context, session_id: str, as_json: bool) -> None:
    """Drop a held summary's branch (the session keeps its current summary)."""
    sha = ctx.manager().review_reject(session_id)
    _emit(ctx, as_json, {"session_id": session_id, "dropped": sha},
          lambda: f"dropped {sha[:12]}")


# --- history ---


@cli.command("log")
@click.argument("session_id", required=False)
@click.option("--op", help="Only commits with this Gitmem-Op (save, summarize, revert...).")
@click.option("--agent", "by_agent", help="Only commits by this agent (Gitmem-Agent).")
@click.option("--model", "by_model", help="Only commits made with this model (Gitmem-Model).")
@click.option("--since", help="Only commits at or after this ISO date/time.")
@click.option("--until", help="Only commits at or before this ISO date/time.")
@click.option("--limit", type=click.IntRange(min=1), help="At most this many commits.")
@click.option("--changes", is_flag=True, help="Also list what each commit changed (slower).")
@json_option
@pass_ctx
def log_(
    ctx: Context,
    session_id: str | None,
    op: str | None,
    by_agent: str | None,
    by_model: str | None,
    since: str | None,
    until: str | None,
    limit: int | None,
    changes: bool,
    as_json: bool,
) -> None:
    """The audit trail of a session (or of the whole store), newest first."""
    mm = ctx.manager()
    revisions = mm.history(
        session_id,
        op=op,
        agent=by_agent,
        model=by_model,
        since=_parse_when(since, "--since", mm.secret_config),
        until=_parse_when(until, "--until", mm.secret_config),
        limit=limit,
        changes=changes,
    )

    def text() -> str:
        lines = []
        for rev in revisions:
            lines.append(views.rev_line(rev))
            for sid, labels in rev.changes.items():
                lines.extend(f"    {sid}: {label}" for label in labels)
        return "\n".join(lines) or "no commits match"

    _emit(ctx, as_json, [r.model_dump(mode="json") for r in revisions], text)


@cli.command("diff")
@click.argument("args", nargs=-1, required=True, metavar="SESSION A [B]")
@click.option("--all", "whole", is_flag=True, help="Every session: the arguments are A [B].")
@click.option("--structured", is_flag=True, help="Interactions, metadata and summary changes.")
@json_option
@pass_ctx
def diff_(
    ctx: Context, args: tuple[str, ...], whole: bool, structured: bool, as_json: bool
) -> None:
    """Differences of SESSION between revisions A and B (default B: HEAD).

    Revisions are shas, HEAD~N, branch names or ISO dates. With --all, the whole store.
    """
    session_id = None if whole else args[0]
    revs = args if whole else args[1:]
    if not 1 <= len(revs) <= 2:
        raise click.UsageError("give SESSION A [B], or --all A [B]")
    result = ctx.manager().diff(session_id, revs[0], revs[1] if len(revs) > 1 else None)

    def text() -> str:
        if not structured:
            return result.unified.rstrip("\n") or "no differences"
        lines = [line for d in result.sessions for line in views.structured(d)]
        lines += [f"{path} (not a session file)" for path in result.files]
        return "\n".join(lines) or "no differences"

    data = result.model_dump(mode="json")
    data["unified"] = result.unified
    _emit(ctx, as_json, data, text)


@cli.command()
@click.argument("session_id")
@json_option
@pass_ctx
def blame(ctx: Context, session_id: str, as_json: bool) -> None:
    """Who last changed each interaction and the summary of SESSION, and when."""
    entries = ctx.manager().blame(session_id)

    def text() -> str:
        lines = []
        for entry in entries:
            who = (entry.agent or entry.author) + (f" ({entry.model})" if entry.model else "")
            item = entry.interaction_id or "summary"
            lines.append(
                f"{item}\t{entry.sha[:12]}  {entry.time.isoformat()}  {who}  {entry.op or '-'}"
            )
        return "\n".join(lines) or "the session is empty"

    _emit(ctx, as_json, [e.model_dump(mode="json") for e in entries], text)


def _written(ctx: Context, as_json: bool, sha: str | None, what: str, unchanged: str) -> None:
    _emit(ctx, as_json, {"commit": sha}, lambda: f"{what}: {sha}" if sha else unchanged)


@cli.command()
@click.argument("session_id")
@click.option("--to", "to", required=True, metavar="REV|DATE", help="The revision to go back to.")
@json_option
@pass_ctx
def rollback(ctx: Context, session_id: str, to: str, as_json: bool) -> None:
    """Restore SESSION as it was at a revision, as a new commit."""
    mm = ctx.manager()
    with _rev_option(to, "--to", mm.secret_config):
        sha = mm.rollback(session_id, to=to)
    _written(ctx, as_json, sha, "rolled back", "already in that state; nothing written")


@cli.command()
@click.argument("commit")
@json_option
@pass_ctx
def revert(ctx: Context, commit: str, as_json: bool) -> None:
    """Undo exactly what COMMIT changed (part by part), as a new commit."""
    sha = ctx.manager().revert(commit)
    _written(ctx, as_json, sha, "reverted", "already undone; nothing written")


@cli.command()
@click.option("--agent", "by_agent", help="Undo the commits of this agent (Gitmem-Agent).")
@click.option("--model", "by_model", help="Undo the commits made with this model.")
@click.option("--op", help="Only commits with this Gitmem-Op.")
@click.option("--since", required=True, help="From this ISO date/time on.")
@click.option("--until", help="Up to this ISO date/time.")
@click.option("--dry-run", is_flag=True, help="Only list what would be undone.")
@json_option
@pass_ctx
def undo(
    ctx: Context,
    by_agent: str | None,
    by_model: str | None,
    op: str | None,
    since: str,
    until: str | None,
    dry_run: bool,
    as_json: bool,
) -> None:
    """Undo everything an agent or model did since a date, as one commit."""
    if not (by_agent or by_model):
        raise click.UsageError("say whose changes to undo: --agent NAME or --model NAME")
    mm = ctx.manager()
    result = mm.revert_where(
        agent=by_agent,
        model=by_model,
        op=op,
        since=_parse_when(since, "--since", mm.secret_config),
        until=_parse_when(until, "--until", mm.secret_config),
        dry_run=dry_run,
    )

    def text() -> str:
        if not result.reverted:
            return "no commits match; nothing to undo"
        head = "would undo" if dry_run else "undoing"
        lines = [f"{head} {len(result.reverted)} commit(s):"]
        lines += ["  " + views.rev_line(r) for r in result.reverted]
        lines += [line for d in result.sessions for line in views.structured(d)]
        if not dry_run:
            lines.append(f"committed {result.commit}" if result.commit else "nothing left to undo")
        return "\n".join(lines)

    _emit(ctx, as_json, result.model_dump(mode="json"), text)


@cli.command()
@click.argument("session_id")
@click.option("--rev", metavar="REV|DATE", help="The version to bring back (default: the last).")
@json_option
@pass_ctx
def restore(ctx: Context, session_id: str, rev: str | None, as_json: bool) -> None:
    """Bring back a deleted SESSION from history, as a new commit."""
    mm = ctx.manager()
    with _rev_option(rev, "--rev", mm.secret_config):
        sha = mm.restore_session(session_id, rev)
    _written(ctx, as_json, sha, "restored", "nothing written")


# --- reliability ---


@cli.command()
@json_option
@pass_ctx
def scan(ctx: Context, as_json: bool) -> None:
    """Report secrets already in history (every branch), masked; exit 1 if any."""
    findings = ctx.manager().scan_history()

    def text() -> str:
        if not findings:
            return "no secrets found in history"
        still = sum(1 for f in findings if f.at_head)
        lines = [str(f) for f in findings]
        lines.append(f"{len(findings)} secret(s) in history, {still} still at HEAD: rotate "
                     "each key, then purge history (README: Reliability and security)")
        return "\n".join(lines)

    _emit(ctx, as_json, [f.to_dict() for f in findings], text)
    if findings:
        sys.exit(1)


def main() -> None:
    """Entry point of the ``gitmem`` console script."""
    cli(prog_name="gitmem")


if __name__ == "__main__":
    main()
