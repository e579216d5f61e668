"""``blazen.local``'s process handling, with a stand-in server so it runs without the extra.

The stand-in is a tiny HTTP server that runs after the same parent-watch code as the real
one; ``test_local_model.py`` repeats what matters against llama-cpp-python itself.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import blazen
from blazen import local

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX process groups")

FAKE_SERVER = """
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")
    def log_message(self, *a):
        pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""

FAILS_AT_ONCE = """
import sys
print("error loading model: boom", flush=True)
sys.exit(3)
"""

NEVER_READY = """
import os, pathlib, sys, time
pathlib.Path(sys.argv[2]).write_text(str(os.getpid()))
print("loading...", flush=True)
time.sleep(600)
"""

# Claims the port is taken on the first try (counting tries in a file), then serves.
PORT_TAKEN_ONCE = (
    """
import pathlib, sys
count = pathlib.Path(sys.argv[2])
if not count.exists():
    count.write_text("1")
    print("[Errno 98] error while attempting to bind: address already in use", flush=True)
    sys.exit(1)
"""
    + FAKE_SERVER
)


def use_fake(monkeypatch: pytest.MonkeyPatch, code: str, *extra: str) -> None:
    """Make LocalServer spawn ``code`` (after the parent watch) instead of llama-cpp-python."""

    def command(self: local.LocalServer, gguf: Path) -> list[str]:
        return [sys.executable, "-c", local._WATCH_PARENT + code, str(self.port), *extra]

    monkeypatch.setattr(local.LocalServer, "_command", command)
    monkeypatch.setattr(local, "_require", lambda bundled_model: None)


@pytest.fixture
def gguf(tmp_path: Path) -> Path:
    path = tmp_path / "tiny-model.gguf"
    path.write_bytes(b"GGUF")
    return path


def gone(pid: int, within: float = 10.0) -> bool:
    """Whether process ``pid`` has exited (and been reaped) within ``within`` seconds."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        # A zombie still answers kill(0); it counts as gone once its parent is gone too.
        try:
            state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
        except OSError:
            return True
        if state == "Z":
            return True
        time.sleep(0.05)
    return False


def test_start_waits_for_the_server_and_stop_ends_it(monkeypatch, gguf):
    """start() returns once the server answers; stop() ends it and removes its log."""
    use_fake(monkeypatch, FAKE_SERVER)
    server = local.start(gguf)
    pid = server.pid
    try:
        assert server.running and pid is not None
        assert server.alias == "tiny-model"
        assert server.base_url == f"http://127.0.0.1:{server.port}/v1"
        assert server.model.base_url == server.base_url
        assert server.model.model == "tiny-model" and server.model.provider == "llamacpp"
        assert server.startup_seconds > 0
        log = server.log_path
        assert log is not None and log.exists()
    finally:
        server.stop()
    assert not server.running and server.pid is None and gone(pid)
    assert not log.exists()
    server.stop()  # idempotent


def test_context_manager_stops_the_server_when_the_block_raises(monkeypatch, gguf):
    """Leaving the ``with`` block by an exception still stops the server."""
    use_fake(monkeypatch, FAKE_SERVER)
    with pytest.raises(RuntimeError), local.start(gguf) as server:
        pid = server.pid
        raise RuntimeError("boom")
    assert pid is not None and gone(pid)


def test_server_that_exits_early_raises_connection_error_with_its_output(monkeypatch, gguf):
    """A server that dies while loading: blazen.ConnectionError quoting its last output."""
    use_fake(monkeypatch, FAILS_AT_ONCE)
    with pytest.raises(blazen.ConnectionError, match=r"(?s)status 3.*loading model: boom"):
        local.start(gguf)


def test_server_not_ready_in_time_raises_timeout_and_is_killed(monkeypatch, gguf, tmp_path):
    """startup_timeout runs out: blazen.TimeoutError(limit='startup'), and no child is left."""
    use_fake(monkeypatch, NEVER_READY, str(tmp_path / "pid"))
    server = local.LocalServer(gguf, startup_timeout=1.0)
    with pytest.raises(blazen.TimeoutError, match="not ready after 1 s") as e:
        server.start()
    assert e.value.limit == "startup"
    assert not server.running and gone(int((tmp_path / "pid").read_text()))


def test_port_taken_between_pick_and_bind_is_retried(monkeypatch, gguf, tmp_path):
    """'address already in use' from the server means: pick another port and try again."""
    use_fake(monkeypatch, PORT_TAKEN_ONCE, str(tmp_path / "tries"))
    with local.start(gguf) as server:
        assert server.running
    assert (tmp_path / "tries").exists()


def test_missing_gguf_file_is_a_clear_error(monkeypatch, tmp_path):
    """A GGUF path that does not exist is named in the error."""
    use_fake(monkeypatch, FAKE_SERVER)
    with pytest.raises(FileNotFoundError, match="no GGUF model file at"):
        local.start(tmp_path / "missing.gguf")


def test_missing_extra_raises_import_error_naming_the_install_command(monkeypatch):
    """Without llama-cpp-python, start() says which command installs it."""
    monkeypatch.setattr(local, "_SERVER_MODULES", ("blazen_no_such_module",))
    assert "pip install 'blazen-stream[local]'" in (local.missing_extra() or "")
    with pytest.raises(ImportError, match=r"pip install 'blazen-stream\[local\]'"):
        local.start()


def test_import_blazen_does_not_load_the_local_machinery():
    """``import blazen`` stays cheap: neither blazen.local, blazen.cli nor subprocess load."""
    code = "import sys, blazen; print(sorted({'blazen.local', 'blazen.cli'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


PARENT = """
import os, signal, sys, time
from pathlib import Path
from blazen import local
def command(self, gguf):
    return [sys.executable, "-c", local._WATCH_PARENT + {fake!r}, str(self.port)]
