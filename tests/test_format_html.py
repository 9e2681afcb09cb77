"""Memory Markdown rendered for the browser: whatever a turn holds, no markup from it runs.

Checked on fixed hostile inputs and on generated ones (hypothesis): the output is parsed
with the standard library's HTML parser and every element, attribute and link target must
be one the renderer itself makes.
"""

from __future__ import annotations

from html.parser import HTMLParser

from hypothesis import given, settings
from hypothesis import strategies as st

from gitmem.format.html import MarkdownHtml

ALLOWED_TAGS = {
    "p",
    "br",
    "a",
    "strong",
    "em",
    "code",
    "pre",
    "del",
    "ul",
    "ol",
    "li",
    "blockquote",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "hr",
    "table",
    "thead",
    "tbody",
    "tr",
    "th",
    "td",
}
ALLOWED_ATTRS = {"href", "rel", "class", "title", "start", "style"}
SAFE_HREF = ("http://", "https://", "mailto:", "/sessions/", "#")

render = MarkdownHtml(lambda target: "/sessions/" + target)


class _Elements(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.found: list[tuple[str, list[tuple[str, str | None]]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found.append((tag, attrs))


def elements(html: str) -> list[tuple[str, list[tuple[str, str | None]]]]:
    parser = _Elements()
    parser.feed(html)
    return parser.found


def assert_inert(html: str) -> None:
    for tag, attrs in elements(html):
        assert tag in ALLOWED_TAGS, f"<{tag}> in {html!r}"
        for name, value in attrs:
            assert name in ALLOWED_ATTRS, f"{name}= on <{tag}> in {html!r}"
            if name == "href":
                assert (value or "").startswith(SAFE_HREF), f"href {value!r} in {html!r}"
            if name == "style":  # mistune aligns table cells; nothing else may style
                assert tag in ("th", "td") and (value or "").startswith("text-align:"), html


def test_script_and_event_handlers_show_as_text() -> None:
    html = render(
        '<script>alert(1)</script> <img src=x onerror="alert(2)">\n\n'
        "<div onclick=steal()>raw block</div>"
    )
    assert_inert(html)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "&lt;img src=x onerror=" in html
    assert "&lt;div onclick=steal()&gt;" in html


def test_script_links_are_neutralised_and_others_kept() -> None:
    html = render(
        "[a](javascript:alert(1)) [b](JavaScript:x) [c](data:text/html,x) "
        "[d](vbscript:x) [e](https://example.org/x) [f](mailto:a@example.org)"
    )
    assert_inert(html)
    assert html.count('href="#harmful-link"') == 4
    assert 'href="https://example.org/x"' in html and 'href="mailto:a@example.org"' in html
    assert all(
        'rel="nofollow noopener noreferrer"' in attrs_text for attrs_text in html.split("<a ")[1:]
    )


def test_images_are_links_never_loaded() -> None:
    html = render("![tracker](https://evil.example/pixel.png)")
    assert "<img" not in html
    assert 'href="https://evil.example/pixel.png"' in html and "[image: tracker]" in html


def test_wiki_links_point_at_sessions_and_are_escaped() -> None:
    html = render('see [[travel-plans]] and [[a"b<c]]')
    assert '<a class="wikilink" href="/sessions/travel-plans">[[travel-plans]]</a>' in html
    assert 'href="/sessions/a&quot;b&lt;c"' in html
    assert_inert(html)


def test_line_breaks_of_a_chat_message_are_kept() -> None:
    assert "<br />" in render("first line\nsecond line")


HOSTILE_PARTS = st.sampled_from(
    [
        "<script>",
        "</script>",
        "<img src=x onerror=alert(1)>",
        "<a href='javascript:x'>",
        "[x](javascript:alert(1))",
        "![i](data:image/svg+xml,<svg onload=x>)",
        "<svg onload=x>",
        "<iframe src=//evil>",
        '" onmouseover="x',
        "[[",
        "]]",
        "`",
        "```",
        "\n",
        "\n\n",
        "*",
        "|",
        "<style>",
        "&lt;",
        "&#60;script&#62;",
        "<!--",
        "-->",
        "<",
        ">",
        "'",
        '"',
        "=",
        " ",
        "javascript:",
        "[y](  javascript:x )",
        "<b>",
        "> quote",
        "- item",
        "1. item",
        "#",
    ]
)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(HOSTILE_PARTS, st.text(max_size=8)), max_size=30))
def test_no_generated_input_makes_active_markup(parts: list[str]) -> None:
    assert_inert(render("".join(parts)))
