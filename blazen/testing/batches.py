"""A fake of the providers' batch APIs on a loopback port, for testing ``via="provider"``.

:class:`BatchServer` answers OpenAI's Files and Batches endpoints, Anthropic's Message
Batches and Gemini's batch mode (inline requests) the way their API references describe
them: an OpenAI input file is uploaded (multipart), a batch is created from it, polled until
``completed`` and its output and error files downloaded as JSONL; an Anthropic batch is
created with its requests inline and its results streamed as JSONL from ``results_url``; a
Gemini batch is a long-running operation whose ``response`` holds the inlined responses in
input order. Each request of a batch is answered by ``answer(provider, custom_id, body)``.

The server can misbehave as the real ones do: ``polls`` status checks before a batch ends,
results in shuffled order, a batch that ``expire``\\ s with only its first half answered,
requests ``reject``\\ ed one by one, and ``poll_failures`` status checks answered 500; and
as a lying or broken one does: results ``lines`` rewritten (ids never sent, an id twice,
lines that are not JSON), a results ``download`` that drops or stalls half-way, and
``lose_creates`` batch creations that happen but whose answer never arrives.
Like :mod:`.server`, nothing here imports the rest of blazen.
"""

from __future__ import annotations

import json
import random
import re
import threading
from collections.abc import Iterable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Optional, Union

import attrs

from .server import RecordedRequest

__all__ = ["BatchFailure", "BatchServer", "FakeBatch"]


@attrs.frozen(kw_only=True)
class BatchFailure:
    """What ``answer`` returns for a request the provider rejects: an HTTP-style error."""

    status: int = 400
    type: str = "invalid_request_error"
    message: str = "the request is invalid"


#: What ``answer`` returns: the text of a successful answer, or a failure.
Answer = Union[str, BatchFailure]


def _echo(provider: str, custom_id: str, body: Mapping[str, Any]) -> Answer:
    del provider
    return f"answer to {custom_id}: {_last_user_text(body)}"


def _last_user_text(body: Mapping[str, Any]) -> str:
    # OpenAI and Anthropic: messages; Gemini: contents. The text of the last user turn.
    # The Responses API: input is a string or a list of items.
    if isinstance(body.get("input"), str):
        return str(body["input"])
    turns = body.get("messages") or body.get("contents") or body.get("input") or []
    for turn in reversed(turns):
        if turn.get("role") != "user":
            continue
        content = turn.get("content", turn.get("parts"))
        if isinstance(content, str):
            return content
        for part in content or ():
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                return str(part["text"])
    return ""


# Anthropic's documented custom_id rule (Message Batches: "Create a Message Batch").
_ANTHROPIC_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}\Z")


@attrs.define(eq=False)
class FakeBatch:
    """One batch the server holds: who made it, its requests, and how far it got."""

    provider: str
    id: str
    #: ``(custom_id, request body)`` in input order.
    items: list[tuple[str, dict[str, Any]]]
    metadata: dict[str, Any] = attrs.Factory(dict)
    polls: int = 0
    cancelled: bool = False
    status: str = "in_progress"
    output_file: Optional[str] = None
    error_file: Optional[str] = None
    #: Each request with its answer, fixed when the batch ends (``answer`` runs once each).
    outcome: Optional[list[tuple[str, dict[str, Any], Optional[Answer]]]] = None


