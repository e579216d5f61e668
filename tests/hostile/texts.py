"""What an error could show anyone: the hostile tests look for the key in all of it."""

from __future__ import annotations

import contextlib
import pickle
import traceback


def everything_about(err: BaseException) -> str:
    """Every text of ``err``: its chain's str, repr, args and fields, a traceback, a pickle."""
    parts = ["".join(traceback.format_exception(type(err), err, err.__traceback__))]
    node: BaseException | None = err
    seen = set()
    while node is not None and id(node) not in seen:
        seen.add(id(node))
        parts += [str(node), repr(node), repr(node.args), repr(vars(node))]
        node = node.__cause__ or node.__context__
    # An exception of the caller's own may not pickle: that is not blazen's to judge.
    with contextlib.suppress(Exception):
        parts.append(repr(pickle.loads(pickle.dumps(err)).__dict__))
    return "\n".join(parts)
