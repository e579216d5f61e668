"""A griffe extension for the API reference: blazen's docstrings are reST, the site Markdown.

It rewrites what Markdown would show as it is: ``Example::`` (a literal block follows)
becomes ``Example:``, and Sphinx roles such as :class:`~blazen.Sink` or :func:`follow`
become inline code. The indented blocks and ``double backticks`` already read as Markdown.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:class|func|meth|attr|data|mod|exc|obj|py:\w+):`~?([^`]+)`")
LITERAL = re.compile(r"::$", re.M)


class RestDocstrings(griffe.Extension):
    """Rewrite each docstring's reST markup into Markdown before it is rendered."""

    def on_object(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            text = ROLE.sub(lambda m: f"`{m.group(1)}`", obj.docstring.value)
            obj.docstring.value = LITERAL.sub(":", text)