class BatchServer:
    """A threaded fake of OpenAI's, Anthropic's and Gemini's batch endpoints on 127.0.0.1.

    Point a model at it (``Providers.openai(base_url=server.url + "/v1")``,
    ``Providers.anthropic(base_url=server.url)``, ``Providers.gemini(base_url=server.url +
    "/v1beta")``) and run ``batch.run(model, requests, via="provider")``. Example::

        with BatchServer(polls=2) as server:
            model = Providers.openai(api_key="sk-test", base_url=server.url + "/v1")
            batch.run(model, requests, out="out.jsonl", via="provider", poll_interval=0.01)
            assert len(server.batches) == 1
    """

    def __init__(
        self,
        *,
        answer: Callable[[str, str, Mapping[str, Any]], Answer] = _echo,
        polls: int = 1,
        shuffle: bool = False,
        expire: bool = False,
        reject: Iterable[str] = (),
        poll_failures: int = 0,
        lines: Optional[Callable[[str, list[bytes]], list[bytes]]] = None,
        download: str = "",
        lose_creates: int = 0,
        seed: int = 0,
    ) -> None:
        self.answer = answer
        #: Status checks a batch answers "in progress" before it ends.
        self.polls = polls
        self.shuffle = shuffle
        self.expire = expire
        self.reject = frozenset(reject)
        #: Status checks still to be answered 500 (one fewer per check).
        self.poll_failures = poll_failures
        #: Rewrites the result lines of an ended batch, ``(provider, lines) -> lines`` (OpenAI's
        #: output file, Anthropic's results): what a lying provider sends.
        self.lines = lines
        #: ``"drop"``: a results download closes after half its bytes (its Content-Length
        #: promised all); ``"cut"``: the same with no Content-Length (the close looks like
        #: the end); ``"stall"``: it sends half, then nothing until the server stops.
        self.download = download
        #: Batch creations still to be carried out with their answer lost (the connection
        #: closes before a byte of it is sent).
        self.lose_creates = lose_creates
        self._stopping = threading.Event()
        self._random = random.Random(seed)
        self._lock = threading.Lock()
        #: Every request received, in order.
        self.requests: list[RecordedRequest] = []
        #: Every batch created, in order.
        self.batches: list[FakeBatch] = []
        self._files: dict[str, bytes] = {}
        self._httpd: Optional[ThreadingHTTPServer] = None
        self._thread: Optional[threading.Thread] = None

    # -- lifecycle -------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``: the root every provider's path goes under."""
        assert self._httpd is not None, "start the server first"
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def start(self) -> BatchServer:
        """Listen on a free loopback port and serve from a daemon thread."""
        owner = self

        class Handler(_Handler):
            server_owner = owner

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, name="blazen-batch-server", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the port."""
        self._stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None

    def __enter__(self) -> BatchServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def submitted_ids(self) -> list[str]:
        """Every custom id of every batch created, in order (an id twice: sent twice)."""
        with self._lock:
            return [cid for b in self.batches for cid, _ in b.items]

    # -- routing ---------------------------------------------------------------------------

    def handle(self, method: str, path: str, headers: Mapping[str, str], body: bytes) -> Any:
        """One request: ``(status, content type, body bytes)``."""
        with self._lock:
            self.requests.append(
                RecordedRequest(method=method, path=path, headers=dict(headers), body=body)
            )
            route = path.split("?", 1)[0]
            if route.startswith("/v1/files") or route.startswith("/v1/batches"):
                return self._openai(method, route, headers, body)
            if route.startswith("/v1/messages/batches"):
                return self._anthropic(method, route, headers, body)
            if route.startswith("/v1beta/"):
                return self._gemini(method, route, headers, body)
            return _json(404, {"error": {"message": f"no route {path}", "type": "not_found"}})

    def fault(self, method: str, path: str) -> str:
        """How the answer to this request is broken: ``""``, ``"lose"``, ``"drop"``, ``"stall"``."""
        route = path.split("?", 1)[0]
        creates = (
            route in ("/v1/batches", "/v1/messages/batches")
            or route.endswith(":batchGenerateContent")
        )
        with self._lock:
            if method == "POST" and creates and self.lose_creates > 0:
                self.lose_creates -= 1
                return "lose"
        download = route.endswith("/results") or (
            route.startswith("/v1/files/") and route.endswith("/content")
        )
        return self.download if method == "GET" and download else ""

    def wait_stopping(self, seconds: float) -> None:
        """Block until the server stops (a stalled answer's wait), at most ``seconds``."""
        self._stopping.wait(seconds)

    def _lied(self, provider: str, lines: list[bytes]) -> list[bytes]:
        return self.lines(provider, lines) if self.lines is not None else lines

    def _poll(self, batch: FakeBatch) -> Optional[Any]:
        """Count one status check; the 500 it must answer, if any."""
        if self.poll_failures > 0:
            self.poll_failures -= 1
            return _json(500, {"error": {"message": "internal error", "type": "api_error"}})
        batch.polls += 1
        return None

    def _outcome(self, batch: FakeBatch) -> list[tuple[str, dict[str, Any], Optional[Answer]]]:
        """Each request with its answer, None for one the batch never reached."""
        if batch.outcome is not None:
            return batch.outcome
        reached = len(batch.items)
        if self.expire:
            reached = len(batch.items) // 2
        elif batch.cancelled:
            reached = 0
        out: list[tuple[str, dict[str, Any], Optional[Answer]]] = []
        for n, (cid, body) in enumerate(batch.items):
            if n >= reached:
                out.append((cid, body, None))
            elif cid in self.reject:
                out.append((cid, body, BatchFailure(message=f"rejected {cid}")))
            else:
                out.append((cid, body, self.answer(batch.provider, cid, body)))
        batch.outcome = out
        return out

    def _ended(self, batch: FakeBatch) -> bool:
        return batch.cancelled or batch.polls > self.polls

    # -- OpenAI: Files + Batches -----------------------------------------------------------

    def _openai(self, method: str, route: str, headers: Mapping[str, str], body: bytes) -> Any:
        if not _header(headers, "authorization").startswith("Bearer "):
            return _json(401, {"error": {"message": "no API key", "type": "invalid_request_error"}})
        parts = route.strip("/").split("/")
        if method == "POST" and parts == ["v1", "files"]:
            return self._openai_upload(headers, body)
        if method == "GET" and len(parts) == 4 and parts[:2] == ["v1", "files"]:
            data = self._files.get(parts[2])
            if data is None:
                return _json(404, {"error": {"message": "no such file", "type": "not_found"}})
            return 200, "application/octet-stream", data
        if method == "POST" and parts == ["v1", "batches"]:
            return self._openai_create(json.loads(body))
        if method == "GET" and parts == ["v1", "batches"]:
            views = [self._openai_view(b) for b in reversed(self.batches) if b.provider == "openai"]
            return _json(200, {"object": "list", "data": views, "has_more": False})
        batch = self._find("openai", parts[2] if len(parts) >= 3 else "")
        if batch is None:
            return _json(404, {"error": {"message": "no such batch", "type": "not_found"}})
        if method == "GET" and len(parts) == 3:
            failure = self._poll(batch)
            if failure is not None:
                return failure
            return _json(200, self._openai_view(batch))
        if method == "POST" and len(parts) == 4 and parts[3] == "cancel":
            batch.cancelled = True
            return _json(200, self._openai_view(batch))
        return _json(404, {"error": {"message": "no route", "type": "not_found"}})

    def _openai_upload(self, headers: Mapping[str, str], body: bytes) -> Any:
        fields = _multipart(_header(headers, "content-type"), body)
        if fields.get("purpose") != b"batch" or "file" not in fields:
            return _json(400, {"error": {"message": "purpose=batch and a file are required"}})
        file_id = f"file-{len(self._files) + 1:06d}"
        self._files[file_id] = fields["file"]
        return _json(
            200,
            {
                "id": file_id,
                "object": "file",
                "bytes": len(fields["file"]),
                "created_at": 1_764_000_000,
                "filename": "batch.jsonl",
                "purpose": "batch",
            },
        )

    def _openai_create(self, req: dict[str, Any]) -> Any:
        data = self._files.get(req.get("input_file_id", ""))
        if data is None:
            return _json(400, {"error": {"message": "unknown input_file_id"}})
        if req.get("completion_window") != "24h":
            return _json(400, {"error": {"message": "completion_window must be 24h"}})
        endpoint = req.get("endpoint")
        items: list[tuple[str, dict[str, Any]]] = []
        errors = []
        for n, line in enumerate(data.splitlines(), 1):
            row = json.loads(line)
            if row.get("method") != "POST" or row.get("url") != endpoint:
                errors.append({"code": "invalid_url", "line": n, "message": "url != endpoint"})
            if row["body"].get("stream"):
                errors.append(
                    {"code": "invalid_body", "line": n, "message": "stream is not allowed"}
                )
            items.append((row["custom_id"], row["body"]))
        if len({cid for cid, _ in items}) != len(items):
            errors.append({"code": "duplicate_custom_id", "line": None, "message": "duplicate"})
        batch = FakeBatch(
            provider="openai",
            id=f"batch_{len(self.batches) + 1:06d}",
            items=items,
            metadata={**(req.get("metadata") or {}), "_endpoint": endpoint},
        )
        self.batches.append(batch)
        if errors:
            batch.status = "failed"
            batch.metadata["_errors"] = errors
        return _json(200, self._openai_view(batch))

    def _openai_view(self, batch: FakeBatch) -> dict[str, Any]:
        if batch.status not in ("failed", "completed", "expired", "cancelled") and self._ended(
            batch
        ):
            self._openai_finish(batch)
        counts = {"total": len(batch.items), "completed": 0, "failed": 0}
        if batch.status in ("completed", "expired", "cancelled"):
            for _cid, _body, ans in self._outcome(batch):
                counts["completed" if isinstance(ans, str) else "failed"] += 1
        errors = batch.metadata.get("_errors")
        return {
            "id": batch.id,
            "object": "batch",
            "endpoint": batch.metadata.get("_endpoint", "/v1/chat/completions"),
            "errors": {"object": "list", "data": errors} if errors else None,
            "input_file_id": "file-in",
            "completion_window": "24h",
            "status": batch.status
            if batch.status != "in_progress" or batch.polls
            else "validating",
            "output_file_id": batch.output_file,
            "error_file_id": batch.error_file,
            "created_at": 1_764_000_000,
            "request_counts": counts,
            "metadata": {k: v for k, v in batch.metadata.items() if not k.startswith("_")},
        }

    def _openai_finish(self, batch: FakeBatch) -> None:
        ok: list[bytes] = []
        bad: list[bytes] = []
        for n, (cid, body, ans) in enumerate(self._outcome(batch)):
            row: dict[str, Any] = {"id": f"batch_req_{n}", "custom_id": cid}
            if isinstance(ans, str):
                row["response"] = {
                    "status_code": 200,
                    "request_id": f"req_{n}",
                    "body": _openai_response(body, ans, n)
                    if batch.metadata.get("_endpoint") == "/v1/responses"
                    else _openai_completion(body, ans, n),
                }
                row["error"] = None
                ok.append(json.dumps(row).encode())
            elif isinstance(ans, BatchFailure):
                row["response"] = {
                    "status_code": ans.status,
                    "request_id": f"req_{n}",
                    "body": {"error": {"message": ans.message, "type": ans.type, "code": None}},
                }
                row["error"] = None
                bad.append(json.dumps(row).encode())
            else:
                code = "batch_cancelled" if batch.cancelled else "batch_expired"
                row["response"] = None
                row["error"] = {"code": code, "message": "This request could not be executed."}
                bad.append(json.dumps(row).encode())
        if self.shuffle:
            self._random.shuffle(ok)
            self._random.shuffle(bad)
        ok = self._lied("openai", ok)
        if ok:
            batch.output_file = f"file-out-{batch.id}"
            self._files[batch.output_file] = b"\n".join(ok) + b"\n"
        if bad:
            batch.error_file = f"file-err-{batch.id}"
            self._files[batch.error_file] = b"\n".join(bad) + b"\n"
        batch.status = "cancelled" if batch.cancelled else "expired" if self.expire else "completed"

    # -- Anthropic: Message Batches --------------------------------------------------------

    def _anthropic(self, method: str, route: str, headers: Mapping[str, str], body: bytes) -> Any:
        # A key as x-api-key or (as the newest SDKs send it) a bearer token, and a version.
        keyed = _header(headers, "x-api-key") or _header(headers, "authorization")
        if not keyed or not _header(headers, "anthropic-version"):
            return _json(
                401,
                {"type": "error", "error": {"type": "authentication_error", "message": "no key"}},
            )
        parts = route.strip("/").split("/")
        if method == "POST" and len(parts) == 3:
            return self._anthropic_create(json.loads(body))
        if method == "GET" and len(parts) == 3:
            data = [self._anthropic_view(b) for b in reversed(self.batches)]
            return _json(200, {"data": data, "has_more": False})
        batch = self._find("anthropic", parts[3] if len(parts) >= 4 else "")
        if batch is None:
            return _json(
                404, {"type": "error", "error": {"type": "not_found_error", "message": "none"}}
            )
        if method == "GET" and len(parts) == 4:
            failure = self._poll(batch)
            if failure is not None:
                return failure
            return _json(200, self._anthropic_view(batch))
        if method == "POST" and parts[-1] == "cancel":
            batch.cancelled = True
            return _json(200, self._anthropic_view(batch))
        if method == "GET" and parts[-1] == "results":
            if not self._ended(batch):
                return _json(
                    400,
                    {
                        "type": "error",
                        "error": {"type": "invalid_request_error", "message": "not ended"},
                    },
                )
            return 200, "application/binary", self._anthropic_results(batch)
        return _json(404, {"type": "error", "error": {"type": "not_found_error", "message": "?"}})

    def _anthropic_create(self, req: dict[str, Any]) -> Any:
        items = []
        for row in req.get("requests") or []:
            cid = row.get("custom_id", "")
            params = row.get("params")
            if not _ANTHROPIC_ID.match(cid) or not isinstance(params, dict):
                return _json(
                    400,
                    {
                        "type": "error",
                        "error": {
                            "type": "invalid_request_error",
                            "message": f"requests: custom_id {cid!r} must match "
                            "^[a-zA-Z0-9_-]{1,64}$",
                        },
                    },
                )
            if params.get("stream"):
                return _json(
                    400,
                    {
                        "type": "error",
                        "error": {"type": "invalid_request_error", "message": "no streaming"},
                    },
                )
            items.append((cid, params))
        if not items or len({c for c, _ in items}) != len(items):
            return _json(
                400,
                {
                    "type": "error",
                    "error": {"type": "invalid_request_error", "message": "custom ids unique"},
                },
            )
        batch = FakeBatch(
            provider="anthropic", id=f"msgbatch_{len(self.batches) + 1:06d}", items=items
        )
        self.batches.append(batch)
        return _json(200, self._anthropic_view(batch))

    def _anthropic_view(self, batch: FakeBatch) -> dict[str, Any]:
        ended = self._ended(batch)
        counts = {"processing": 0, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
        if ended:
            for _cid, _body, ans in self._outcome(batch):
                key = (
                    "succeeded"
                    if isinstance(ans, str)
                    else "errored"
                    if isinstance(ans, BatchFailure)
                    else "canceled"
                    if batch.cancelled
                    else "expired"
                )
                counts[key] += 1
        else:
            counts["processing"] = len(batch.items)
        return {
            "id": batch.id,
            "type": "message_batch",
            "processing_status": "ended"
            if ended
            else "canceling"
            if batch.cancelled
            else "in_progress",
            "request_counts": counts,
            "ended_at": "2026-12-01T00:00:00Z" if ended else None,
            "created_at": "2026-12-01T00:00:00Z",
            "expires_at": "2026-12-02T00:00:00Z",
            "cancel_initiated_at": None,
            "results_url": f"{self._root()}/v1/messages/batches/{batch.id}/results"
            if ended
            else None,
        }

    def _anthropic_results(self, batch: FakeBatch) -> bytes:
        lines = []
        for n, (cid, body, ans) in enumerate(self._outcome(batch)):
            result: dict[str, Any]
            if isinstance(ans, str):
                result = {"type": "succeeded", "message": _anthropic_message(body, ans, n)}
            elif isinstance(ans, BatchFailure):
                result = {
                    "type": "errored",
                    "error": {"type": "error", "error": {"type": ans.type, "message": ans.message}},
                }
            else:
                result = {"type": "canceled" if batch.cancelled else "expired"}
            lines.append(json.dumps({"custom_id": cid, "result": result}).encode())
        if self.shuffle:
            self._random.shuffle(lines)
        return b"\n".join(self._lied("anthropic", lines)) + b"\n"

    # -- Gemini: batch mode with inline requests -------------------------------------------

    def _gemini(self, method: str, route: str, headers: Mapping[str, str], body: bytes) -> Any:
        if not _header(headers, "x-goog-api-key"):
            return _json(
                403, {"error": {"code": 403, "message": "no key", "status": "PERMISSION_DENIED"}}
            )
        rest = route[len("/v1beta/") :]
        if (
            method == "POST"
            and rest.startswith("models/")
            and rest.endswith(":batchGenerateContent")
        ):
            model = rest[: -len(":batchGenerateContent")]
            return self._gemini_create(model, json.loads(body))
        if method == "GET" and rest == "batches":
            ops = [self._gemini_view(b) for b in reversed(self.batches) if b.provider == "gemini"]
            return _json(200, {"operations": ops})
        name, _, verb = rest.partition(":")
        batch = self._find("gemini", name)
        if batch is None:
            return _json(
                404, {"error": {"code": 404, "message": "not found", "status": "NOT_FOUND"}}
            )
        if method == "GET" and not verb:
            failure = self._poll(batch)
            if failure is not None:
                return failure
            return _json(200, self._gemini_view(batch))
        if method == "POST" and verb == "cancel":
            batch.cancelled = True
            return _json(200, {})
        return _json(404, {"error": {"code": 404, "message": "no route", "status": "NOT_FOUND"}})

    def _gemini_create(self, model: str, req: dict[str, Any]) -> Any:
        spec = req.get("batch") or {}
        inline = ((spec.get("inputConfig") or {}).get("requests") or {}).get("requests") or []
        items = []
        for n, row in enumerate(inline):
            key = (row.get("metadata") or {}).get("key") or str(n)
            items.append((key, row.get("request") or {}))
        if not items:
            return _json(
                400,
                {"error": {"code": 400, "message": "no requests", "status": "INVALID_ARGUMENT"}},
            )
        batch = FakeBatch(
            provider="gemini",
            id=f"batches/{len(self.batches) + 1:06d}",
            items=items,
            metadata={"model": model, "displayName": spec.get("displayName", "")},
        )
        self.batches.append(batch)
        return _json(200, self._gemini_view(batch))

    def _gemini_view(self, batch: FakeBatch) -> dict[str, Any]:
        ended = self._ended(batch)
        state = (
            "BATCH_STATE_CANCELLED"
            if batch.cancelled
            else "BATCH_STATE_EXPIRED"
            if ended and self.expire
            else "BATCH_STATE_SUCCEEDED"
            if ended
            else "BATCH_STATE_RUNNING"
            if batch.polls
            else "BATCH_STATE_PENDING"
        )
        meta = {
            "@type": "type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatch",
            "name": batch.id,
            "model": batch.metadata["model"],
            "displayName": batch.metadata["displayName"],
            "state": state,
        }
        op: dict[str, Any] = {"name": batch.id, "metadata": meta}
        if ended:
            op["done"] = True
            if state == "BATCH_STATE_SUCCEEDED":
                answers = []
                for n, (cid, body, ans) in enumerate(self._outcome(batch)):
                    entry: dict[str, Any] = {"metadata": {"key": cid}}
                    if isinstance(ans, str):
                        entry["response"] = _gemini_response(body, ans, n)
                    elif isinstance(ans, BatchFailure):
                        # A google.rpc.Status: its code is a gRPC code, not an HTTP status.
                        entry["error"] = {"code": _GRPC.get(ans.status, 2), "message": ans.message}
                    answers.append(entry)
                # Gemini's inlined responses come in input order (Batch API guide).
                op["response"] = {
                    "@type": "type.googleapis.com/google.ai.generativelanguage.v1main."
                    "GenerateContentBatchOutput",
                    "inlinedResponses": {"inlinedResponses": answers},
                }
        return op

    # -- helpers ---------------------------------------------------------------------------

    def _find(self, provider: str, batch_id: str) -> Optional[FakeBatch]:
        return next((b for b in self.batches if b.provider == provider and b.id == batch_id), None)

    def _root(self) -> str:
        return self.url if self._httpd is not None else ""


class _Handler(BaseHTTPRequestHandler):
    server_owner: BatchServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        del format, args

    def _serve(self, method: str) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        owner = self.server_owner
        fault = owner.fault(method, self.path)
        status, ctype, data = owner.handle(method, self.path, dict(self.headers.items()), body)
        if fault == "lose":  # done, but the answer is lost on the way
            self.close_connection = True
            return
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        if fault == "cut" and status == 200:
            # No length: the body ends where the connection closes, half-way, mid-line.
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(data[: len(data) // 2])
            self.close_connection = True
            return
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if fault and status == 200:
            self.wfile.write(data[: len(data) // 2])
            self.wfile.flush()
            if fault == "stall":
                owner.wait_stopping(120)
            self.close_connection = True
            return
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")


# HTTP status -> google.rpc.Code (googleapis google/rpc/code.proto).
_GRPC = {400: 3, 401: 16, 403: 7, 404: 5, 409: 10, 429: 8, 500: 13, 503: 14, 504: 4}


def _json(status: int, obj: Any) -> tuple[int, str, bytes]:
    return status, "application/json", json.dumps(obj).encode()


def _header(headers: Mapping[str, str], name: str) -> str:
    return next((v for k, v in headers.items() if k.lower() == name), "")


def _multipart(ctype: str, body: bytes) -> dict[str, bytes]:
    """The fields of a ``multipart/form-data`` body (RFC 7578), by name."""
    match = re.search(r'boundary="?([^";]+)"?', ctype)
    if match is None:
        return {}
    fields: dict[str, bytes] = {}
    for part in body.split(b"--" + match.group(1).encode())[1:]:
        if part.startswith(b"--"):
            break
        head, _, value = part.partition(b"\r\n\r\n")
        name = re.search(rb'name="([^"]+)"', head)
        if name is not None:
            fields[name.group(1).decode()] = value[:-2] if value.endswith(b"\r\n") else value
    return fields


def _openai_completion(body: Mapping[str, Any], text: str, n: int) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-batch{n}",
        "object": "chat.completion",
        "created": 1_764_000_000,
        "model": body.get("model", "gpt-4o-mini"),
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text, "refusal": None},
                "logprobs": None,
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


def _openai_response(body: Mapping[str, Any], text: str, n: int) -> dict[str, Any]:
    # A Responses API response object (a batch line of endpoint /v1/responses).
    return {
        "id": f"resp_batch{n}",
        "object": "response",
        "created_at": 1_764_000_000,
        "status": "completed",
        "model": body.get("model", "gpt-5"),
        "output": [
            {
                "type": "message",
                "id": f"msg_batch{n}",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
        ],
        "usage": {
            "input_tokens": 10,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 5,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 15,
        },
    }


def _anthropic_message(body: Mapping[str, Any], text: str, n: int) -> dict[str, Any]:
    return {
        "id": f"msg_batch{n}",
        "type": "message",
        "role": "assistant",
        "model": body.get("model", "claude-sonnet-4-6"),
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }


def _gemini_response(body: Mapping[str, Any], text: str, n: int) -> dict[str, Any]:
    del body
    return {
        "candidates": [
            {"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP"}
        ],
        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
        "modelVersion": "gemini-2.5-flash",
        "responseId": f"resp-batch{n}",
    }
