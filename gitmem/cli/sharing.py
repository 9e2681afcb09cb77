"""Sharing commands: remote, push, pull, sync, clone, merge-file, hook, hooks."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from gitmem.cli import views
from gitmem.cli.base import Context, F, cli, emit, pass_ctx
from gitmem.manager import MemoryManager
from gitmem.sync.hooks import HOOK_NAMES


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
    emit(
        ctx,
        {"name": added.name, "url": added.url},
        lambda: f"added remote {added.name} {added.url}",
    )


@remote.command("list")
@pass_ctx
def remote_list(ctx: Context) -> None:
    """List the remotes and their URLs."""
    found = ctx.manager().remotes()
    emit(
        ctx,
        [{"name": r.name, "url": r.url} for r in found],
        lambda: "\n".join(f"{r.name}\t{r.url}" for r in found) or "no remotes",
    )


def _remote_options(fn: F) -> F:
    fn = click.option("--branch", help="Branch to share (default: the current one).")(fn)
    return click.argument("remote_name", default="origin", metavar="[REMOTE]")(fn)


@cli.command()
@_remote_options
@pass_ctx
def push(ctx: Context, remote_name: str, branch: str | None) -> None:
    """Push the memory to REMOTE (default origin); refuses if the remote moved (use sync)."""
    sent = ctx.manager().push(remote_name, branch)
    emit(
        ctx,
        {"remote": remote_name, "pushed": sent},
        lambda: "pushed" if sent else "remote already up to date",
    )


@cli.command()
@_remote_options
@pass_ctx
def pull(ctx: Context, remote_name: str, branch: str | None) -> None:
    """Fetch REMOTE and merge its memory into this store (sessions merged by meaning)."""
    result = ctx.manager().pull(remote_name, branch)
    emit(ctx, result.as_dict(), lambda: views.sync_text(result, "pull"))


@cli.command()
@_remote_options
@click.option("--attempts", default=8, show_default=True, help="Rounds if the remote moves.")
@pass_ctx
def sync(ctx: Context, remote_name: str, branch: str | None, attempts: int) -> None:
    """Fetch, merge and push REMOTE, retrying when it moved meanwhile."""
    result = ctx.manager().sync(remote_name, branch, attempts=attempts)
    emit(ctx, result.as_dict(), lambda: views.sync_text(result, "sync"))


@cli.command()
@click.argument("url")
@click.argument("path", required=False, type=click.Path(file_okay=False))
@pass_ctx
def clone(ctx: Context, url: str, path: str | None) -> None:
    """Clone the memory store at URL into PATH and wire its merge driver."""
    target = path or Path(url.rstrip("/")).name.removesuffix(".git") or "memory"
    mm = MemoryManager.clone(url, target, agent=ctx.agent, model=ctx.model)
    emit(ctx, {"path": str(mm.path), "head": mm.head()}, lambda: f"cloned {url} into {mm.path}")


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
        # pre-push gets the refs pushed on stdin; other hooks read nothing
        stdin = sys.stdin.read() if name == "pre-push" else ""
        problems = mm.run_hook(name, args, stdin)
    if ctx.json:
        click.echo(
            json.dumps(
                [{"path": p.path, "line": p.line, "problem": p.problem} for p in problems],
                ensure_ascii=False,
            )
        )
        sys.exit(1 if problems else 0)
    for problem in problems:
        click.echo(str(problem), err=True)
    if problems:
        click.echo("gitmem: commit refused: see the problems above (`gitmem check`)", err=True)
        sys.exit(1)


@cli.group()
def hooks() -> None:
    """Manage gitmem's git hooks in a store, and print coding agents' hook settings."""


@hooks.command("install")
@pass_ctx
def hooks_install(ctx: Context) -> None:
    """Install the pre-commit, post-merge and post-checkout hooks (existing ones still run)."""
    written = ctx.manager().install_hooks()
    emit(ctx, [str(p) for p in written], lambda: "\n".join(f"installed {p}" for p in written))
