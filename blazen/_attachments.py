"""Documents, audio and video for a user message: bytes, a file or a URL, checked when built.

A file is read and base64-encoded here, when ``Llm.document``/``audio``/``video`` is called, so a
missing or unreadable file fails at that line of the caller's code, never later inside a
stream. Nothing here touches the network: a URL is kept as a URL for the providers that
fetch documents and videos themselves.
"""

from __future__ import annotations

import base64
import os
import re
from pathlib import Path
from typing import Optional, Union

from ._types import AUDIO_FORMATS, AudioPart, DocumentPart, VideoPart
from .errors import ValidationError

__all__ = ["Source", "load_audio", "load_document", "load_video"]

#: What ``Llm.document``/``audio``/``video`` take: the bytes themselves, or a file's path.
Source = Union[bytes, bytearray, memoryview, str, "os.PathLike[str]"]

_MEDIA_TYPE = r"^[\w.+-]+/[\w.+-]+\Z"


def _read(what: str, source: Source) -> tuple[bytes, Optional[str]]:
    """The bytes of ``source`` and, for a file, its name; every failure says what to pass."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        raw = bytes(source)
        if not raw:
            msg = f"{what} data is empty; pass the file's bytes or its path"
            raise ValidationError(msg)
        return raw, None
    if not isinstance(source, (str, os.PathLike)):
        msg = f"{what} must be bytes or a file path, got {type(source).__name__}"
        raise TypeError(msg)
    path = Path(source)
    try:
        with path.open("rb") as f:
            raw = f.read()
    except IsADirectoryError as exc:
        msg = f"{what} path {str(path)!r:.200} is a directory; pass a file"
        raise ValidationError(msg) from exc
    except FileNotFoundError as exc:
        msg = (
            f"{what} file {str(path)!r:.200} does not exist; pass an existing file's path, "
            "or its content as bytes"
        )
        raise ValidationError(msg) from exc
    except (OSError, ValueError) as exc:
        # PermissionError, a name too long, a NUL in the path...
        msg = f"{what} file {str(path)!r:.200} cannot be read ({exc.__class__.__name__}: {exc})"
        raise ValidationError(msg) from exc
    if not raw:
        msg = f"{what} file {str(path)!r:.200} is empty"
        raise ValidationError(msg)
    return raw, path.name


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def load_document(source: Source, media_type: str, filename: Optional[str]) -> DocumentPart:
    """A :class:`DocumentPart` from bytes, a path or an http(s) URL (kept as a URL)."""
    if not isinstance(media_type, str) or not re.match(_MEDIA_TYPE, media_type):
        msg = f"media_type must be a type such as 'application/pdf', got {media_type!r:.60}"
        raise ValidationError(msg)
    if filename is not None and (not isinstance(filename, str) or not filename):
        msg = f"filename must be a non-empty string or None, got {filename!r:.60}"
        raise TypeError(msg) if not isinstance(filename, str) else ValidationError(msg)
    if isinstance(source, str) and source.startswith(("http://", "https://")):
        return DocumentPart(url=source, media_type=media_type, filename=filename)
    raw, name = _read("document", source)
    if media_type.startswith("text/"):
        # Text documents go to Anthropic as text, not base64: it must be text now, not later.
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            msg = f"a {media_type} document must be UTF-8 text ({exc}); pass its media_type"
            raise ValidationError(msg) from exc
    return DocumentPart(data=_b64(raw), media_type=media_type, filename=filename or name)


def load_audio(source: Source, fmt: str) -> AudioPart:
    """An :class:`AudioPart` from bytes or a path, in ``fmt`` (``"wav"`` or ``"mp3"``)."""
    if fmt not in AUDIO_FORMATS:
        msg = (
            f"audio format must be one of {', '.join(AUDIO_FORMATS)}, got {fmt!r:.60}; "
            "convert the clip to one of them first"
        )
        raise ValidationError(msg)
    if isinstance(source, str) and source.startswith(("http://", "https://")):
        msg = (
            "audio cannot be sent by URL (no provider fetches it); download it and pass the "
            "bytes or the file's path"
        )
        raise ValidationError(msg)
    raw, _ = _read("audio clip", source)
    return AudioPart(data=_b64(raw), format=fmt)


def load_video(source: Source, media_type: str) -> VideoPart:
    """A :class:`VideoPart` from bytes, a path or an http(s) URL (kept as a URL)."""
    if (
        not isinstance(media_type, str)
        or not re.match(_MEDIA_TYPE, media_type)
        or not media_type.startswith("video/")
    ):
        msg = f"media_type must be a video type such as 'video/mp4', got {media_type!r:.60}"
        raise ValidationError(msg)
    if isinstance(source, str) and source.startswith(("http://", "https://")):
        # A Files API URI, a YouTube link or another URL the provider fetches itself.
        return VideoPart(url=source, media_type=media_type)
    raw, _ = _read("video", source)
    return VideoPart(data=_b64(raw), media_type=media_type)
