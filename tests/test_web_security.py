"""The dashboard's guard: strict headers on every answer, CSRF on every POST, the Host
check, the token login, and `gitmem web` refusing an open bind without a token."""

from __future__ import annotations

import contextlib
import http.client
import re
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from fnmatch import fnmatch
from pathlib import Path

import pytest

from gitmem import MemoryManager
from gitmem.web.security import CSP, FORM_MAX_BYTES
from tests.conftest import git
from tests.web_helpers import client, csrf_of

TOKEN = "t0ken-that-is-long-enough"


@pytest.fixture
def mm(store: Path) -> MemoryManager:
    manager = MemoryManager(store, init=True, agent="web-test", via="web")
    manager.save_interaction("s1", "hello", "hi there")
    return manager


def commits(mm: MemoryManager) -> int:
    return int(git(mm.path, "rev-list", "--count", "HEAD"))


@pytest.mark.parametrize("path", ["/login", "/static/style.css", "/no/such/page"])
def test_every_answer_has_the_strict_headers(mm: MemoryManager, path: str) -> None:
    answer = client(mm).get(path)
    assert answer.headers["content-security-policy"] == CSP
    assert "script-src 'none'" in CSP and "default-src 'none'" in CSP
    assert answer.headers["x-content-type-options"] == "nosniff"
    assert answer.headers["x-frame-options"] == "DENY"
    assert answer.headers["referrer-policy"] == "no-referrer"
    assert answer.headers["server-timing"].startswith("app;dur=")


def test_a_post_needs_the_csrf_cookie_and_the_matching_field(mm: MemoryManager) -> None:
    browser = client(mm)
    page = browser.get("/login")
    token = csrf_of(page.text)
    before = commits(mm)
    refused = browser.post("/login", data={"token": "x"})
    assert refused.status_code == 403 and "CSRF" in refused.text
    wrong = browser.post("/login", data={"csrf": token[:-2] + "00", "token": "x"})
    assert wrong.status_code == 403
    stranger = client(mm)  # the right field, but not this browser's cookie
    assert stranger.post("/login", data={"csrf": token}).status_code == 403
    accepted = browser.post(
        "/login", data={"csrf": token, "next": "/login"}, follow_redirects=False
    )
    assert accepted.status_code in (200, 303, 401)  # past the guard: the page answered
    assert commits(mm) == before


def test_a_form_from_another_site_is_refused(mm: MemoryManager) -> None:
    browser = client(mm)
    token = csrf_of(browser.get("/login").text)
    answer = browser.post("/login", data={"csrf": token}, headers={"origin": "http://evil.example"})
    assert answer.status_code == 403 and "another site" in answer.text


def test_an_oversized_form_is_refused_before_it_is_read(mm: MemoryManager) -> None:
    browser = client(mm)
    token = csrf_of(browser.get("/login").text)
    answer = browser.post("/login", data={"csrf": token, "token": "x" * (FORM_MAX_BYTES + 1)})
    assert answer.status_code == 413


def test_an_unknown_host_header_is_refused(mm: MemoryManager) -> None:
    browser = client(mm, hosts=("127.0.0.1", "localhost"))
    assert browser.get("/login", headers={"host": "127.0.0.1:8080"}).status_code == 200
    rebound = browser.get("/login", headers={"host": "attacker.example"})
    assert rebound.status_code == 421 and "attacker.example" in rebound.text


def test_with_a_token_a_browser_logs_in_first(mm: MemoryManager) -> None:
    browser = client(mm, token=TOKEN)
    first = browser.get("/facts?x=1", follow_redirects=False)
    assert first.status_code == 303
    assert first.headers["location"] == "/login?next=%2Ffacts%3Fx%3D1"
    login = browser.get("/login?next=/facts")
    token = csrf_of(login.text)
    bad = browser.post("/login", data={"csrf": token, "token": "wrong", "next": "/facts"})
    assert bad.status_code == 401 and "not this server" in bad.text
    good = browser.post(
        "/login",
        data={"csrf": token, "token": TOKEN, "next": "//evil.example"},
        follow_redirects=False,
    )
    assert good.status_code == 303 and good.headers["location"] == "/"
    assert browser.get("/login", follow_redirects=False).status_code == 200
    assert browser.get("/static/style.css").status_code == 200
    assert browser.get("/sessions", follow_redirects=False).status_code != 303


