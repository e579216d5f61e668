"""The seeds' streaming-greet workflow: a step streams a completion inside a workflow run.

Two variants of the one-step workflow from "Streaming inside a workflow step":

- buffered: the step buffers the tokens and returns them in the StopEvent;
- per-delta: the step publishes each delta as it arrives (``ctx.publish``), and the run's
  ``on_event`` forwards it to a sink (here, the terminal) while the stream is still going.

Set ``BLAZEN_BASE_URL`` (any OpenAI-compatible server) or ``OPENAI_API_KEY`` to ask a real
model; with neither it replays a recorded stream from a local ``blazen.testing.StreamServer``
and says so on stderr. ::

    python examples/streaming_greet.py
"""

from __future__ import annotations

from _demo import model_or_demo, paced

import blazen
from blazen import Event, Llm, StepOutput, Streaming
from blazen.testing import Reply, openai_sse


def buffered(model: blazen.ChatModel, req: blazen.CompletionRequest) -> blazen.Workflow:
    """The seed, as written: buffer every delta, then return one StopEvent."""
    wf = blazen.workflow("streaming_greet").timeout_ms(60_000)

    @wf.step("greet", accepts=["blazen::StartEvent"], emits=["blazen::StopEvent"])
    def greet(_event: Event) -> StepOutput:
        buffer: list[str] = []
        # No error handler: a failed stream raises, and the run fails with a WorkflowError
        # whose __cause__ is the stream's error. The run's timeout_ms reaches this stream
        # without a token being passed.
        Streaming.complete(
            model, req, on_chunk=lambda chunk: buffer.append(chunk.content_delta or "")
        )
        return StepOutput.single(
            Event.create(
                event_type="blazen::StopEvent",
                data={"result": {"content": "".join(buffer)}},
            )
        )

    return wf


def per_delta(model: blazen.ChatModel, req: blazen.CompletionRequest) -> blazen.Workflow:
    """Publish each delta as it arrives; whoever runs the workflow forwards it to a sink."""
    wf = blazen.workflow("streaming_greet_live").timeout_ms(60_000)

    @wf.step("greet", accepts=["blazen::StartEvent"], emits=["blazen::StopEvent"])
    def greet(_event: Event, ctx: blazen.Context) -> Event:
        def forward(chunk: blazen.StreamChunk) -> None:
            if chunk.content_delta:
                ctx.publish(Event.create(event_type="greet::Delta", data=chunk.content_delta))

        resp = Streaming.complete(model, req, on_chunk=forward)
        assert resp is not None  # no error handler: failures raise instead
        return Event.create(
            event_type="blazen::StopEvent", data={"result": {"content": resp.content}}
        )

    return wf


def main() -> None:
    greeting = ["Hello", " there", ",", " lovely", " human", "!"]
    # Two recorded replies: one for each variant.
    model = model_or_demo([Reply.sse(paced(openai_sse(greeting))) for _ in range(2)])
    req = Llm.completion_request(
        [Llm.system("You are a friendly greeter."), Llm.user("Greet me in five words.")],
        max_tokens=64,
    )

    result = buffered(model, req).run()
    print(f"buffered:  {result.result['content']}")

    print("per-delta: ", end="", flush=True)

    def sink(event: Event) -> None:
        if event.event_type == "greet::Delta":
            print(event.data, end="", flush=True)

    result = per_delta(model, req).run(on_event=sink)
    print(f"\n({result.events} events in {result.elapsed_ms:.0f} ms, run {result.run_id})")


if __name__ == "__main__":
    main()
