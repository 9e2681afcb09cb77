"""The dashboard in a real browser: ``gitmem web`` as a subprocess, driven by Chromium.

One store for the module (``gitmem demo``'s, plus a re-summarized session, a summary held
for review, a link between sessions and the hostile-HTML session of tests/web_helpers.py),
one ``gitmem web --port 0`` server on it, one headless Chromium (Debian's, through
Playwright's ``executable_path``: Playwright's own browser download does not work on these
machines; ``.ci/run`` installs the package). The tests open every page and check what a
person sees, search through the form, open a diff from the history, revert a summary through
the UI and check the commit with the real ``git``, render hostile content as text, refuse a
POST without the CSRF token, and log in to a server started with a token.

Screenshots of every page go to ``$GITMEM_SCREENSHOTS`` (a temp folder when unset; the
folder is printed at the end). ``GITMEM_DOCS_SCREENSHOT=docs/web-sessions.png`` also saves
the sessions page at a fixed size there, for the README; ``GITMEM_DOCS_SCREENSHOTS=
docs/screenshots`` copies the sessions, search, commit and fact pages at 1280×900 and at a
phone's 390×844 there.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from playwright.sync_api import Browser, BrowserContext, ConsoleMessage, Page, sync_playwright

from gitmem import MemoryManager
from gitmem.cli.demo import run_demo
from gitmem.errors import SummaryHeldForReview
from gitmem.summary.triggers import SummaryConfig
from tests.conftest import IDENTITY, git
from tests.test_summary_commits import Fixed, _with_previous
from tests.web_helpers import HOSTILE

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = Path("/usr/bin/chromium")
NO_CHROMIUM = (
    f"the browser tests need Debian's chromium at {CHROMIUM}: install it with "
    "`apt-get install -y chromium` (.ci/run does)"
)
# a developer without Chromium gets a skip; CI (CI=true) must run them, so there the browser
# fixture fails instead
UNDER_CI = os.environ.get("CI", "").lower() == "true"
pytestmark = pytest.mark.skipif(not CHROMIUM.exists() and not UNDER_CI, reason=NO_CHROMIUM)
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
# read at import: the autouse fixture of tests/conftest.py clears GITMEM_* for each test
SHOTS_ENV = os.environ.get("GITMEM_SCREENSHOTS", "")
DOCS_SHOT = os.environ.get("GITMEM_DOCS_SCREENSHOT", "")
# a folder (docs/screenshots) that also gets a copy of each page at both sizes
DOCS_SHOTS = os.environ.get("GITMEM_DOCS_SCREENSHOTS", "")
SIZES = {"desktop": (1280, 900), "phone": (390, 844)}
MARKDOWN_TURN = "Tell the **lighthouse keeper** story again, as in [[python-asyncio]] please."
TOKEN = "browser-test-token-0123456789abcdef"
AGENT = "web-person"
ZH = "装饰器-讨论"
KEY_FACT = "Prefers books under 200 pages"
LATER = "One more question after the summary: what does functools.wraps keep?"
_BANNER = re.compile(r"at (http://[^\s/]+)/")


@dataclass
class Site:
    """The module's store and server, and what the fixture put in the store."""

    store: Path
    url: str
    shots: Path
    summary_sha: str  # the summary of ZH, reverted through the UI
    asyncio_turns: int
    env: dict[str, str]
    console: list[str] = field(default_factory=list)


def _server(store: Path, env: dict[str, str], *args: str) -> tuple[subprocess.Popen[str], str]:
    """``gitmem web --port 0 ARGS`` on ``store``, and its URL read from the stderr banner."""
    cmd = [
        sys.executable,
        "-m",
        "gitmem",
        "--repo",
        str(store),
        "--agent",
        AGENT,
        "web",
        "--port",
        "0",
        *args,
    ]
    proc = subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env
    )
    assert proc.stderr is not None
    banner = proc.stderr.readline()
    found = _BANNER.search(banner)
    if not found:
        proc.kill()
        rest = proc.stderr.read()
        proc.wait()
        raise AssertionError(f"gitmem web did not start: {banner}{rest}")
    return proc, found.group(1)


