"""Finding and redacting secrets (API keys, tokens, private keys, passwords in URLs) in text.

Memory is pushed to remotes, so a secret that reaches a commit is a leak. gitmem replaces
each secret in new content with a marker such as ``[REDACTED:openai-key]`` before the commit
is written, and records the kinds and counts (never the secret) in a ``Gitmem-Redacted``
trailer. The same scanner reports secrets already in history (``gitmem scan``).

This module scans content, not Markdown structure, so regular expressions are the right
tool here; it imports nothing but the standard library.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import NamedTuple

from gitmem.store.config import parse_bool

_KIND = re.compile(r"[a-z0-9][a-z0-9-]{0,39}")

_MARKER = re.compile(r"\[?REDACTED:[a-z0-9-]{1,40}\]?")


@dataclass(frozen=True)
class SecretPattern:
    """One kind of secret: a short name for markers and reports, and a regular expression.

    If the expression has a group named ``secret`` only that group is replaced (so the
    ``https://user:`` before a password stays readable); otherwise the whole match is.

    Attributes:
        kind: 1-40 lowercase letters, digits and ``-`` (it appears in markers and trailers).
        regex: the expression.
        ignore_case: match regardless of case.
        lowered: match against the lowercased text, so write the expression's letters in
            lowercase; the same as ``ignore_case`` but much faster.
        hints: lowercase strings of which every match contains one: the expression only
            runs on a text that has one (looking for them costs far less than running it).
    """

    kind: str
    regex: str
    ignore_case: bool = False
    lowered: bool = False
    hints: tuple[str, ...] = ()


# A word boundary checked by a look-behind after the literal start, rather than \b before
# it, lets the regex engine find the literal quickly: ten times faster on ordinary text.
DEFAULT_PATTERNS: tuple[SecretPattern, ...] = (
    SecretPattern(
        "private-key",
        r"-----BEGIN[A-Z0-9 ]{0,30} PRIVATE KEY(?: BLOCK)?-----"
        r"(?:[\s\S]{0,20000}?-----END[A-Z0-9 ]{0,30} PRIVATE KEY(?: BLOCK)?-----"
        r"|[A-Za-z0-9+/=\s>:-]*)",
        hints=("private key",),
    ),
    SecretPattern(
        "anthropic-key", r"sk-ant-(?<![A-Za-z0-9_]sk-ant-)[A-Za-z0-9_-]{20,}", hints=("sk-ant-",)
    ),
    SecretPattern(
        "openai-key",
        r"sk-(?<![A-Za-z0-9_]sk-)(?:(?:proj|svcacct|admin)-[A-Za-z0-9_-]{20,}"
        r"|(?=[A-Za-z]*[0-9])[A-Za-z0-9]{32,}(?![A-Za-z0-9_-]))",
        hints=("sk-",),
    ),
    SecretPattern(
        "aws-access-key",
        r"(?:AKIA|ASIA|ABIA|ACCA)(?<![A-Za-z0-9_][A-Z]{4})[0-9A-Z]{16}(?![A-Za-z0-9_])",
        hints=("akia", "asia", "abia", "acca"),
    ),
    SecretPattern(
        "aws-secret-key",
        r"aws_?secret_?access_?key[\"']?\s*[:=]\s*[\"']?"
        r"(?P<secret>[a-z0-9/+=]{40})(?![a-z0-9/+=])",
        lowered=True,
        hints=("secret",),
    ),
    SecretPattern(
        "github-token",
        r"gh[pousr]_(?<![A-Za-z0-9_]gh[pousr]_)[A-Za-z0-9]{36,255}(?![A-Za-z0-9_])",
        hints=("gh",),
    ),
    SecretPattern(
        "github-pat",
        r"github_pat_(?<![A-Za-z0-9_]github_pat_)[A-Za-z0-9_]{50,255}",
        hints=("github_pat_",),
    ),
    SecretPattern(
        "slack-token",
        r"xox[abeoprs]-(?<![A-Za-z0-9_]xox[abeoprs]-)[A-Za-z0-9-]{10,250}",
        hints=("xox",),
    ),
    SecretPattern(
        "slack-webhook",
        r"https://hooks\.slack\.com/services/[A-Za-z0-9_/]{20,}",
        hints=("hooks.slack.com",),
    ),
    SecretPattern(
        "google-api-key",
        r"AIza(?<![A-Za-z0-9_]AIza)[0-9A-Za-z_-]{35}(?![0-9A-Za-z_-])",
        hints=("aiza",),
    ),
    SecretPattern(
        "stripe-key", r"[rs]k_live_(?<![A-Za-z0-9_][rs]k_live_)[0-9A-Za-z]{20,}", hints=("_live_",)
    ),
    SecretPattern(
        "jwt",
        r"eyJ(?<![A-Za-z0-9_]eyJ)[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{16,}",
        hints=("eyj",),
    ),
    SecretPattern(
        "bearer-token",
        r"(?:bearer(?<![a-z0-9_]bearer)|authorization:\s*token)\s+"
        r"(?P<secret>(?=[a-z._~+/-]*[0-9])[a-z0-9._~+/-]{16,}=*)",
        lowered=True,
        hints=("bearer", "authorization"),
    ),
    SecretPattern(
        # "Basic <base64 of user:pass>" anywhere (a server may echo the header in an error);
        # a digit, + or /, or three capitals tell base64 from a word after "basic"
        "basic-auth",
        r"(?i:basic)(?<![A-Za-z0-9_]basic)(?<![A-Za-z0-9_]Basic)(?<![A-Za-z0-9_]BASIC)\s+"
        r"(?P<secret>(?=[A-Za-z]*[0-9+/]|(?:[a-z0-9+/]*[A-Z]){3})[A-Za-z0-9+/]{8,}={0,2})"
        r"(?![A-Za-z0-9+/=])",
        hints=("basic",),
    ),
    SecretPattern(
        "url-password",
        r"://(?<=[a-z0-9+.-]://)[^\s/?#@:\"'<>]{1,100}:(?P<secret>[^\s/?#@\"'<>]{1,200})@",
        lowered=True,
        hints=("://",),
    ),
    SecretPattern(
        "url-token",
        r"[?&#;](?:access_token|refresh_token|id_token|auth_token|token|api_key|apikey|key"
        r"|client_secret|secret|password|passwd|pwd|sig|signature|x-amz-signature"
        r"|x-amz-security-token)=(?P<secret>[^\s&#\"'<>]{8,})",
        lowered=True,
        hints=("=",),
    ),
    SecretPattern(
        "assigned-secret",
        r"(?:pass(?:word|wd)|secret|api_?key|access_?key|auth_?token|private_?key)"
        r"[\"']?\s*[:=]\s*[\"']?"
        r"(?P<secret>(?=[^\s\"']*[0-9])(?=[^\s\"']*[a-z])[^\s\"'`,;]{12,200})",
        lowered=True,
        hints=("pass", "secret", "key", "token"),
    ),
)


@dataclass(frozen=True)
class Finding:
    """One secret found in a text: its kind, where it is, and a masked form to show."""

    kind: str
    start: int
    end: int
    line: int
    masked: str


def mask(secret: str) -> str:
    """A form of ``secret`` safe to print: the first 4 characters of a long one (they name
    the kind, e.g. ``sk-p``), never the rest, and its length."""
    shown = secret[:4] if len(secret) >= 16 else ""
    return f"{shown}…({len(secret)} chars)"


def marker(kind: str, *, label: bool = False) -> str:
    """The text that replaces a secret: ``[REDACTED:kind]`` (``REDACTED:kind`` inside a
    one-line label, where brackets are not allowed)."""
    return f"REDACTED:{kind}" if label else f"[REDACTED:{kind}]"


@dataclass(frozen=True)
class SecretConfig:
    """Which secrets to look for, and whether to redact them on save.

    Attributes:
        redact: replace secrets in new content before it is committed (default on).
        patterns: the kinds to look for; ``DEFAULT_PATTERNS`` unless replaced.
        extra: more patterns, looked for after ``patterns``.
        allow: regular expressions; a secret that matches one in full is left alone
            (e.g. a documented example key).
    """

    redact: bool = True
    patterns: tuple[SecretPattern, ...] = DEFAULT_PATTERNS
    extra: tuple[SecretPattern, ...] = ()
    allow: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for pattern in self.all_patterns:
            _check(pattern)
        for regex in self.allow:
            try:
                re.compile(regex)
            except re.error as exc:
                raise ValueError(f"secret allow-list entry {regex!r}: {exc}") from None

    @property
    def all_patterns(self) -> tuple[SecretPattern, ...]:
        return self.patterns + self.extra

    @cached_property
    def _compiled(self) -> tuple[re.Pattern[str], ...]:
        return tuple(
            re.compile(p.regex, re.IGNORECASE if p.ignore_case else 0) for p in self.all_patterns
        )

    @cached_property
    def _unlowered(self) -> tuple[re.Pattern[str], ...]:
        # for a text whose lowercase form has another length (a few non-ASCII letters)
        return tuple(
            re.compile(p.regex, re.IGNORECASE if p.ignore_case or p.lowered else 0)
            for p in self.all_patterns
        )

    @cached_property
    def _hinted(self) -> tuple[tuple[tuple[str, tuple[int, ...]], ...], tuple[int, ...]]:
        """(hint, the patterns it wakes) for each distinct hint, and the patterns that
        have no hint (they always run)."""
        wakes: dict[str, list[int]] = {}
        for at, pattern in enumerate(self.all_patterns):
            for hint in pattern.hints:
                wakes.setdefault(hint, []).append(at)
        always = tuple(at for at, p in enumerate(self.all_patterns) if not p.hints)
        return tuple((h, tuple(ats)) for h, ats in wakes.items()), always

    @cached_property
    def _labels(self) -> dict[str, tuple[str, Counter[str]]]:
        return {}  # redacted_label's memo: the same few speaker names come on every message

    @cached_property
    def _allowed(self) -> re.Pattern[str] | None:
        return re.compile("|".join(f"(?:{a})" for a in self.allow)) if self.allow else None

    def with_patterns(self, *patterns: SecretPattern) -> SecretConfig:
        """This config with more patterns added (kept after the ones it has)."""
        return SecretConfig(self.redact, self.patterns, self.extra + patterns, self.allow)

    @classmethod
    def from_git(cls, items: Iterable[tuple[str, str]]) -> SecretConfig:
        """Settings from ``gitmem.secrets.*`` git config entries (key, value), e.g.
        ``redact = false``, ``pattern = kind=regex`` (repeatable, case-sensitive; prefix
        the regex with ``(?i)`` for case-insensitive), ``allow = regex`` (repeatable)."""
        redact, extra, allow = True, [], []
        for raw_key, value in items:
            key = raw_key.rsplit(".", 1)[-1].lower()
            if key == "redact":
                redact = parse_bool("gitmem.secrets.redact", value)  # as git reads booleans
            elif key == "pattern":
                kind, sep, regex = value.partition("=")
                if not sep:
                    raise ValueError(f"gitmem.secrets.pattern {value!r} is not kind=regex")
                ignore_case = regex.startswith("(?i)")
                extra.append(
                    SecretPattern(kind.strip(), regex[4:] if ignore_case else regex, ignore_case)
                )
            elif key == "allow":
                allow.append(value)
            else:
                raise ValueError(f"unknown setting gitmem.secrets.{key}")
        return cls(redact=redact, extra=tuple(extra), allow=tuple(allow))


def _check(pattern: SecretPattern) -> None:
    if not _KIND.fullmatch(pattern.kind):
        raise ValueError(
            f"secret kind {pattern.kind!r} must be 1-40 lowercase letters, digits and '-'"
        )
    try:
        compiled = re.compile(pattern.regex)
    except re.error as exc:
        raise ValueError(f"secret pattern {pattern.kind!r}: {exc}") from None
    if set(compiled.groupindex) - {"secret"}:
        raise ValueError(
            f"secret pattern {pattern.kind!r}: the only named group allowed is 'secret'"
        )
    if compiled.match(""):
        raise ValueError(f"secret pattern {pattern.kind!r} matches empty text")


DEFAULT_CONFIG = SecretConfig()


def find_secrets(text: str, config: SecretConfig = DEFAULT_CONFIG) -> Iterator[Finding]:
    """Every secret in ``text``, in order, none overlapping (where two kinds match at the
    same place, the one listed first wins)."""
    lowered = text.lower()
    hinted, always = config._hinted
    # each distinct hint is looked for once; a pattern runs when one of its hints is there
    chosen = [at for hint, ats in hinted if hint in lowered for at in ats]
    if not chosen and not always:
        return  # most names, ids and sentences: nothing can match
    compiled = config._compiled
    if len(lowered) != len(text):  # a few non-ASCII letters change length when lowered
        compiled, lowered = config._unlowered, text
    patterns = config.all_patterns
    live = [
        _Live(at, patterns[at].kind, compiled[at], lowered if patterns[at].lowered else text)
        for at in sorted({*chosen, *always})
    ]
    found = sorted(
        (m.start(), item.at, m, item) for item in live for m in item.regex.finditer(item.subject)
    )
    allowed = config._allowed
    line, counted, taken = 1, 0, 0
    for start, _at, match, item in found:
        if start < taken:
            continue  # inside a secret found already
        taken = end = match.end()
        kind = item.kind
        if "secret" in item.regex.groupindex:
            start, end = match.span("secret")
            kind = _specific_kind(start, end, live) or kind
        secret = text[start:end]
        if (
            not secret
            or _MARKER.fullmatch(secret)
            or (allowed is not None and allowed.fullmatch(secret))
        ):
            continue  # nothing, a marker put there before, or allowed
        line += text.count("\n", counted, start)
        counted = start
        yield Finding(kind, start, end, line, mask(secret))


class _Live(NamedTuple):
    """A pattern that runs on this text: its place, kind, expression and the text it reads
    (a tuple: made for every text scanned, and ordered by place)."""

    at: int
    kind: str
    regex: re.Pattern[str]
    subject: str


def _specific_kind(start: int, end: int, live: list[_Live]) -> str | None:
    """The kind of a key that fills a context match's secret exactly: ``API_KEY=sk-...``
    is an openai-key, not just an assigned secret."""
    for item in live:
        if "secret" not in item.regex.groupindex and item.regex.fullmatch(item.subject, start, end):
            return item.kind
    return None


def redact(
    text: str, config: SecretConfig = DEFAULT_CONFIG, *, label: bool = False
) -> tuple[str, Counter[str]]:
    """``text`` with each secret replaced by its marker, and how many of each kind."""
    counts: Counter[str] = Counter()
    if not text:
        return text, counts
    pieces: list[str] = []
    last = 0
    for found in find_secrets(text, config):
        pieces += [text[last : found.start], marker(found.kind, label=label)]
        last = found.end
        counts[found.kind] += 1
    if not counts:
        return text, counts
    pieces.append(text[last:])
    return "".join(pieces), counts


def trailer_value(counts: Mapping[str, int]) -> str:
    """``openai-key=1, aws-access-key=2``: what the ``Gitmem-Redacted`` trailer says."""
    return ", ".join(f"{kind}={n}" for kind, n in sorted(counts.items()))


# speaker names remembered per config; past this many, the memo starts over
LABEL_MEMO = 4096


def redacted_label(label: str, config: SecretConfig = DEFAULT_CONFIG) -> tuple[str, Counter[str]]:
    """:func:`redact` of a one-line label (a speaker name), remembered: the same few names
    come back on every message of an import. Do not change the Counter it returns."""
    memo = config._labels
    found = memo.get(label)
    if found is None:
        if len(memo) >= LABEL_MEMO:
            memo.clear()
        found = memo[label] = redact(label, config, label=True)
    return found
