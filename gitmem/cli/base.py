"""The ``gitmem`` command group and what every command shares: the context that opens the
store, ``--json`` handling, error documents, and parsing of dates and revisions.

Every command takes ``--json`` (one JSON document on stdout, before or after the
subcommand). Errors go to stderr, or with ``--json`` to stdout as one document
``{"error": message, "kind": exception class}``; exit code 0 on success, 1 on a gitmem
error, 2 on a usage error.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from datetime import UTC, datetime, timedelta
from importlib import import_module
from typing import TYPE_CHECKING, Any, TypedDict, TypeVar

import click

from gitmem.errors import GitmemError, RevisionNotFound
from gitmem.guard.secrets import DEFAULT_CONFIG, SecretConfig, find_secrets
from gitmem.version import __version__

if TYPE_CHECKING:
    from gitmem.manager import MemoryManager

F = TypeVar("F", bound=Callable[..., Any])
# an option value longer than this is never repeated in an error (a pasted token, not a date)
SHOWN_MAX = 40


class Context:
    """Global options shared by every subcommand."""

    def __init__(
        self,
        repo: str | None,
        json_out: bool,
        agent: str,
        model: str | None,
        namespace: str | None = None,
    ) -> None:
        self.repo = repo
        self.json = json_out
        self.agent = agent
        self.model = model
        self.namespace = namespace or None  # an empty GITMEM_NAMESPACE: the default one

    def store_path(self, *, init: bool = False) -> str:
        """The store's folder: --repo, else the repository around the current folder (as
        git finds it); with ``init``, right here."""
        if self.repo or init:
            return self.repo or "."
        # the store's modules load on first use: `gitmem --version` and hooks start faster
        from gitmem.store.discover import find_store

        return find_store(".")

    def refuse_namespace(self, option: str) -> None:
        """``option`` reads across namespaces: not together with --namespace."""
        if self.namespace is not None:
            raise click.UsageError(f"{option} reads every namespace: drop --namespace")

    def manager(self, *, init: bool = False, adopt: bool = False) -> MemoryManager:
        """The store, opened in the namespace of --namespace (or GITMEM_NAMESPACE)."""
        from gitmem.manager import MemoryManager

        return MemoryManager(
            self.store_path(init=init),
            init=init,
            adopt=adopt,
            agent=self.agent,
            model=self.model,
            namespace=self.namespace,
        )

    def every_namespace(self, first: MemoryManager) -> Iterator[tuple[str | None, MemoryManager]]:
        """Each namespace of the store (the default one first, None: ``first``, the manager
        of :meth:`manager`) with a manager open on it, for an operator's read across them."""
        from gitmem.manager import MemoryManager

        yield None, first
        for name in first.namespaces():
            found = MemoryManager(first.path, agent=self.agent, model=self.model, namespace=name)
            try:
                yield name, found
            finally:
                found.close()


def emit(ctx: Context, data: Any, text: Callable[[], str]) -> None:
    """Print ``data`` as one JSON document when ``--json`` was given, else ``text()``."""
    if ctx.json:
        click.echo(json.dumps(data, ensure_ascii=False, indent=2, default=str))
    else:
        click.echo(text())


def _note_json(click_ctx: click.Context, _param: click.Parameter, value: bool) -> bool:
    # recorded on the shared Context, so an error raised later is printed as JSON too
    found = click_ctx.find_object(Context)
    if value and found is not None:
        found.json = True
    return value


class GitmemCommand(click.Command):
    """A command that takes ``--json`` after its name too. The flag only sets ``Context.json``
    (the group's callback has made it before the command's options are parsed), which
    :func:`emit` reads: no command needs a parameter for it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not any("--json" in getattr(p, "opts", ()) for p in self.params):
            self.params.append(
                click.Option(
                    ["--json"],
                    is_flag=True,
                    expose_value=False,
                    callback=_note_json,
                    help="Print one JSON document.",
                )
            )


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


def shown_value(value: str, secrets: SecretConfig | None = None) -> str:
    """``value`` quoted for an error message, unless it may be a token pasted into the wrong
    option (long, or a secret pattern matches): stderr ends up in logs and CI output."""
    if len(value) > SHOWN_MAX or any(find_secrets(value, secrets or DEFAULT_CONFIG)):
        return f"a value of {len(value)} characters (not shown: it may be a secret)"
    return repr(value)


# git's relative dates: "2 weeks ago", "2.weeks.ago", "1 hour ago"
_AGO = re.compile(r"(\d+)[ .]+(second|minute|hour|day|week|month|year)s?[ .]+ago")
_UNIT_SECONDS = {"second": 1, "minute": 60, "hour": 3600, "day": 86400, "week": 604800}


def git_date(text: str, now: datetime | None = None) -> datetime | None:
    """A date as ``git log --since`` spells it beyond ISO: ``N <unit>s ago`` (also with
    dots), ``now``, ``today``/``yesterday`` (midnight, local time), ``last week|month|year``
    and ``@<epoch seconds>``; None for anything else. Months and years count on the calendar."""
    now = now or datetime.now(UTC).astimezone()
    word = " ".join(text.lower().split())
    midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
    named = {"now": now, "today": midnight, "yesterday": midnight - timedelta(days=1)}
    if word in named:
        return named[word]
    if word.startswith("last "):
        word = "1 " + word[5:] + " ago"
    if re.fullmatch(r"@\d+", word):
        return datetime.fromtimestamp(int(word[1:]), UTC)
    found = _AGO.fullmatch(word)
    if found is None:
        return None
    count, unit = int(found[1]), found[2]
    if unit in _UNIT_SECONDS:
        return now - timedelta(seconds=count * _UNIT_SECONDS[unit])
    months = now.year * 12 + now.month - 1 - count * (12 if unit == "year" else 1)
    year, month = divmod(months, 12)
    for day in range(now.day, 0, -1):  # the 31st of a shorter month: its last day
        with contextlib.suppress(ValueError):
            return now.replace(year=year, month=month + 1, day=day)
    return None


def parse_when(
    value: str | None, name: str, secrets: SecretConfig | None = None, *, git: bool = False
) -> datetime | None:
    """A date option's value, ISO (with ``git``, also as git spells it: :func:`git_date`);
    a bad one is a usage error (exit 2) naming the option."""
    if value is None:
        return None
    try:
        return datetime.fromisoformat(value.strip())
    except ValueError:
        found = git_date(value) if git else None
        if found is not None:
            return found
        raise click.BadParameter(
            f"not an ISO date/time: {shown_value(value, secrets)}"
            + (" (nor a git date such as '2 weeks ago' or 'yesterday')" if git else ""),
            param_hint=name,
        ) from None


class Period(TypedDict):
    """The ``--since``/``--until`` pair, as keyword arguments of the manager's filters."""

    since: datetime | None
    until: datetime | None