def _stop(proc: subprocess.Popen[str]) -> tuple[int, str]:
    """SIGTERM, then the exit code and what the server wrote on stderr."""
    proc.send_signal(signal.SIGTERM)
    try:
        code = proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.stderr is not None
    return code, proc.stderr.read()


def _build(store: Path) -> tuple[str, int]:
    """The demo store plus what the dashboard shows beyond it; returns the summary commit
    of ZH (followed by one more turn) and the number of turns of python-asyncio."""
    run_demo(store, echo=lambda _line: None)
    with MemoryManager(store, agent="test-agent", model="test-model") as mm:
        mm.save_interaction(
            "hostile", HOSTILE, "I will not run that.", datetime(2024, 4, 20, 9, 0, tzinfo=UTC)
        )
        mm.save_interaction(
            "hostile", MARKDOWN_TURN, "Once upon a time.", datetime(2024, 4, 20, 9, 5, tzinfo=UTC)
        )
        mm.update_metadata("python-asyncio", metadata={"links": [ZH]})
        # the demo reverted its summary: a new one, with key facts (the offline one has none)
        mm.summarize(
            "python-asyncio",
            summarizer=Fixed(
                "- Wants short asyncio books", [KEY_FACT, "Fluent Python is by Luciano Ramalho"]
            ),
        )
        mm.summary_config = SummaryConfig(on_loss="review")
        _with_previous(mm)  # session "caro" with a summary of four facts
        with pytest.raises(SummaryHeldForReview):  # one that drops them waits on a branch
            mm.summarize("caro", summarizer=Fixed("- Caroline paints", ["Caroline paints"]))
        summary_sha = mm.summarize(ZH, offline=True)
        mm.save_interaction(
            ZH,
            LATER,
            "What the function was: its name and docstring.",
            datetime(2024, 4, 21, 9, 0, tzinfo=UTC),
        )
        loaded = mm.load_memory("python-asyncio")
        assert loaded is not None
        return summary_sha, len(loaded.interactions)


@pytest.fixture(scope="module")
def site(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Site]:
    # module-scoped, so tests/conftest.py's per-test isolation is done here again
    home = tmp_path_factory.mktemp("browser-home")
    (home / ".gitconfig").write_text(
        "[user]\n\tname = Test Person\n\temail = test@example.com\n[init]\n\tdefaultBranch = main\n"
    )
    with pytest.MonkeyPatch.context() as mp:
        for key in list(os.environ):
            if key.startswith(("GIT_", "GITMEM_")):
                mp.delenv(key)
        for key, value in {
            "HOME": str(home),
            "XDG_CONFIG_HOME": str(home / ".config"),
            "GIT_CONFIG_NOSYSTEM": "1",
            **IDENTITY,
        }.items():
            mp.setenv(key, value)
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        store = tmp_path_factory.mktemp("browser") / "store"
        summary_sha, turns = _build(store)
        shots = Path(SHOTS_ENV) if SHOTS_ENV else Path(tempfile.mkdtemp(prefix="gitmem-shots-"))
        shots.mkdir(parents=True, exist_ok=True)
        proc, url = _server(store, env)
        try:
            yield Site(store, url, shots, summary_sha, turns, env)
        finally:
            code, rest = _stop(proc)
            capture = request.config.pluginmanager.get_plugin("capturemanager")
            with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
                print(f"\nscreenshots of the dashboard: {shots}")
    assert code == 0, f"gitmem web exited with {code} on SIGTERM: {rest}"
    assert "Traceback" not in rest, rest


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not CHROMIUM.exists():
        pytest.fail(f"CI=true: {NO_CHROMIUM}", pytrace=False)
    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture(scope="module")
def context(browser: Browser, site: Site) -> Iterator[BrowserContext]:
    made = browser.new_context(base_url=site.url, viewport={"width": 1280, "height": 900})
    try:
        yield made
    finally:
        made.close()


@pytest.fixture
def page(context: BrowserContext, site: Site) -> Iterator[Page]:
    """A fresh tab; every console error or page error of the test lands in site.console."""
    opened = context.new_page()
    site.console.clear()

    def note(message: ConsoleMessage) -> None:
        # every page names its icon, so the browser never asks for a missing /favicon.ico
        if message.type == "error":
            site.console.append(message.text)

    opened.on("console", note)
    opened.on("pageerror", lambda error: site.console.append(f"page error: {error}"))
    try:
        yield opened
    finally:
        opened.close()