local.LocalServer._command = command
local._require = lambda bundled_model: None
server = local.start({gguf!r})
print(server.pid, flush=True)
how = sys.argv[1]
if how == "exit":
    sys.exit(0)  # no stop(): atexit must do it
try:
    time.sleep(600)
except KeyboardInterrupt:
    sys.exit(130)
"""


@pytest.mark.parametrize("how", ["exit", "sigint", "sigkill"])
def test_no_orphan_server_however_the_parent_ends(how, gguf):
    """Normal exit, Ctrl-C (SIGINT) and even SIGKILL of the parent all end the server."""
    script = textwrap.dedent(PARENT).format(fake=FAKE_SERVER, gguf=str(gguf))
    parent = subprocess.Popen(
        [sys.executable, "-c", script, how], stdout=subprocess.PIPE, text=True
    )
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    if how == "sigint":
        parent.send_signal(signal.SIGINT)
    elif how == "sigkill":
        parent.kill()
    parent.wait(30)
    parent.stdout.close()
    assert gone(child), f"server {child} outlived its parent ({how})"


# -- forked children ----------------------------------------------------------------------
#
# A fork copies every file descriptor and every Python object: a child of the program holds
# the write end of the server's stdin and the LocalServer itself. None of that may make the
# child an owner of the server: the parent's stop() is immediate, the parent's death ends the
# server, and the child's exit (or its own stop()) leaves the parent's server alone.

forks = pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")


@contextlib.contextmanager
def forked_children(how: str) -> Iterator[None]:
    """Keep a forked child of this process alive (``os.fork`` or a fork Pool) for the block."""
    if how == "pool":
        with multiprocessing.get_context("fork").Pool(2) as pool:
            assert pool.apply(os.getpid) != os.getpid()
            yield
        return
    pid = os.fork()
    if pid == 0:  # the child: sleep until killed, never return into pytest
        try:
            time.sleep(60)
        finally:
            os._exit(0)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


@forks
@pytest.mark.parametrize("how", ["os.fork", "pool"])
def test_stop_returns_at_once_while_a_forked_child_lives(how, monkeypatch, gguf):
    """stop() ends the server at once even while a child forked after start() still runs."""
    use_fake(monkeypatch, FAKE_SERVER)
    server = local.start(gguf)
    pid = server.pid
    assert pid is not None
    with forked_children(how):
        began = time.monotonic()
        server.stop()
        took = time.monotonic() - began
        assert gone(pid, within=2.0), "the server outlived stop()"
    # A stop is a kill and a wait: milliseconds. The bound only absorbs a loaded machine.
    assert took < 2.5, f"stop() took {took:.1f} s with a forked child alive"


PARENT_WITH_CHILD = """
import multiprocessing, os, sys, time
from blazen import local
def command(self, gguf):
    return [sys.executable, "-c", local._WATCH_PARENT + {fake!r}, str(self.port)]
local.LocalServer._command = command
local._require = lambda bundled_model: None
server = local.start({gguf!r})
if sys.argv[1] == "pool":
    pool = multiprocessing.get_context("fork").Pool(1)
    child = pool.apply(os.getpid)
    pool.apply_async(time.sleep, (600,))  # a worker busy with a task outlives its parent
else:
    child = os.fork()
    if child == 0:
        time.sleep(600)
        os._exit(0)
