"""Guards on what ``MemoryManager`` commits: secrets redacted, sizes bounded; history scanned.

:class:`Guard` is a part of the store (:class:`~gitmem.core.SessionStore`),
so the save path guards every write. Every write builds the new ``Session`` and hands it to
:meth:`Guard.screen_session` before it is rendered: new message content,
summary text and metadata values are scanned (``gitmem.guard.secrets``), each secret is replaced
by ``[REDACTED:<kind>]``, and the commit gets a ``Gitmem-Redacted: <kind>=<count>, ...``
trailer. Labels (speakers, tags, project, links) get ``REDACTED:<kind>``; a secret in a value
that names something (session id, interaction id, metadata key) is refused
(``SecretRefused``), as redacting it would change the name. Content over
:data:`MAX_MESSAGE_BYTES` is refused with a ``ValidationError``.

Two more guards sit on every path into a commit: :meth:`Guard._guard_commit` sees
each commit message and author line last (the repository calls it), and
:meth:`Guard.screen_files` checks whole files that rollback, revert, restore and a
sync merge bring back from history. :meth:`Guard.scan_history` reports secrets that
reached history before (or around) the guards, never printing a secret, and
:meth:`Guard.check` reports session files that do not parse (``path:line``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from operator import is_
from typing import Any

from gitmem.errors import (
    ConfigError,
    Diagnostic,
    ParseError,
    RepositoryError,
    SecretRefused,
    ValidationError,
)
from gitmem.format.facts import parse_facts
from gitmem.format.parse import parse_bytes
from gitmem.format.paths import (
    NAMESPACES_DIR,
    archive_dir,
    id_from_archive_path,
    id_from_part_path,
    id_from_path,
    in_namespace_layout,
    memory_path,
    misplaced,
    session_dir,
)
from gitmem.format.render import render
from gitmem.guard.drops import history_drops
from gitmem.guard.redact import (
    _redact_into,
    _redact_metadata,
    _refuse,
    _secrets_in,
    with_redacted_trailer,
)
from gitmem.guard.scan import SecretFinding, scan_repository
from gitmem.guard.secrets import SecretConfig, redact, redacted_label
from gitmem.models import Interaction, Message, Session, Summary
from gitmem.store.layout import session_files
from gitmem.store.repository import Repository
from gitmem.store.transaction import Identity, Transaction

# The largest message (or summary text) a save accepts, in UTF-8 bytes. A save holds a few
# copies of the file while rendering and packing it: a 10 MB message peaks near 150 MB.
MAX_MESSAGE_BYTES = 16 * 1024 * 1024


class Guard:
    """Secret redaction, size limits and the history scan, over one repository.

    Args:
        repo: the store's repository; its commit guard is set to :meth:`_guard_commit`.
        namespace: the namespace new sessions go into (its name is checked for secrets).
        git_config: the store's git settings of a section (``gitmem.secrets`` is read).
    """

    def __init__(
        self,
        repo: Repository,
        namespace: str | None,
        git_config: Callable[[str], list[tuple[str, str]]],
    ) -> None:
        self._repo = repo
        self._git_config = git_config
        self.namespace = namespace
        self.max_message_bytes = MAX_MESSAGE_BYTES
        self._secret_config: SecretConfig | None = None
        # (config, {identity: (redacted identity, counts)}): an agent's name is checked once
        self._identity_cache: (
            tuple[SecretConfig, dict[Identity, tuple[Identity, Counter[str]]]] | None
        ) = None
        repo.commit_guard = self._guard_commit  # secrets in messages and authors

    # --- configuration --------------------------------------------------------------------

    @property
    def secret_config(self) -> SecretConfig:
        """What counts as a secret here: set it, or it is read from git config once
        (``gitmem.secrets.redact``, ``gitmem.secrets.pattern``, ``gitmem.secrets.allow``)."""
        if self._secret_config is None:
            pairs = self._git_config("gitmem.secrets")
            try:
                self._secret_config = SecretConfig.from_git(pairs)
            except ValueError as exc:
                raise ConfigError(
                    f"git config gitmem.secrets: {exc}; fix it with `git config --edit`"
                ) from None
        return self._secret_config

    @secret_config.setter
    def secret_config(self, value: SecretConfig) -> None:
        self._secret_config = value

    # --- the guard on every write ---------------------------------------------------------

    def screen_session(
        self, txn: Transaction, current: Session | None, updated: Session | None
    ) -> Session | None:
        """``updated`` with the content it adds over ``current`` checked for size and with
        its secrets redacted (counted on ``txn`` for the commit's trailer).

        Raises:
            SecretRefused: a new session id, interaction id or metadata key holds a secret.
        """
        if updated is None:
            return None
        counts: Counter[str] = Counter()
        config = self.secret_config
        if current is None and config.redact:
            _refuse(updated.id, "the session id", config)
            if self.namespace:  # it names the session's folder
                _refuse(self.namespace, "the namespace", config)
        old, new = current.interactions if current else [], updated.interactions
        known = set(map(id, old))
        # a save appends to the same turn objects: only the turns after them can be new
        same = len(old) if len(old) <= len(new) and all(map(is_, old, new)) else 0
        turns: list[Interaction] = new[:same]
        for turn in new[same:]:
            if id(turn) not in known:
                turn = self._guard_turn(updated.id, turn, config, counts)
            turns.append(turn)
        changes: dict[str, Any] = {}
        if any(a is not b for a, b in zip(turns[same:], new[same:], strict=True)):
            changes["interactions"] = turns
        summary = updated.summary
        if summary is not None and summary is not (current.summary if current else None):
            guarded = self._guard_summary_with(updated.id, summary, config, counts)
            if guarded is not summary:
                changes["summary"] = guarded
        if config.redact:
            changes.update(_redact_metadata(updated, current, config, counts))
        if counts:
            for kind, n in counts.items():
                txn.redacted[kind] = txn.redacted.get(kind, 0) + n
        return updated.model_copy(update=changes) if changes else updated

    def screen_summary(self, txn: Transaction, session_id: str, summary: Summary) -> Summary:
        """A new summary, size-checked and redacted (for the summary commits)."""
        counts: Counter[str] = Counter()
        guarded = self._guard_summary_with(session_id, summary, self.secret_config, counts)
        for kind, n in counts.items():
            txn.redacted[kind] = txn.redacted.get(kind, 0) + n
        return guarded

    def screen_hand_edit(
        self, txn: Transaction, session: Session, raw: bytes
    ) -> tuple[Session, bytes]:
        """A person's uncommitted edit, redacted before it is recorded; the file is then
        written as rendered (only if it held a secret: otherwise it is kept byte for byte)."""
        guarded = self.screen_session(txn, None, session)
        assert guarded is not None
        if guarded is session:
            return session, raw
        return guarded, render(guarded).encode("utf-8")

    def screen_files(
        self, txn: Transaction, changes: dict[str, bytes | None], *, refuse: bool = True
    ) -> tuple[dict[str, bytes | None], list[str]]:
        """Whole files brought back from history (rollback, revert, restore, a merge),
        checked like new content before they are committed.

        A file with a secret that parses as a session is redacted like a save (and
        rendered anew); a secret that cannot be redacted (in an id or a metadata key, or
        in a file that is not a session) refuses the write with ``SecretRefused`` naming
        ``path:line``, or with ``refuse=False`` is kept and described in the returned list.
        A file without secrets is kept byte for byte.
        """
        config = self.secret_config
        if not config.redact:
            return changes, []
        out: dict[str, bytes | None] = {}
        problems: list[str] = []
        for path, data in changes.items():
            if data is not None and _secrets_in(data, config):
                try:
                    data = self._guard_file(txn, path, data)
                except ValidationError as exc:  # a secret in a name, or a message too large
                    if refuse:
                        raise
                    problems.append(str(exc))  # kept as it is, reported
                else:
                    left = _secrets_in(data, config)
                    if left:
                        problem = (
                            f"{path}:{left[0].line}: a {left[0].kind} ({left[0].masked}) "
                            "that cannot be redacted in this file"
                        )
                        if refuse:
                            raise SecretRefused(
                                f"{problem}; nothing was written. Edit the file by hand to "
                                "remove it, or pick another revision"
                            )
                        problems.append(problem)
            out[path] = data
        return out, problems

    def secrets_in_files(self, files: Mapping[str, bytes | None]) -> list[str]:
        """``path:line: kind masked`` of every secret in ``files`` (for reports)."""
        config = self.secret_config
        return [
            f"{path}:{found.line}: {found.kind} {found.masked}"
            for path, data in files.items()
            if data is not None
            for found in _secrets_in(data, config)
        ]

    def _guard_file(self, txn: Transaction, path: str, data: bytes) -> bytes:
        try:
            session = parse_bytes(data, path)
        except ParseError:
            return data  # not a session: the caller reports what is left
        try:
            guarded = self.screen_session(txn, None, session)
        except ValidationError as exc:
            raise type(exc)(f"{path}: {exc}") from None
        if guarded is session or guarded is None:
            return data
        return render(guarded).encode("utf-8")

    def _guard_commit(self, message: str, identity: Identity) -> tuple[str, Identity]:
        """The last look at a commit before it is written: secrets in its message (subject,
        body, trailers such as ``Gitmem-Agent``, ``Gitmem-Model``, ``Gitmem-Fallback``) and
        in its author's name and email are replaced, and counted in ``Gitmem-Redacted``."""
        config = self.secret_config
        if not config.redact:
            return message, identity
        clean, counts = redact(message, config)
        author, found = self._safe_identity(identity, config)
        if found:
            counts = counts + found
        if counts:
            clean = with_redacted_trailer(clean, counts)
        return clean, author

    def _safe_identity(
        self, identity: Identity, config: SecretConfig
    ) -> tuple[Identity, Counter[str]]:
        cache = self._identity_cache
        if cache is None or cache[0] is not config:
            cache = self._identity_cache = (config, {})
        known = cache[1].get(identity)
        if known is None:
            name, in_name = redact(identity.name, config, label=True)
            email, in_email = redact(identity.email, config, label=True)
            known = cache[1][identity] = (Identity(name, email), in_name + in_email)
        return known

    def safe_text(self, text: str) -> str:
        """``text`` fit for a commit subject: secrets replaced (not counted: the content it
        quotes is) and lone surrogates, which UTF-8 cannot hold, shown as ``?``."""
        config = self.secret_config
        text = redact(text, config)[0] if config.redact else text
        return text.encode("utf-8", "replace").decode("utf-8")

    def _check_size(self, text: str, what: str) -> None:
        limit = self.max_message_bytes
        if len(text) * 4 <= limit:
            return  # no UTF-8 encoding of it can be over the limit
        size = len(text.encode("utf-8", "surrogatepass"))
        if size > limit:
            raise ValidationError(
                f"{what} is {size:,} bytes, over the {limit:,}-byte limit "
                "(gitmem.guard.methods.MAX_MESSAGE_BYTES; set mm.max_message_bytes to change it); "
                "store large documents as files and save a reference to them"
            )

    def _guard_turn(
        self, session_id: str, turn: Interaction, config: SecretConfig, counts: Counter[str]
    ) -> Interaction:
        if config.redact:
            _refuse(
                turn.id, f"the interaction id (--id) of a turn in session {session_id!r}", config
            )
        messages: list[Message] = []
        for at, message in enumerate(turn.messages):
            if len(message.content) * 4 > self.max_message_bytes:  # else it cannot be over
                self._check_size(
                    message.content,
                    f"session {session_id!r}, interaction {turn.id!r}, message {at}",
                )
            if config.redact:
                update: dict[str, str] = {}
                text, found = redact(message.content, config)
                if found:
                    counts.update(found)
                    update["content"] = text
                speaker, kinds = redacted_label(message.speaker, config)
                if kinds:
                    counts.update(kinds)
                    update["speaker"] = speaker
                if update:
                    message = message.model_copy(update=update)
            messages.append(message)
        if all(a is b for a, b in zip(messages, turn.messages, strict=True)):
            return turn
        return turn.model_copy(update={"messages": messages})

    def _guard_summary_with(
        self, session_id: str, summary: Summary, config: SecretConfig, counts: Counter[str]
    ) -> Summary:
        self._check_size(summary.text, f"the summary of session {session_id!r}")
        if not config.redact:
            return summary
        text, found = redact(summary.text, config)
        facts = [_redact_into(f, config, found) for f in summary.facts]
        keywords = [_redact_into(k, config, found) for k in summary.keywords]
        model = summary.model
        if model is not None:
            model = _redact_into(model, config, found, label=True)
        if not found:
            return summary
        counts.update(found)
        return summary.model_copy(
            update={"text": text, "facts": facts, "keywords": keywords, "model": model}
        )

    # --- what the store holds -----------------------------------------------------------

    def check(self, *, commit: str | None = None) -> list[Diagnostic]:
        """Validate every session file and archive part; returns all ``path:line`` problems
        (empty = clean). Checks the committed files and any uncommitted hand edits, and
        reports saved turns that a commit made outside gitmem dropped among the last 200
        commits (see :mod:`gitmem.guard.drops`).
        """
        problems: list[Diagnostic] = []
        paths: dict[str, str | None] = {}  # path: the session id its name encodes
        # the archive parts too: load_memory(include_archive=True) reads them
        for folder, id_of in (
            (session_dir(self.namespace), _session_or_part),
            (archive_dir(self.namespace), id_from_archive_path),
        ):
            names = set(session_files(self._repo, folder, commit))
            top = self._repo.root / folder
            if commit is None and top.is_dir():  # files not committed yet, one level down too
                names |= {
                    p.relative_to(self._repo.root).as_posix()
                    for p in [*top.glob("*.md"), *top.glob("??/*.md")]
                }
            paths |= {name: id_of(name, self.namespace) for name in names}
        for path, expected in sorted(paths.items()):
            if expected is None:
                right = misplaced(path)
                problems.append(
                    Diagnostic(
                        path,
                        1,
                        "file name is not an encoded session id"
                        if right is None
                        else f"belongs in {right}",
                    )
                )
                continue
            try:
                data = self._repo.working_blob(path) if commit is None else None
            except RepositoryError as exc:  # e.g. a symlink: report it, read nothing through it
                problems.append(Diagnostic(path, 1, str(exc)))
                continue
            except ParseError as exc:  # a folder or FIFO under a session's name
                problems.extend(exc.diagnostics)
                continue
            raw = data[0] if data is not None else self._repo.read(path, commit)
            if raw is None:
                continue
            try:
                session = parse_bytes(raw, path)
            except ParseError as exc:
                problems.extend(exc.diagnostics)
                continue
            if session.id != expected:
                problems.append(
                    Diagnostic(
                        path,
                        1,
                        f"session id {session.id!r} does not match the file name "
                        f"(expected {expected!r})",
                    )
                )
        problems.extend(self._check_memory_file(commit))
        problems.extend(
            Diagnostic(path, 1, "not a session, archive part or memory file of any namespace")
            for path in self._namespace_files(commit)
            if path not in paths and not in_namespace_layout(path)
        )
        problems.extend(history_drops(self._repo, commit))
        return problems

    def _namespace_files(self, commit: str | None) -> list[str]:
        """Every file under ``namespaces/``: committed, and (``commit`` None) in the tree."""
        rev = commit or self._repo.head()
        found: set[str] = set()
        if rev is not None:
            listed = self._repo.git("ls-tree", "-r", "-z", "--name-only", rev, "--", NAMESPACES_DIR)
            found |= {name for name in listed.split("\0") if name}
        top = self._repo.root / NAMESPACES_DIR
        if commit is None and top.is_dir():
            found |= {
                p.relative_to(self._repo.root).as_posix() for p in top.rglob("*") if p.is_file()
            }
        return sorted(found)

    def _check_memory_file(self, commit: str | None) -> list[Diagnostic]:
        """The curated memory file's problems (committed, or the hand edit in the tree)."""
        path = memory_path(self.namespace)
        try:
            found = self._repo.working_blob(path) if commit is None else None
        except (RepositoryError, ParseError) as exc:
            return (
                exc.diagnostics if isinstance(exc, ParseError) else [Diagnostic(path, 1, str(exc))]
            )
        raw = found[0] if found is not None else self._repo.read(path, commit)
        if raw is None:
            return []
        try:
            parse_facts(raw, path)
        except ParseError as exc:
            return exc.diagnostics
        return []

    # --- secrets already in history -------------------------------------------------------

    def scan_history(self, *, config: SecretConfig | None = None) -> list[SecretFinding]:
        """Secrets anywhere in the store's history: every commit of every branch (review
        and remote-tracking branches too) and every tag, in the lines each commit added
        (binary files too), in file names, in commit and tag messages and in author,
        committer and tagger names. Oldest first; a secret is shown masked, never in full.

        To purge one, see ``docs/reliability.md`` (section "Secrets already in history").
        """
        return scan_repository(self._repo, config or self.secret_config)


def _session_or_part(path: str, namespace: str | None) -> str | None:
    """The session a file in the sessions folder belongs to: its own file or a part."""
    return id_from_path(path, namespace) or id_from_part_path(path, namespace)