def _open(page: Page, site: Site, path: str, shot: str, status: int = 200) -> Page:
    """Go to ``path``, check its status, save a full-page screenshot named ``shot``."""
    response = page.goto(path)
    assert response is not None, path
    shown = page.locator("main").inner_text() if page.locator("main").count() else ""
    assert response.status == status, f"{path}: HTTP {response.status}: {shown[:400]}"
    page.screenshot(path=str(site.shots / f"{shot}.png"), full_page=True)
    return page


def _hook(name: str) -> str:
    return f'[data-test="{name}"]'


def _hrefs(page: Page, selector: str) -> list[str]:
    """Every ``href`` under ``selector``, percent-decoded (ids may hold any character)."""
    found: list[str] = page.eval_on_selector_all(
        selector,
        "nodes => nodes.map(n => n.getAttribute('href') || n.getAttribute('xlink:href') || '')",
    )
    return [unquote(h) for h in found]


def _session_file(store: Path, session_id: str, rev: str = "HEAD") -> str:
    """The session's Markdown file at ``rev``, read with the real git."""
    names = git(store, "ls-tree", "-r", "-z", "--name-only", rev, "sessions").split("\0")
    [path] = [n for n in names if n.endswith(f"/{session_id}.md")]
    return git(store, "show", f"{rev}:{path}")


# --- every page ----------------------------------------------------------------------------


def _sessions(page: Page, site: Site) -> None:
    rows = page.locator(_hook("session-row"))
    shown = rows.all_inner_texts()
    for session_id in ("python-asyncio", ZH, "hostile", "caro"):
        assert any(session_id in row for row in shown), (session_id, shown)
    assert "/sessions/python-asyncio" in _hrefs(page, f"{_hook('session-row')} a")
    assert "4" in page.locator(_hook("total")).inner_text()  # four sessions
    assert page.locator(f"form{_hook('session-filters')}").count() == 1
    if DOCS_SHOT:  # the README's picture: a fixed size, only the top of the page
        page.set_viewport_size({"width": 1200, "height": 720})
        page.screenshot(path=DOCS_SHOT)


def _session(page: Page, site: Site) -> None:
    turns = page.locator(f"article{_hook('turn')}")
    assert turns.count() == site.asyncio_turns
    first = turns.first
    assert (first.get_attribute("id") or "").startswith("turn-")
    assert "Recommend some books on Python asyncio." in first.locator(".content").first.inner_text()
    assert "Luciano Ramalho." in page.locator("main").inner_text()
    assert page.locator(_hook("summary")).count() == 1
    facts = page.locator(f"{_hook('summary')} {_hook('key-facts')}")
    assert KEY_FACT in facts.inner_text()
    meta = page.locator(_hook("session-meta")).inner_text()
    assert "python" in meta and "books" in meta and ZH in meta
    assert page.locator(f"form{_hook('as-of')} [name=at]").count() == 1
    # the forms to read an older revision are folded: the session's content comes first
    assert not page.locator(f"form{_hook('as-of')} select").is_visible()
    links = _hrefs(page, "main a")
    assert any(h.startswith("/history?session=python-asyncio") for h in links), links
    assert "/undo/rollback/python-asyncio" in [h.split("?")[0] for h in links], links


def _blame(page: Page, site: Site) -> None:
    # each turn names who saved it: the demo's agent, not the later summary's
    blames = page.locator(f"article{_hook('turn')} {_hook('blame')}").all_inner_texts()
    assert len(blames) == site.asyncio_turns
    assert all("demo-agent" in b and "test-agent" not in b for b in blames), blames


def _search(page: Page, site: Site) -> None:
    hits = page.locator(_hook("hit"))
    assert hits.count() >= 1
    assert "asyncio" in hits.first.inner_text().lower()
    assert any(
        h.startswith("/sessions/python-asyncio#turn-") for h in _hrefs(page, f"{_hook('hit')} a")
    )
    assert page.locator(f"{_hook('explain')} meter").count() >= 1


