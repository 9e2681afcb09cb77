"""Guards on what ``MemoryManager`` commits: secrets redacted, sizes bounded; history scanned.

``MemoryManager`` inherits :class:`SecurityMixin`. Every write builds the new ``Session``
and hands it to :meth:`SecurityMixin._guard` before it is rendered: new message content,
summary text and metadata values are scanned (``gitmem.secrets``), each secret is replaced
by ``[REDACTED:<kind>]``, and the commit gets a ``Gitmem-Redacted: <kind>=<count>, ...``
trailer. Content over :data:`MAX_MESSAGE_BYTES` is refused with a ``ValidationError``.
:meth:`SecurityMixin.scan_history` reports secrets that reached history before (or around)
the guard: every commit of every branch, by commit, path and line, never printing a secret.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from gitmem import markdown
from gitmem.errors import ValidationError
from gitmem.models import Interaction, Message, Session, Summary
from gitmem.secrets import SecretConfig, find_secrets, redact

if TYPE_CHECKING:
    from gitmem.repository import Repository, Transaction

P = ParamSpec("P")
T = TypeVar("T")

# The largest message (or summary text) a save accepts, in UTF-8 bytes. A save holds a few
# copies of the file while rendering and packing it: a 10 MB message peaks near 150 MB.
MAX_MESSAGE_BYTES = 16 * 1024 * 1024
MESSAGE_PATH = "(commit message)"


@dataclass(frozen=True)
class SecretFinding:
    """A secret found in history: where it was added, what kind, and a masked form.

    ``at_head`` says whether the current version of the file still holds it (None for a
    commit message).
    """

    commit: str
    path: str
    line: int
    kind: str
    masked: str
    at_head: bool | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def __str__(self) -> str:
        where = "commit message" if self.path == MESSAGE_PATH else f"{self.path}:{self.line}"
        head = "" if self.at_head is None else (" (still at HEAD)" if self.at_head else "")
        return f"{self.commit[:12]} {where}: {self.kind} {self.masked}{head}"


class SecurityMixin:
    """Secret redaction, size limits and the history scan for ``MemoryManager``."""

    if TYPE_CHECKING:
        _repo: Repository
        _local: threading.local

    _secret_config: SecretConfig | None = None
    max_message_bytes: int = MAX_MESSAGE_BYTES

    # --- configuration --------------------------------------------------------------------

    @property
    def secret_config(self) -> SecretConfig:
        """What counts as a secret here: set it, or it is read from git config once
        (``gitmem.secrets.redact``, ``gitmem.secrets.pattern``, ``gitmem.secrets.allow``)."""
        if self._secret_config is None:
            pairs = self._repo.config_section("gitmem.secrets")
            try:
                self._secret_config = SecretConfig.from_git(pairs)
            except ValueError as exc:
                raise ValidationError(f"git config gitmem.secrets: {exc}; fix it with "
                                      "`git config --edit`") from None
        return self._secret_config

    @secret_config.setter
    def secret_config(self, value: SecretConfig) -> None:
        self._secret_config = value

    # --- the guard on every write ---------------------------------------------------------

    def _guard(self, txn: Transaction, current: Session | None, updated: Session | None
               ) -> Session | None:
        """``updated`` with the content it adds over ``current`` checked for size and with
        its secrets redacted (counted on ``txn`` for the commit's trailer)."""
        if updated is None:
            return None
        counts: Counter[str] = Counter()
        config = self.secret_config
        known = {id(turn) for turn in current.interactions} if current else set()
        turns: list[Interaction] = []
        for turn in updated.interactions:
            if id(turn) not in known:
                turn = self._guard_turn(updated.id, turn, config, counts)
            turns.append(turn)
        changes: dict[str, Any] = {}
        if any(a is not b for a, b in zip(turns, updated.interactions, strict=True)):
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

    def _guard_summary(self, txn: Transaction, session_id: str, summary: Summary) -> Summary:
        """A new summary, size-checked and redacted (for the summary commits)."""
        counts: Counter[str] = Counter()
        guarded = self._guard_summary_with(session_id, summary, self.secret_config, counts)
        for kind, n in counts.items():
            txn.redacted[kind] = txn.redacted.get(kind, 0) + n
        return guarded

    def _guard_hand_edit(self, txn: Transaction, session: Session, raw: bytes
                         ) -> tuple[Session, bytes]:
        """A person's uncommitted edit, redacted before it is recorded; the file is then
        written as rendered (only if it held a secret: otherwise it is kept byte for byte)."""
        guarded = self._guard(txn, None, session)
        assert guarded is not None
        if guarded is session:
            return session, raw
        return guarded, markdown.render(guarded).encode("utf-8")

    def _safe_text(self, text: str) -> str:
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
                "(gitmem.security.MAX_MESSAGE_BYTES; set mm.max_message_bytes to change it); "
                "store large documents as files and save a reference to them"
            )

    def _guard_turn(self, session_id: str, turn: Interaction, config: SecretConfig,
                    counts: Counter[str]) -> Interaction:
        messages: list[Message] = []
        for at, message in enumerate(turn.messages):
            self._check_size(message.content,
                             f"session {session_id!r}, interaction {turn.id!r}, message {at}")
            if config.redact:
                text, found = redact(message.content, config)
                if found:
                    counts.update(found)
                    message = message.model_copy(update={"content": text})
            messages.append(message)
        if all(a is b for a, b in zip(messages, turn.messages, strict=True)):
            return turn
        return turn.model_copy(update={"messages": messages})

    def _guard_summary_with(self, session_id: str, summary: Summary, config: SecretConfig,
                            counts: Counter[str]) -> Summary:
        self._check_size(summary.text, f"the summary of session {session_id!r}")
        if not config.redact:
            return summary
        text, found = redact(summary.text, config)
        facts = [_redact_into(f, config, found) for f in summary.facts]
        keywords = [_redact_into(k, config, found) for k in summary.keywords]
        if not found:
            return summary
        counts.update(found)
        return summary.model_copy(update={"text": text, "facts": facts, "keywords": keywords})

    # --- secrets already in history -------------------------------------------------------

    def scan_history(self, *, config: SecretConfig | None = None) -> list[SecretFinding]:
        """Secrets anywhere in the store's history: every commit of every branch (review
        and remote-tracking branches too), in the lines each commit added and in commit
        messages. Oldest first; a secret is shown masked, never in full.

        To purge one, see the README (section "Reliability and security").
        """
        config = config or self.secret_config
        findings: list[SecretFinding] = []
        head_text: dict[str, str] = {}
        for commit, path, first_line, block in self._added_blocks():
            for found in find_secrets(block, config):
                secret = block[found.start:found.end]
                if path not in head_text:
                    data = self._repo.read(path)
                    head_text[path] = "" if data is None else data.decode("utf-8", "replace")
                findings.append(SecretFinding(commit, path, first_line + found.line - 1,
                                              found.kind, found.masked,
                                              secret in head_text[path]))
        _, out = self._repo.run_git("log", "--all", "--reverse", "-z", "--format=%H%n%B")
        for entry in out.decode("utf-8", "replace").split("\0"):
            commit, _, message = entry.partition("\n")
            for found in find_secrets(message, config):
                findings.append(SecretFinding(commit.strip(), MESSAGE_PATH, found.line,
                                              found.kind, found.masked, None))
        return list(dict.fromkeys(findings))

    def _added_blocks(self) -> Iterator[tuple[str, str, int, str]]:
        """(commit, path, first line, text) of every run of lines a commit added."""
        _, out = self._repo.run_git(
            "log", "--all", "--reverse", "-p", "--format=%x00%H", "--unified=0",
            "--no-color", "--no-ext-diff", "--no-textconv", "--no-renames",
            "--diff-merges=first-parent", "--src-prefix=a/", "--dst-prefix=b/",
        )
        commit = path = ""
        in_hunk = False
        start = 0
        block: list[str] = []

        def flush() -> Iterator[tuple[str, str, int, str]]:
            if block and path:
                yield commit, path, start, "\n".join(block)
            block.clear()

        for raw in out.split(b"\n"):
            line = raw.decode("utf-8", "replace")
            if line.startswith("\0"):
                yield from flush()
                commit, path, in_hunk = line[1:].strip(), "", False
            elif line.startswith("diff --git "):
                yield from flush()
                path, in_hunk = "", False
            elif not in_hunk and line.startswith("+++ "):
                path = _diff_path(line[4:])
            elif line.startswith("@@ "):
                yield from flush()
                in_hunk = True
                start = _hunk_start(line)
            elif in_hunk and line.startswith("+"):
                block.append(line[1:])
            elif in_hunk and not line.startswith("\\"):
                yield from flush()
                start += 0 if line.startswith("-") else 1
        yield from flush()


