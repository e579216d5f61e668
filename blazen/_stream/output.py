"""The typed answer of a finished response (``output=``), read once after the last chunk.

Nothing here runs per chunk: the stream folds as it always does, and the worker hands the
assembled response to :func:`with_output` before it reports done. A failure is then the
stream's one terminal error, never an error after a done.
"""

from __future__ import annotations

import attrs

from .._schema.output import OutputSpec, read_output
from .._types import CompletionResponse

__all__ = ["with_output"]


def with_output(spec: OutputSpec, response: CompletionResponse) -> CompletionResponse:
    """``response`` with ``output`` set to its validated typed answer.

    Where the answer came as the forced tool call named ``spec.name`` (Anthropic), that
    call becomes the answer: its arguments are the ``content``, it leaves ``tool_calls``,
    and the finish reason it caused reads ``stop``. A turn that calls the caller's own
    tools instead is returned as it is, ``output`` None. Raises
    :class:`~blazen.OutputValidationError` or :class:`~blazen.RefusalError`.
    """
    content = response.content
    calls = response.tool_calls
    finish = response.finish_reason
    answer = next((c for c in calls if c.name == spec.name), None)
    if answer is None and calls and response.refusal is None:
        # The model called the caller's own tools first (tool_choice "auto"): this turn
        # has no answer yet, so no output; the turn after the tool results will.
        return response
    if answer is not None:
        if not content.strip():
            content = answer.arguments_json
        calls = tuple(c for c in calls if c is not answer)
        if finish == "tool_calls" and not calls:
            finish = "stop"
    value = read_output(spec, content, finish_reason=finish, refusal=response.refusal)
    return attrs.evolve(
        response, content=content, tool_calls=calls, finish_reason=finish, output=value
    )