def _history(page: Page, site: Site) -> None:
    assert page.locator(_hook("commit-row")).count() >= 10
    links = _hrefs(page, _hook("commit-link"))
    assert links and all(h.startswith("/commits/") for h in links), links
    assert page.locator(f"form{_hook('history-filters')}").count() == 1


def _commit(page: Page, site: Site) -> None:
    diff = page.locator(_hook("diff"))
    assert diff.count() == 1
    assert ZH in page.locator(_hook("session-diff")).first.inner_text()
    assert page.locator(_hook("summary-change")).count() >= 1
    assert _hrefs(page, _hook("revert-link")) == [f"/undo/revert/{site.summary_sha}"]


def _undo(page: Page, site: Site) -> None:
    assert page.locator("main form").count() >= 3  # revert, rollback, agent window
    names = page.eval_on_selector_all("main form [name]", "nodes => nodes.map(n => n.name)")
    assert "agent" in names, names


def _reviews(page: Page, site: Site) -> None:
    rows = page.locator(_hook("review")).all_inner_texts()
    assert any("caro" in row for row in rows), rows


def _review(page: Page, site: Site) -> None:
    assert "Caroline paints" in page.locator(_hook("side-by-side")).inner_text()
    assert page.locator(_hook("side-del")).count() >= 1
    assert page.locator(_hook("accept")).count() == 1
    assert page.locator(_hook("reject")).count() == 1


def _links(page: Page, site: Site) -> None:
    graph = f"svg{_hook('links-graph')}"
    assert page.locator(graph).count() == 1
    nodes = _hrefs(page, f"{graph} a")
    assert "/sessions/python-asyncio" in nodes and f"/sessions/{ZH}" in nodes, nodes


def _facts(page: Page, site: Site) -> None:
    facts = page.locator(_hook("fact")).all_inner_texts()
    assert any("prefers short books" in fact for fact in facts), facts


PAGES: list[tuple[str, str, Callable[[Page, Site], None]]] = [
    ("sessions", "/sessions", _sessions),
    ("session", "/sessions/python-asyncio", _session),
    ("session-blame", "/sessions/python-asyncio?blame=1", _blame),
    ("search", "/search?q=short+asyncio+book&explain=1", _search),
    ("history", "/history", _history),
    ("commit", "/commits/{summary_sha}", _commit),
    ("undo", "/undo", _undo),
    ("reviews", "/reviews", _reviews),
    ("review", "/reviews/session/caro", _review),
    ("links", "/links", _links),
    ("facts", "/facts", _facts),
]


@pytest.mark.parametrize(("shot", "path", "check"), PAGES, ids=[p[0] for p in PAGES])
def test_each_page_shows_the_store(
    page: Page, site: Site, shot: str, path: str, check: Callable[[Page, Site], None]
) -> None:
    _open(page, site, path.format(summary_sha=site.summary_sha), shot)
    assert page.title().endswith("· gitmem"), page.title()
    check(page, site)
    assert site.console == [], site.console  # no CSP refusal, no script error, no 404 asset


# --- what a person does --------------------------------------------------------------------


def test_search_through_the_form(page: Page, site: Site) -> None:
    _open(page, site, "/search", "search-empty")
    form = page.locator(f"form{_hook('search-form')}")
    form.locator("[name=q]").fill("Fluent Python author")
    with page.expect_navigation():
        submit = form.locator("button, [type=submit]")
        if submit.count():
            submit.first.click()
        else:
            form.locator("[name=q]").press("Enter")
    assert urlsplit(page.url).path == "/search" and "q=Fluent+Python+author" in page.url
    page.screenshot(path=str(site.shots / "search-form.png"), full_page=True)
    assert page.locator(f"form{_hook('search-form')} [name=q]").input_value() == (
        "Fluent Python author"
    )
    hits = page.locator(_hook("hit")).all_inner_texts()
    assert any("Fluent Python" in hit for hit in hits), hits


def test_open_a_diff_from_the_history(page: Page, site: Site) -> None:
    head = git(site.store, "rev-parse", "HEAD").strip()
    _open(page, site, "/history", "history-before-diff")
    newest = page.locator(_hook("commit-link")).first
    with page.expect_navigation():
        newest.click()
    assert urlsplit(page.url).path == f"/commits/{head}"
    page.screenshot(path=str(site.shots / "commit-save.png"), full_page=True)
    assert page.locator(_hook("diff")).count() == 1
    added = page.locator(_hook("turn-added")).all_inner_texts()
    assert any(LATER in turn for turn in added), added  # HEAD saved that turn


