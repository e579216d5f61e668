"""examples/web_relay.py in a real browser: headless Chromium reading the relay's EventSource.

A real redis-server, the example's web process and its background job (each its own
process), the model a ``StreamServer`` that trickles a known answer, and Debian's Chromium
driven by Playwright. Set ``BLAZEN_DOCS_SCREENSHOTS=1`` to write the screenshots into
``docs/images/`` (the docs show them).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from blazen.testing import Pause, Reply, StreamServer, openai_sse

from .sinks.conftest import RedisServer

playwright_sync = pytest.importorskip("playwright.sync_api")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (.ci/run installs it)")

ROOT = Path(__file__).resolve().parents[1]
WORDS = [f"word{i:02d} " for i in range(40)]
ANSWER = "".join(WORDS)
STALE_AFTER = 2.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    server = RedisServer(tmp_path_factory.mktemp("relay-redis")).start()
    try:
        yield server.url
    finally:
        server.kill()


@pytest.fixture
def model_server() -> Iterator[StreamServer]:
    """The model: 40 words, one write each, 0.15 s apart (six seconds in all)."""
    body: list[bytes | Pause] = []
    for event in openai_sse(WORDS):
        body += [event, Pause(0.15)]
    with StreamServer(default=Reply.sse(body)) as server:
        yield server


class Relay:
    """The example's web process on a fixed port, which a test may kill and start again."""

    def __init__(self, redis_url: str, base_url: str) -> None:
        self.port = free_port()
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")},
            "PYTHONPATH": str(ROOT),
            "REDIS_URL": redis_url,
            "BLAZEN_BASE_URL": base_url,
            "BLAZEN_RELAY_PORT": str(self.port),
            "BLAZEN_BEAT": "0.5",
            "BLAZEN_STALE_AFTER": str(STALE_AFTER),
        }
        self.proc: subprocess.Popen[str] | None = None
        self.jobs: list[int] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(ROOT / "examples" / "web_relay.py")],
            env=self.env, stdout=subprocess.PIPE, text=True,
        )
        assert self.proc.stdout is not None
        assert "serving on" in self.proc.stdout.readline()

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        if self.proc is not None and self.proc.stdout is not None:
            self.proc.stdout.close()

    def kill_jobs(self) -> None:
        for pid in self.jobs:
            with contextlib.suppress(ProcessLookupError):  # it ended, or a test killed it
                os.kill(pid, signal.SIGKILL)


@pytest.fixture
def relay(redis_url: str, model_server: StreamServer) -> Iterator[Relay]:
    relay = Relay(redis_url, model_server.base_url)
    relay.start()
    try:
        yield relay
    finally:
        relay.kill()
        relay.kill_jobs()


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    with playwright_sync.sync_playwright() as p:
        # Root in a container: Chromium's sandbox needs user namespaces it may not have.
        chromium = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                     args=["--no-sandbox"])
        try:
            yield chromium
        finally:
            chromium.close()


