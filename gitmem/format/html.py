"""Markdown from memory (turns, summaries, facts) as safe HTML, for the web dashboard.

Memory content is untrusted: an agent stores whatever a user or a web page said. So raw
HTML is escaped (it shows as text, never runs), link targets with a script scheme become
``#harmful-link`` (mistune's check), every link gets ``rel="nofollow noopener noreferrer"``
and images are shown as links, not loaded (a remote image would tell a third party when the
page was read). ``[[session-id]]`` becomes a link to that session. Lives in ``format/``
because mistune may only be imported here.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from html import escape
from typing import Any

import mistune
from mistune.core import InlineState
from mistune.inline_parser import InlineParser

from gitmem.text import WIKI_TARGET

# the same rule as gitmem.text.wiki_links (mistune skips code spans and blocks, as it does)
_WIKI_PATTERN = rf"\[\[(?P<wiki_target>{WIKI_TARGET})\]\]"
_REL = ' rel="nofollow noopener noreferrer"'
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")
# schemes a link may keep; anything else (javascript:, data:, vbscript:, file:) is dropped
_SAFE_SCHEMES = ("http:", "https:", "mailto:")

LinkTarget = Callable[[str], str]


class _SafeRenderer(mistune.HTMLRenderer):
    """mistune's HTML renderer with escaped raw HTML, safe links and no loaded images."""

    def __init__(self, wiki_href: LinkTarget) -> None:
        super().__init__(escape=True)
        self._wiki_href = wiki_href

    def safe_url(self, url: str) -> str:
        if _SCHEME.match(url) and not url.lower().startswith(_SAFE_SCHEMES):
            return "#harmful-link"
        return super().safe_url(url)

    def link(self, text: str, url: str, title: str | None = None) -> str:
        shown = super().link(text, url, title)
        return shown.replace("<a ", f"<a{_REL} ", 1)

    def image(self, text: str, url: str, title: str | None = None) -> str:
        href = self.safe_url(url)
        label = text or "image"
        return f'<a class="image-link" href="{href}"{_REL}>[image: {label}]</a>'

    def wiki_link(self, text: str, target: str) -> str:
        return (
            f'<a class="wikilink" href="{escape(self._wiki_href(target))}">[[{escape(target)}]]</a>'
        )


def _parse_wiki(_inline: InlineParser, m: re.Match[str], state: InlineState) -> int:
    target = m.group("wiki_target").strip()
    state.append_token({"type": "wiki_link", "raw": target, "attrs": {"target": target}})
    return m.end()


def _wiki_plugin(md: mistune.Markdown) -> None:
    md.inline.register("wiki_link", _WIKI_PATTERN, _parse_wiki, before="link")


class MarkdownHtml:
    """Renders memory Markdown to safe HTML; ``wiki_href(session_id)`` gives a wiki link's URL.

    One instance is reused for every call (mistune's parser is not cheap to build).
    """

    def __init__(self, wiki_href: LinkTarget) -> None:
        self._md = mistune.Markdown(
            renderer=_SafeRenderer(wiki_href),
            inline=InlineParser(hard_wrap=True),  # a chat message's line breaks are meant
            plugins=[_wiki_plugin, *_named_plugins("strikethrough", "table", "url")],
        )

    def __call__(self, text: str) -> str:
        rendered: Any = self._md(text)
        return str(rendered)


def _named_plugins(*names: str) -> list[Any]:
    return [mistune.plugins.import_plugin(name) for name in names]