def test_revert_a_summary_through_the_ui(page: Page, site: Site) -> None:
    before = _session_file(site.store, ZH)
    # the summary's heading (in the session's language), as the summary commit added it
    added = git(site.store, "show", "--format=", site.summary_sha).splitlines()
    [heading] = [line[1:] for line in added if line.startswith("+## ")]
    assert heading in before.splitlines() and LATER in before
    _open(page, site, f"/commits/{site.summary_sha}", "revert-1-commit")
    with page.expect_navigation():
        page.locator(_hook("revert-link")).click()
    assert urlsplit(page.url).path == f"/undo/revert/{site.summary_sha}"
    assert page.locator(_hook("preview")).count() == 1
    page.screenshot(path=str(site.shots / "revert-2-preview.png"), full_page=True)
    assert git(site.store, "rev-parse", "HEAD").strip() != site.summary_sha
    head_before = git(site.store, "rev-parse", "HEAD").strip()
    with page.expect_navigation():
        page.locator(f"form{_hook('confirm-form')} {_hook('confirm')}").click()
    page.screenshot(path=str(site.shots / "revert-3-done.png"), full_page=True)
    new = git(site.store, "rev-parse", "HEAD").strip()
    assert new != head_before
    assert urlsplit(page.url).path == f"/commits/{new}" and "done=revert" in page.url
    assert page.locator(_hook("notice")).count() == 1
    # the real git: the revert commit, written by the server's agent through the web
    body = git(site.store, "log", "-1", "--format=%B")
    assert f"This reverts commit {site.summary_sha}" in body, body
    assert "Gitmem-Via: web" in body and f"Gitmem-Agent: {AGENT}" in body, body
    after = _session_file(site.store, ZH)
    assert heading not in after.splitlines()  # the summary is gone
    assert LATER in after  # the turn saved after it is kept
    assert git(site.store, "status", "--porcelain") == ""


def test_hostile_content_renders_as_text(page: Page, site: Site) -> None:
    _open(page, site, "/sessions/hostile", "hostile")
    # the onerror handler and the script would both have set the title to "pwned"
    title = page.title()
    assert "hostile" in title and "pwned" not in title, title
    assert page.locator("main script").count() == 0
    assert page.locator("main img").count() == 0  # not even an inert one
    assert page.locator("main [onerror]").count() == 0
    assert page.locator('main a[href^="javascript:"]').count() == 0
    text = page.locator("main").inner_text()
    assert '<script>document.title="pwned"</script>' in text, text
    assert "<img src=x onerror=" in text, text
    # the page tried nothing: a CSP refusal or a script error would be a console error
    assert site.console == [], site.console


def test_a_post_without_the_csrf_token_is_refused(context: BrowserContext, site: Site) -> None:
    commits = git(site.store, "rev-list", "--count", "--all")
    target = f"/undo/revert/{site.summary_sha}"
    # the browser holds the CSRF cookie (it has opened pages): only the form field is missing
    assert any(c["name"] == "gitmem_csrf" for c in context.cookies())
    for fields in ({"confirm": "1"}, {"confirm": "1", "csrf": "forged-token"}):
        answer = context.request.post(target, form=fields, max_redirects=0)
        assert answer.status == 403, (fields, answer.status, answer.text()[:300])
        assert "CSRF" in answer.text()
    assert git(site.store, "rev-list", "--count", "--all") == commits


def test_login_page_error_page_and_static_css(page: Page, site: Site) -> None:
    login = _open(page, site, "/login", "login")
    assert "needs no token" in login.locator("main").inner_text()
    _open(page, site, "/no/such/page", "error-404", status=404)
    assert page.locator(_hook("error")).count() == 1
    _open(page, site, "/sessions/no-such-session", "error-session", status=404)
    assert "no-such-session" in page.locator(_hook("error")).inner_text()
    response = page.goto("/static/style.css")
    assert response is not None and response.status == 200
    assert response.headers["content-type"].startswith("text/css")
    response = page.goto("/login")
    assert response is not None
    assert "script-src 'none'" in response.headers["content-security-policy"]
    # the stylesheet applied: the header is laid out by style.css, not the browser default
    assert page.evaluate("getComputedStyle(document.body).margin") != "8px"