def parse_period(
    since: str | None, until: str | None, secrets: SecretConfig | None = None
) -> Period:
    """``--since`` and ``--until`` parsed as :func:`parse_when` does, git's spellings
    included, to pass on as ``**``."""
    return Period(
        since=parse_when(since, "--since", secrets, git=True),
        until=parse_when(until, "--until", secrets, git=True),
    )


@contextlib.contextmanager
def rev_option(value: str | None, name: str, secrets: SecretConfig | None = None) -> Iterator[None]:
    """Around the use of a REV|DATE option: a value shaped like a date must be one (a usage
    error, exit 2, as for every date option), and an unknown revision is not echoed when it
    may be a secret."""
    from gitmem.store.gitlog import looks_like_date

    text = (value or "").strip()
    if looks_like_date(text):
        parse_when(text, name, secrets)
    try:
        yield
    except RevisionNotFound as exc:
        shown = shown_value(text, secrets)
        if not text or shown == repr(text):
            raise
        raise RevisionNotFound(str(exc).replace(repr(text), shown)) from None


class CommandsOnFirstUse(MutableMapping[str, click.Command]):
    """The root group's commands, each module imported when one of its commands is first
    asked for: a hook that runs ``gitmem save`` after every turn of an agent loads the
    module of ``save``, not the search, server and import code. A name the map does not
    know loads every module (a command added without a line in the map still works)."""

    def __init__(self, modules: Mapping[str, tuple[str, ...]]) -> None:
        # command name -> the modules that register it and its subcommands
        self.modules = modules
        self.loaded: dict[str, click.Command] = {}
        # a command seen through another name's module may still lack a module that adds to it
        self.complete: set[str] = set()

    def load(self, name: str | None = None) -> None:
        """Import the modules of command ``name``; None or an unknown name: every module."""
        wanted = self.modules.get(name) if name is not None else None
        every = sorted({module for modules in self.modules.values() for module in modules})
        for each in wanted or every:
            import_module(each)

    def __getitem__(self, name: str) -> click.Command:
        if name not in self.complete:
            self.load(name)
            self.complete.add(name)
        return self.loaded[name]

    def __setitem__(self, name: str, command: click.Command) -> None:
        self.loaded[name] = command

    def __delitem__(self, name: str) -> None:
        del self.loaded[name]

    def __iter__(self) -> Iterator[str]:
        self.load()
        return iter(dict(self.loaded))

    def __len__(self) -> int:
        self.load()
        return len(self.loaded)


class GitmemGroup(click.Group):
    """Turns gitmem errors into a clean message and exit code 1 (usage errors: 2)."""

    command_class = GitmemCommand
    group_class = type  # subgroups (import, remote, review, ...) behave the same

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: Any,
    ) -> click.Context:
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
@click.option(
    "--namespace",
    envvar="GITMEM_NAMESPACE",
    default=None,
    metavar="NS",
    help="Work in this namespace only: its sessions and its facts (default: "
    "GITMEM_NAMESPACE, else the store's default one).",
)
@click.version_option(version=__version__, prog_name="gitmem")
@click.pass_context
def cli(
    ctx: click.Context,
    repo: str | None,
    json_out: bool,
    agent: str,
    model: str | None,
    namespace: str | None,
) -> None:
    """gitmem: long-term conversation memory as Markdown files in a git repository."""
    ctx.obj = Context(repo, json_out, agent, model, namespace)


def _command_modules() -> dict[str, tuple[str, ...]]:
    by_module = {
        "capture": "capture",
        "coders": "hooks import",  # the coding agents' importers and hook settings
        "facts": "facts",
        "history": "blame diff log purge restore revert rollback undo",
        "imports": "export import",
        "search": "context embed reindex search",
        "serve": "mcp web",
        "sessions": "check demo init list namespaces save scan show",
        "sharing": "clone hook hooks merge-file pull push remote sync",
        "summaries": "review summarize",
    }
    found: dict[str, tuple[str, ...]] = {}
    for module, names in by_module.items():
        for name in names.split():
            found[name] = (*found.get(name, ()), f"gitmem.cli.{module}")
    return found


cli.commands = CommandsOnFirstUse(_command_modules())


pass_ctx = click.make_pass_decorator(Context)