print(server.pid, child, flush=True)
time.sleep(600)
"""


@pytest.mark.parametrize("how", ["os.fork", "pool"])
def test_server_exits_when_its_program_is_killed_while_a_forked_child_lives(how, gguf):
    """SIGKILL of the program ends its server even though a child it forked lives on."""
    script = textwrap.dedent(PARENT_WITH_CHILD).format(fake=FAKE_SERVER, gguf=str(gguf))
    parent = subprocess.Popen(
        [sys.executable, "-c", script, how], stdout=subprocess.PIPE, text=True
    )
    assert parent.stdout is not None
    server, child = map(int, parent.stdout.readline().split())
    try:
        parent.kill()
        parent.wait(30)
        assert gone(server), f"server {server} outlived its program, kept by child {child}"
    finally:
        parent.stdout.close()
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            os.kill(server, signal.SIGKILL)


CHILD_LEAVES_THE_BLOCK = """
import os, sys, urllib.request
from blazen import local
def command(self, gguf):
    return [sys.executable, "-c", local._WATCH_PARENT + {fake!r}, str(self.port)]
local.LocalServer._command = command
local._require = lambda bundled_model: None
def answers(server):
    try:
        with urllib.request.urlopen(server.base_url + "/models", timeout=5) as r:
            return r.status == 200
    except OSError:
        return False
with local.start({gguf!r}) as server:
    child = os.fork()
    if child == 0:
        # The child uses the parent's server, starts and stops one of its own, then leaves
        # the with block and exits normally: __exit__ and atexit both run here.
        assert server.running and answers(server)
        with local.start({gguf!r}) as own:
            assert own.pid != server.pid and answers(own)
            own_pid = own.pid
        try:
            os.kill(own_pid, 0)
            sys.exit(3)
        except ProcessLookupError:
            pass
        sys.exit(0)
    _, status = os.waitpid(child, 0)
    print(os.waitstatus_to_exitcode(status), server.running and answers(server), flush=True)
"""


@forks
def test_a_forked_child_that_exits_normally_leaves_the_parents_server_running(gguf):
    """A child leaving the ``with`` block or exiting never stops the server its parent owns."""
    script = textwrap.dedent(CHILD_LEAVES_THE_BLOCK).format(fake=FAKE_SERVER, gguf=str(gguf))
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["0", "True"], out.stderr


CHILD_FORKED_DURING_START = """
import os, signal, sys, threading, time
from blazen import local
def command(self, gguf):
    return [sys.executable, "-c", local._WATCH_PARENT + {never!r}, str(self.port), {pidfile!r}]
local.LocalServer._command = command
local._require = lambda bundled_model: None
server = local.LocalServer({gguf!r}, startup_timeout=60)
threading.Thread(target=server.start, daemon=True).start()  # holds the server's lock
while server.pid is None:
    time.sleep(0.01)
child = os.fork()
if child == 0:
    signal.alarm(10)  # a hang ends the child with SIGALRM
    server.stop()
    os._exit(0)
_, status = os.waitpid(child, 0)
print(os.waitstatus_to_exitcode(status), server.running, flush=True)
os.killpg(server.pid, signal.SIGKILL)
"""


def test_stop_in_a_child_forked_while_another_thread_starts_the_server_does_not_hang(
    gguf, tmp_path
):
    """A child forked while a thread holds the server's lock can still call stop() on it."""
    script = textwrap.dedent(CHILD_FORKED_DURING_START).format(
        never=NEVER_READY, pidfile=str(tmp_path / "pid"), gguf=str(gguf)
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    # 0: the child's stop() returned; the parent's server was not touched by it.
    assert out.stdout.split() == ["0", "True"], out.stderr


PARENT_WITH_UNHOOKED_CHILD = """
import os, sys, time
from blazen import local
def command(self, gguf):
    return [sys.executable, "-c", {prefix!r} + local._WATCH_PARENT + {fake!r}, str(self.port)]
local.LocalServer._command = command
local._require = lambda bundled_model: None
server = local.start({gguf!r})
# A copy of the server's stdin pipe that no fork hook closes (a fork made in C, a dup).
kept = os.dup(server._proc.stdin.fileno())
child = os.fork()
if child == 0:
    time.sleep(600)
    os._exit(0)
print(server.pid, child, flush=True)
time.sleep(600)
"""


@pytest.mark.parametrize(
    "watch", ["pidfd", "getppid"] if hasattr(os, "pidfd_open") else ["getppid"]
)
def test_server_exits_when_its_program_is_killed_even_if_a_child_keeps_its_pipe(watch, gguf):
    """The server watches the program that started it, not only its stdin pipe."""
    prefix = "import os\n" + ("" if watch == "pidfd" else "del os.pidfd_open\n")
    script = textwrap.dedent(PARENT_WITH_UNHOOKED_CHILD).format(
        prefix=prefix, fake=FAKE_SERVER, gguf=str(gguf)
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    server, child = map(int, parent.stdout.readline().split())
    try:
        parent.kill()
        parent.wait(30)
        assert gone(server), f"server {server} outlived its program ({watch})"
    finally:
        parent.stdout.close()
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            os.kill(server, signal.SIGKILL)