# --- a server with a token, and one that refuses to start ----------------------------------


def test_token_server_asks_for_a_login(browser: Browser, site: Site) -> None:
    proc, url = _server(site.store, site.env, "--host", "127.0.0.1", "--token", TOKEN)
    try:
        made = browser.new_context(base_url=url)
        try:
            tab = made.new_page()
            tab.goto("/sessions")
            assert urlsplit(tab.url).path == "/login"
            tab.screenshot(path=str(site.shots / "token-login.png"), full_page=True)
            tab.locator("main form [name=token]").fill("not-the-token-at-all-0123")
            with tab.expect_navigation():
                tab.locator("main form [type=submit], main form button").first.click()
            assert "not this server's token" in tab.locator("main").inner_text()
            assert tab.locator(_hook("session-row")).count() == 0
            tab.locator("main form [name=token]").fill(TOKEN)
            with tab.expect_navigation():
                tab.locator("main form [type=submit], main form button").first.click()
            assert urlsplit(tab.url).path == "/sessions"
            rows = tab.locator(_hook("session-row")).all_inner_texts()
            assert any("python-asyncio" in row for row in rows), rows
            tab.screenshot(path=str(site.shots / "token-sessions.png"), full_page=True)
        finally:
            made.close()
    finally:
        code, rest = _stop(proc)
    assert code == 0, rest
    assert TOKEN not in rest  # never printed


def test_public_bind_without_a_token_refuses_to_start(site: Site) -> None:
    cmd = [
        sys.executable,
        "-m",
        "gitmem",
        "--repo",
        str(site.store),
        "web",
        "--host",
        "0.0.0.0",
        "--port",
        "0",
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, env=site.env, timeout=60)
    assert done.returncode != 0
    assert "binding to '0.0.0.0' lets other machines connect" in done.stderr, done.stderr
    assert "--token" in done.stderr and "GITMEM_WEB_TOKEN" in done.stderr
    assert "Traceback" not in done.stderr


# --- the dashboard as a person reads it: titles, cards, the diff first, facts corrected ------


def _shoot_sizes(
    browser: Browser, site: Site, name: str, path: str, url: str | None = None
) -> None:
    """``path`` at a desktop's and a phone's size: the top of the page, as first seen
    (``url``: on another server than the module's)."""
    for label, (width, height) in SIZES.items():
        made = browser.new_context(
            base_url=url or site.url, viewport={"width": width, "height": height}
        )
        try:
            tab = made.new_page()
            response = tab.goto(path)
            assert response is not None and response.status == 200, path
            shot = site.shots / f"{name}-{label}.png"
            tab.screenshot(path=str(shot))
            assert tab.evaluate("document.documentElement.scrollWidth") <= width + 1, (
                f"{path} scrolls sideways at {width} px"
            )
            if DOCS_SHOTS:
                Path(DOCS_SHOTS).mkdir(parents=True, exist_ok=True)
                (Path(DOCS_SHOTS) / shot.name).write_bytes(shot.read_bytes())
        finally:
            made.close()


def _a_fact_id(site: Site) -> str:
    with MemoryManager(site.store) as mm:
        return mm.facts()[0].id


def test_screenshots_at_desktop_and_phone_sizes(browser: Browser, site: Site) -> None:
    for name, path in [
        ("sessions", "/sessions"),
        ("session", "/sessions/caro"),
        ("history", "/history"),
        ("undo", "/undo"),
        ("search", "/search?q=lighthouse+asyncio+books"),
        ("commit", f"/commits/{site.summary_sha}"),
        ("facts", "/facts"),
        ("fact", f"/facts/{_a_fact_id(site)}"),
        ("reviews", "/reviews"),
        ("review", "/reviews/session/caro"),
        ("search-around", "/search?q=Fluent+Python+author&around=1#hit-1"),
    ]:
        _shoot_sizes(browser, site, name, path)
    assert all((site.shots / f"sessions-{label}.png").stat().st_size > 0 for label in SIZES)