class CuttingProxy:
    """A TCP proxy in front of the relay that cuts the first SSE response after a few events.

    The web process stays up: only the connection dies, as when a load balancer or a proxy
    drops an idle or long response.
    """

    def __init__(self, upstream_port: int, cut_after_events: int = 8) -> None:
        self.upstream_port = upstream_port
        self.cut_after = cut_after_events
        self.cuts = 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.threads: list[threading.Thread] = []
        self.sockets: list[socket.socket] = []
        self._spawn(self._accept)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def _spawn(self, target: object, *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)  # type: ignore[arg-type]
        thread.start()
        self.threads.append(thread)

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return  # closed
            upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
            self.sockets += [client, upstream]
            self._spawn(self._pump_request, client, upstream)

    def _pump_request(self, client: socket.socket, upstream: socket.socket) -> None:
        first = client.recv(65536)
        cut = first.startswith(b"GET /stream/") and self.cuts == 0
        upstream.sendall(first)
        self._spawn(self._pump, client, upstream)  # the rest of the request, if any
        seen = 0
        try:
            while data := upstream.recv(65536):
                client.sendall(data)
                seen += data.count(b"\nid: ") + data.startswith(b"id: ")
                if cut and seen >= self.cut_after:
                    self.cuts += 1
                    break
        except OSError:
            pass
        for s in (client, upstream):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()

    def _pump(self, source: socket.socket, target: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                target.sendall(data)

    def close(self) -> None:
        self.listener.close()
        for s in self.sockets:
            with contextlib.suppress(OSError):
                s.close()
        for thread in self.threads:
            thread.join(5)


def ask(page: object, relay: Relay, url: str | None = None) -> int:
    """Open the page, press Ask, and return the background job's process id."""
    page.goto(url or relay.url)  # type: ignore[attr-defined]
    with page.expect_response("**/start") as started:  # type: ignore[attr-defined]
        page.click("button")  # type: ignore[attr-defined]
    pid = int(started.value.json()["pid"])
    relay.jobs.append(pid)
    return pid


def received_ids(page: object) -> list[str]:
    return page.locator("#answer").get_attribute("data-ids").split()  # type: ignore[attr-defined]


def id_order(event_id: str) -> tuple[int, int]:
    ms, seq = event_id.split("-")
    return int(ms), int(seq)


def screenshot(page: object, name: str, tmp_path: Path) -> None:
    folder = ROOT / "docs" / "images" if os.environ.get("BLAZEN_DOCS_SCREENSHOTS") == "1" else tmp_path
    page.screenshot(path=str(folder / name))  # type: ignore[attr-defined]


def test_the_page_shows_the_whole_answer_in_order(browser, relay, tmp_path):
    """Every word reaches the page once, in order, and the page says the answer is done."""
    page = browser.new_page()
    ask(page, relay)
    page.wait_for_function("document.getElementById('status').textContent.startsWith('Done')",
                           timeout=60_000)
    assert page.locator("#answer").text_content() == ANSWER
    ids = received_ids(page)
    assert len(ids) == len(WORDS) + 1  # the first chunk carries the role, and no text
    assert ids == sorted(ids, key=id_order) and len(set(ids)) == len(ids)
    screenshot(page, "relay-done.png", tmp_path)
    page.close()


def test_a_dropped_connection_resumes_with_nothing_lost_or_doubled(browser, relay, tmp_path):
    """The web process dies mid-answer; EventSource reconnects to its successor and resumes."""
    page = browser.new_page()
    page.add_init_script(
        "window.opens = 0; const ES = window.EventSource; window.EventSource = function(u) {"
        " const s = new ES(u); s.addEventListener('open', () => window.opens++); return s; };"
        " window.EventSource.CONNECTING = 0;"
    )
    ask(page, relay)
    page.wait_for_function("document.getElementById('answer').textContent.length > 40",
                           timeout=30_000)
    relay.kill()  # the SSE connection goes down with the process, mid-stream
    page.wait_for_function(
        "document.getElementById('status').textContent.startsWith('Connection lost')",
        timeout=30_000)
    partial = page.locator("#answer").text_content()
    assert 0 < len(partial) < len(ANSWER)
    relay.start()
    page.wait_for_function("document.getElementById('status').textContent.startsWith('Done')",
                           timeout=60_000)
    assert page.locator("#answer").text_content() == ANSWER
    ids = received_ids(page)
    assert ids == sorted(ids, key=id_order) and len(set(ids)) == len(ids) == len(WORDS) + 1
    assert page.evaluate("window.opens") >= 2
    screenshot(page, "relay-resumed.png", tmp_path)
    page.close()


def test_a_connection_cut_mid_answer_resumes_with_nothing_lost_or_doubled(browser, relay):
    """A proxy drops the SSE connection after eight events; EventSource resumes from its id."""
    proxy = CuttingProxy(relay.port)
    try:
        page = browser.new_page()
        ask(page, relay, proxy.url)
        page.wait_for_function(
            "document.getElementById('status').textContent.startsWith('Done')", timeout=60_000)
        assert proxy.cuts == 1
        assert page.locator("#answer").text_content() == ANSWER
        ids = received_ids(page)
        assert ids == sorted(ids, key=id_order) and len(set(ids)) == len(ids) == len(WORDS) + 1
        page.close()
    finally:
        proxy.close()


def test_a_job_killed_mid_answer_tells_the_page_the_worker_went_away(browser, relay, tmp_path):
    """SIGKILL on the background job: within stale_after the page says so, in plain words."""
    page = browser.new_page()
    pid = ask(page, relay)
    page.wait_for_function("document.getElementById('answer').textContent.length > 40",
                           timeout=30_000)
    os.kill(pid, signal.SIGKILL)
    killed = time.monotonic()
    page.wait_for_function(
        "document.getElementById('status').textContent.includes('worker went away')",
        timeout=60_000)
    assert time.monotonic() - killed < STALE_AFTER + 20  # generous: the machine is shared
    assert page.locator("#status").get_attribute("class") == "failed"
    assert 0 < len(page.locator("#answer").text_content()) < len(ANSWER)
    screenshot(page, "relay-producer-lost.png", tmp_path)
    page.close()
