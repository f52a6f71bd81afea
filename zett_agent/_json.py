"""Checking ``metadata`` and ``tags`` of a request at the call.

``tags`` classify a request and usually end up in a database, so they must be a plain JSON
object (non-empty string keys; no tuple, set, object, NaN or infinity) and are copied: the
caller changing its dict later does not change the running request.

``metadata`` needs string keys, but its values are the caller's business: it is the
in-process channel between the code that starts a request and its extensions, which may
hand over live objects (a list the caller keeps appending to, messages already loaded), so
it is neither checked for JSON nor deep-copied.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["json_object", "request_metadata", "request_tags"]


def request_metadata(metadata: Mapping[str, Any] | None) -> dict:
    """A shallow copy of ``metadata`` whose keys are checked to be strings."""
    if metadata is None:
        return {}
    if not isinstance(metadata, Mapping):
        raise TypeError(f"metadata must be a mapping, got {type(metadata).__name__}")
    for key in metadata:
        if not isinstance(key, str):
            raise ValueError(f"metadata keys must be strings, got {key!r}")
    return dict(metadata)


def json_object(
    value: Mapping[str, Any] | None, *, field: str, nonblank_keys: bool = False
) -> dict:
    """A JSON-object copy of ``value`` (``{}`` for None); ``ValueError`` names the problem."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise TypeError(f"{field} must be a mapping, got {type(value).__name__}")
    return _object(value, field, nonblank_keys)


def request_tags(tags: Mapping[str, Any] | Iterable[str] | None) -> dict:
    """``tags`` as a JSON object; an iterable of names (the older form) maps each to True."""
    if tags is None:
        return {}
    if isinstance(tags, Mapping):
        return json_object(tags, field="tags", nonblank_keys=True)
    if isinstance(tags, str | bytes):
        raise TypeError("tags must be a mapping (or an iterable of tag names), not a string")
    names = list(tags)
    for name in names:
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"tags keys must be non-empty strings, got {name!r}")
    return dict.fromkeys(names, True)


def _object(value: Mapping[Any, Any], path: str, nonblank_keys: bool) -> dict:
    copied = {}
    for key, item in value.items():
        if not isinstance(key, str) or (nonblank_keys and not key.strip()):
            kind = "non-empty strings" if nonblank_keys else "strings"
            raise ValueError(f"{path} keys must be {kind}, got {key!r}")
        copied[key] = _value(item, f"{path}[{key!r}]")
    return copied


def _value(value: Any, path: str) -> Any:
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        if math.isfinite(value):
            return value
    elif isinstance(value, dict):
        return _object(value, path, False)
    elif isinstance(value, list):
        return [_value(item, f"{path}[{index}]") for index, item in enumerate(value)]
    raise ValueError(f"{path} is not JSON serializable: {value!r} ({type(value).__name__})")
