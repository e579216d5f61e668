"""Ctrl-C while complete() waits: CancelledError to on_error, then KeyboardInterrupt."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = textwrap.dedent(
    """
    import sys
    from blazen import Llm, Providers, Streaming
    from blazen.testing import Reply, Stall, StreamServer

    with StreamServer([Reply.sse([Stall()])]) as server:
        model = Providers.openai_compat("test", server.base_url)
        req = Llm.completion_request([Llm.user("hi")])
        print("ready", flush=True)
        try:
            Streaming.complete(
                model, req,
                on_error=lambda e: print("on_error", type(e).__name__, flush=True),
            )
        except KeyboardInterrupt:
            closed = server.wait_closed(1.0)
            print("KeyboardInterrupt closed=%s" % closed, flush=True)
            raise
    """
)


def test_sigint_delivers_cancelled_error_then_raises_keyboard_interrupt():
    """SIGINT to a process blocked in complete on a silent server: clean exit within 1 s."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-c", SCRIPT],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(0.5)  # let it block inside complete()
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=10)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert out.splitlines() == ["on_error CancelledError", "KeyboardInterrupt closed=True"], err
    assert "KeyboardInterrupt" in err
    assert proc.returncode != 0
    assert took < 1.0
