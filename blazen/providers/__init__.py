"""The providers: one wire format per file, and the factories that bind them to a model.

Each wire format (``openai``, ``anthropic``, ``gemini``, ``ollama``) is written on the
provider kit (:mod:`blazen._kit`), as a third party's would be: it builds requests, folds
payloads into a :class:`blazen._kit.StreamState` through a fold object of its own, and
reads error bodies, with no I/O. :data:`PROVIDERS` is the one table of providers that
:class:`Providers`' factories, the command line and the docs' provider page read. The
native wire modules load on first use.
"""

from __future__ import annotations

from .factories import Providers
from .registry import PROVIDERS, ProviderInfo, compat_key_variable, key_variables

__all__ = ["PROVIDERS", "ProviderInfo", "Providers", "compat_key_variable", "key_variables"]
