"""An asyncio service that relays each delta to many clients as it arrives.

A small TCP server: every client that connects sends a prompt line and receives the answer
streamed back, one delta per write. Streaming.complete_async runs the callbacks on the
event loop, so a coroutine callback can write to the client directly (and is awaited before
the next delta arrives: a slow client slows its own stream, not the others).

    python examples/async_relay.py          # starts the service and five demo clients
"""

from __future__ import annotations

import asyncio
import sys

from _demo import model_or_demo, paced

from blazen import BlazenError, Llm, StreamChunk, Streaming
from blazen.testing import Reply, openai_sse

model = model_or_demo(
    default=Reply.sse(paced(openai_sse(["Relayed ", "one ", "delta ", "at ", "a ", "time."]), 0.03))
)


async def serve_client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    prompt = (await reader.readline()).decode().strip()
    req = Llm.completion_request([Llm.user(prompt)], max_tokens=128)

    async def on_chunk(chunk: StreamChunk) -> None:
        if chunk.content_delta:
            writer.write(chunk.content_delta.encode())
            await writer.drain()

    def on_error(err: BlazenError) -> None:
        writer.write(f"\n[error: {err.kind}: {err.message}]".encode())

    await Streaming.complete_async(model, req, on_chunk=on_chunk, on_error=on_error, timeout=60)
    writer.write(b"\n")
    await writer.drain()
    writer.close()


async def client(port: int, n: int) -> str:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"Say something nice to client {n}.\n".encode())
    await writer.drain()
    answer = (await reader.read()).decode().strip()
    writer.close()
    return f"client {n}: {answer}"


async def main() -> None:
    server = await asyncio.start_server(serve_client, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    print(f"[relay listening on 127.0.0.1:{port}]", file=sys.stderr)
    async with server:
        for line in await asyncio.gather(*(client(port, n) for n in range(5))):
            print(line)


asyncio.run(main())
