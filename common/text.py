"""Text that a database can store: PostgreSQL refuses a NUL character in a text column and a `\\u0000` escape in a
jsonb one, and no database driver encodes a lone surrogate (`\\ud800`, which a JSON escape in a model's reply
decodes to) as UTF-8; anything a sandbox prints, a model's endpoint returns or a submitted file holds may have
either. Refused, an item's answer or outcome was never recorded and the item was dispatched again forever, holding a
worker slot (attack9's NUL, attack10's surrogate)."""

from __future__ import annotations

from typing import Any

NUL = "\x00"
# What a NUL or a lone surrogate becomes: the replacement character, as a bad byte's decoding gives.
NUL_SHOWN = "\ufffd"


def _text_storable(text: str) -> str:
    if text.isascii():
        return text.replace(NUL, NUL_SHOWN) if NUL in text else text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: each becomes one replacement character
        text = "".join(NUL_SHOWN if "\ud800" <= char <= "\udfff" else char for char in text)
    return text.replace(NUL, NUL_SHOWN) if NUL in text else text


def storable(value: Any) -> Any:
    """`value` with every NUL and lone surrogate in its strings (dict keys and nested lists and dicts included)
    replaced; `value` itself when it holds none, so a clean value is never copied."""
    if isinstance(value, str):
        return _text_storable(value)
    if isinstance(value, list | tuple):
        cleaned = [storable(item) for item in value]
        if all(new is old for new, old in zip(cleaned, value, strict=True)):
            return value
        return type(value)(cleaned) if isinstance(value, list) else tuple(cleaned)
    if isinstance(value, dict):
        pairs = [(storable(key), storable(item)) for key, item in value.items()]
        if all(k is old_k and v is old_v for (k, v), (old_k, old_v) in zip(pairs, value.items(), strict=True)):
            return value
        return dict(pairs)
    return value