def test_sessions_show_titles_and_relative_times(page: Page, site: Site) -> None:
    _open(page, site, "/sessions", "sessions-titles")
    titles = page.locator(_hook("session-title")).all_inner_texts()
    # the demo's sessions have no title metadata: their first user line stands in
    assert titles and all(t.strip() for t in titles), titles
    assert "python-asyncio" not in titles  # a title, not the bare id
    first = page.locator(f"{_hook('session-row')} time").first
    assert re.fullmatch(r"\d+ \w+ ago|just now", first.inner_text()), first.inner_text()
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d \S+", first.get_attribute("title") or "")
    assert "Last active (" in page.locator("thead").inner_text()


def test_search_snippets_show_no_raw_markdown(page: Page, site: Site) -> None:
    _open(page, site, "/search?q=lighthouse+keeper", "search-markdown")
    snippets = page.locator(_hook("snippet")).all_inner_texts()
    assert any("lighthouse keeper" in s for s in snippets), snippets
    for text in snippets:
        assert "**" not in text and "[[" not in text and "]]" not in text, text
    assert page.locator(f"{_hook('snippet')} strong").count() >= 1  # rendered, not dropped
    assert page.locator(_hook("explain")).count() == 0  # bars only with Explain


def test_the_turns_around_a_hit_and_facts_apart(page: Page, site: Site) -> None:
    _open(page, site, "/search?q=prefers+short+books", "search-facts")
    assert "prefers short books" in page.locator(_hook("fact-hits")).inner_text()
    _open(page, site, "/search?q=Fluent+Python+author", "search-turns")
    assert page.locator(_hook("around")).count() == 0
    with page.expect_navigation():
        page.locator(_hook("around-link")).first.click()
    assert "around=1" in page.url and page.url.endswith("#hit-1")
    around = page.locator(f"details{_hook('around')}")
    assert around.count() == 1 and around.get_attribute("open") is not None
    assert around.locator(f"{_hook('around-before')}, {_hook('around-after')}").count() == 2
    page.screenshot(path=str(site.shots / "search-around.png"), full_page=True)
    # the query box holds the search access key (CDP's synthetic keys do not fire access
    # keys, so the attribute is what is checked)
    assert page.locator('[accesskey="s"]').evaluate_all("ns => ns.map(n => n.name)") == ["q"]


def test_the_diff_is_above_the_fold_on_a_commit_page(page: Page, site: Site) -> None:
    _open(page, site, f"/commits/{site.summary_sha}", "commit-fold")
    box = page.locator(_hook("diff")).bounding_box()
    assert box is not None and box["y"] < 900, box
    trailers = page.locator(f"details{_hook('trailers')}")
    assert trailers.count() == 1 and trailers.get_attribute("open") is None


def _commits(site: Site) -> int:
    return int(git(site.store, "rev-list", "--count", "HEAD").strip())


def _op(site: Site) -> str:
    return git(site.store, "log", "-1", "--format=%(trailers:key=Gitmem-Op,valueonly)").strip()


def test_add_edit_and_forget_a_fact_through_the_ui(page: Page, site: Site) -> None:
    _open(page, site, "/facts", "facts-before-add")
    before = _commits(site)
    page.locator("details.add-fact > summary").click()
    form = page.locator(f"form{_hook('add-form')}")
    form.locator("[name=text]").fill("The user keeps bees")
    with page.expect_navigation():
        form.locator(_hook("add")).click()
    assert _commits(site) == before + 1 and _op(site) == "remember"
    assert git(site.store, "log", "-1", "--format=%an").strip() == AGENT
    assert page.locator(_hook("fact-text")).inner_text() == "The user keeps bees"
    page.screenshot(path=str(site.shots / "fact-added.png"), full_page=True)

    edit = page.locator(f"form{_hook('edit-form')}")
    edit.locator("[name=text]").fill("The user keeps two hives of bees")
    with page.expect_navigation():
        edit.locator(_hook("edit")).click()
    assert _commits(site) == before + 2 and _op(site) == "update-fact"
    assert page.locator(_hook("fact-text")).inner_text() == "The user keeps two hives of bees"

    forget = page.locator(f"form{_hook('forget-form')}")
    forget.locator("[name=reason]").fill("a test")
    with page.expect_navigation():
        forget.locator(_hook("forget")).click()
    assert _commits(site) == before + 3 and _op(site) == "forget"
    assert urlsplit(page.url).path == "/facts"
    assert "two hives" not in page.locator("main").inner_text()


