"""Python types as JSON schema and back, below every other layer. No I/O.

:mod:`.hints` maps type hints to JSON schema and converts JSON values back; :mod:`.check`
checks a value against a schema; :mod:`.docstrings` reads descriptions from docstrings;
:mod:`.output` turns a class into the strict schema of a typed answer and reads it back.
The agent's tools and ``Llm.completion_request(output=...)`` share them.
"""

from __future__ import annotations