def test_a_token_link_logs_in_and_leaves_the_address_bar(mm: MemoryManager) -> None:
    browser = client(mm, token=TOKEN)
    answer = browser.get(f"/facts?token={TOKEN}&q=a", follow_redirects=False)
    assert answer.status_code == 303 and answer.headers["location"] == "/facts?q=a"
    assert "gitmem_auth" in answer.headers["set-cookie"]
    wrong = client(mm, token=TOKEN).get("/facts?token=nope", follow_redirects=False)
    assert wrong.status_code == 303 and wrong.headers["location"].startswith("/login")


def test_scripts_use_the_bearer_token(mm: MemoryManager) -> None:
    script = client(mm, token=TOKEN)
    assert script.get("/login").status_code == 200
    ok = script.get(
        "/sessions", headers={"authorization": f"Bearer {TOKEN}"}, follow_redirects=False
    )
    assert ok.status_code != 303
    post = script.post("/login", headers={"authorization": "Bearer wrong"}, data={})
    assert post.status_code in (401, 403)


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gitmem", *args], capture_output=True, text=True, timeout=60
    )


def test_gitmem_web_refuses_an_open_bind_without_a_token(mm: MemoryManager) -> None:
    done = run_cli("--repo", str(mm.path), "web", "--host", "0.0.0.0", "--port", "0")
    assert done.returncode != 0
    assert "GITMEM_WEB_TOKEN" in done.stderr and "0.0.0.0" in done.stderr
    short = run_cli("--repo", str(mm.path), "web", "--host", "0.0.0.0", "--token", "abc")
    assert short.returncode != 0 and "at least 16" in short.stderr


_BANNER = re.compile(r"at http://127\.0\.0\.1:(\d+)/")


@contextlib.contextmanager
def web_server(store: Path, token: str) -> Iterator[int]:
    """``gitmem web --port 0 --token T`` on 127.0.0.1; yields its port."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gitmem",
            "--repo",
            str(store),
            "web",
            "--port",
            "0",
            "--token",
            token,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        banner = proc.stderr.readline()
        found = _BANNER.search(banner)
        assert found, f"gitmem web did not start: {banner}"
        yield int(found.group(1))
    finally:
        proc.terminate()
        proc.wait(30)


def raw_get(port: int, target: str, **headers: str) -> http.client.HTTPResponse:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("GET", target, headers=headers)
    answer = conn.getresponse()
    answer.read()
    conn.close()
    return answer


@pytest.mark.parametrize("token", [" " * 16, f"  {TOKEN}  "], ids=["blank", "padded"])
def test_gitmem_web_refuses_a_blank_or_padded_token(mm: MemoryManager, token: str) -> None:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gitmem",
            "--repo",
            str(mm.path),
            "web",
            "--port",
            "0",
            "--token",
            token,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        first = proc.stderr.readline()  # the refusal, or the banner of a server that started
    finally:
        if proc.poll() is None and "serving" in first:
            proc.terminate()
        proc.wait(60)
    assert proc.returncode != 0 and "gitmem web: the token" in first, first


def test_the_token_link_never_redirects_to_another_site(mm: MemoryManager) -> None:
    with web_server(mm.path, TOKEN) as port:
        for target, kept in (
            (f"//evil.example/?token={TOKEN}", "/evil.example/"),
            (f"///evil.example/x?token={TOKEN}&q=1", "/evil.example/x?q=1"),
            (f"/facts?token={TOKEN}", "/facts"),
        ):
            answer = raw_get(port, target)
            assert answer.status == 303, target
            assert answer.headers["location"] == kept, (target, answer.headers["location"])
            assert any("gitmem_auth" in c for c in answer.headers.get_all("set-cookie") or [])


def test_the_bearer_scheme_is_case_insensitive(mm: MemoryManager) -> None:
    with web_server(mm.path, TOKEN) as port:
        for auth in (f"Bearer {TOKEN}", f"bearer {TOKEN}", f"BEARER {TOKEN}"):
            assert raw_get(port, "/sessions", Authorization=auth).status == 200, auth
        for auth in (f"bearer {TOKEN}x", f"Basic {TOKEN}", TOKEN):
            assert raw_get(port, "/sessions", Authorization=auth).status == 303, auth


def test_every_template_and_asset_ships_in_the_package() -> None:
    """A non-editable install carries only what package-data names: every file the pages
    load must match one of its patterns."""
    root = Path(__file__).resolve().parent.parent
    patterns = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-data"
    ]["gitmem"]
    web = root / "gitmem" / "web"
    files = [
        p.relative_to(root / "gitmem").as_posix()
        for folder in ("templates", "static")
        for p in (web / folder).iterdir()
    ]
    assert files
    left_out = [f for f in files if not any(fnmatch(f, pattern) for pattern in patterns)]
    assert not left_out, f"not in package-data: {left_out}"