def test_a_fact_post_without_the_csrf_token_is_refused(context: BrowserContext, site: Site) -> None:
    commits = _commits(site)
    answer = context.request.post("/facts/add", form={"text": "forged"}, max_redirects=0)
    assert answer.status == 403 and "CSRF" in answer.text()
    assert _commits(site) == commits


def test_a_graph_of_sixty_sessions_renders_within_the_page(
    browser: Browser, site: Site, tmp_path: Path
) -> None:
    store = tmp_path / "graph"
    with MemoryManager(store, init=True, agent="test-agent") as mm:
        with mm.batch("Sixty sessions"):
            for n in range(60):
                for turn in range(1 + n % 5):  # sizes 1..5 turns
                    mm.save_interaction(
                        f"s{n:02d}",
                        f"see [[s{(n + 1) % 60:02d}]] and [[s{n // 6:02d}]] ({turn})",
                        "ok",
                        tags=[("books", "travel", "code")[n % 3]],
                    )
        mm.remember("The user reads on trains", source="s07")
    proc, url = _server(store, site.env)
    try:
        made = browser.new_context(base_url=url, viewport={"width": 1280, "height": 900})
        try:
            tab = made.new_page()
            response = tab.goto("/links")
            assert response is not None and response.status == 200
            shot = site.shots / "links-graph.png"
            tab.screenshot(path=str(shot), full_page=True)
            graph = tab.locator(f"svg{_hook('links-graph')}")
            assert graph.locator("a.node").count() == 60
            assert graph.locator("line[marker-end]").count() >= 60
            assert graph.locator("a.fact").count() == 1
            box = graph.bounding_box()
            width = tab.evaluate("document.documentElement.clientWidth")
            assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width, box
            assert box["height"] > 300  # drawn at a size worth reading, not a thumbnail
            radii = {
                float(r)
                for r in graph.locator("a.node circle").evaluate_all(
                    "cs => cs.map(c => c.getAttribute('r'))"
                )
            }
            assert len(radii) >= 3  # sized by turns
            assert tab.locator(f"{_hook('legend')} li").count() >= 3  # books, travel, code
            # a focus: s30 and what lies within two hops of it, nothing more
            with tab.expect_navigation():
                tab.locator("form.filters [name=focus]").fill("s30")
                tab.locator("form.filters [name=focus]").press("Enter")
            assert "focus=s30" in tab.url
            shown = set(
                graph.locator("a.node").evaluate_all("ns => ns.map(n => n.getAttribute('data-id'))")
            )
            assert shown == _two_hops("s30"), shown
            tab.screenshot(path=str(site.shots / "links-focus.png"), full_page=True)
            # zoom in by a link: the same picture, a smaller viewBox
            before = graph.get_attribute("viewBox") or ""
            with tab.expect_navigation():
                tab.locator(_hook("view-link"), has_text="Zoom in").click()
            after = tab.locator(f"svg{_hook('links-graph')}").get_attribute("viewBox") or ""
            assert float(after.split()[2]) * 2 == pytest.approx(float(before.split()[2]), 0.01)
        finally:
            made.close()
        _shoot_sizes(browser, site, "links", "/links", url)
        _shoot_sizes(browser, site, "links-focus", "/links?focus=s30", url)
    finally:
        code, rest = _stop(proc)
    assert code == 0 and "Traceback" not in rest, rest


def _two_hops(start: str) -> set[str]:
    """The sessions of the sixty-session store within two links of ``start`` (either way)."""
    around: dict[str, set[str]] = {}
    for n in range(60):
        me = f"s{n:02d}"
        for other in (f"s{(n + 1) % 60:02d}", f"s{n // 6:02d}"):
            if other != me:
                around.setdefault(me, set()).add(other)
                around.setdefault(other, set()).add(me)
    near = {start} | around[start]
    return near | {o for n in near for o in around[n]}