def _redact_into(text: str, config: SecretConfig, counts: Counter[str]) -> str:
    clean, found = redact(text, config)
    counts.update(found)
    return clean


def _redact_metadata(updated: Session, current: Session | None, config: SecretConfig,
                     counts: Counter[str]) -> dict[str, Any]:
    """Redacted metadata values that are new or changed; project and links are one-line
    labels, so their marker has no brackets."""
    changes: dict[str, Any] = {}
    old_extra = current.extra if current else {}
    extra = dict(updated.extra)
    for key, value in updated.extra.items():
        if old_extra.get(key) != value:
            extra[key] = _redact_into(value, config, counts)
    if extra != updated.extra:
        changes["extra"] = extra
    if updated.project and updated.project != (current.project if current else None):
        project, found = redact(updated.project, config, label=True)
        if found:
            counts.update(found)
            changes["project"] = project
    old_links = set(current.links) if current else set()
    links = []
    for link in updated.links:
        if link not in old_links:
            link, found = redact(link, config, label=True)
            counts.update(found)
        links.append(link)
    if links != updated.links:
        changes["links"] = links
    return changes


def _diff_path(text: str) -> str:
    if text == "/dev/null":
        return ""
    if text.startswith('"'):  # C-quoted: unusual characters in the name
        text = text[1:-1].encode("latin-1", "backslashreplace").decode("unicode_escape")
        text = text.encode("latin-1", "replace").decode("utf-8", "replace")
    return text[2:] if text.startswith("b/") else text


def _hunk_start(header: str) -> int:
    # @@ -a,b +c,d @@: the added lines start at line c of the new file
    new = header.split(" ")[2]
    return int(new[1:].split(",")[0] or 1)


__all__ = ["MAX_MESSAGE_BYTES", "SecretFinding", "SecurityMixin"]
