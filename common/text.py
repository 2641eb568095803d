"""Text that a database can store: PostgreSQL refuses a NUL character in a text column and a `\\u0000` escape in a
jsonb one, and anything a sandbox prints or a model's endpoint returns may hold one. Refused, the item's outcome was
never recorded and its run was dispatched again forever, holding a worker slot (attack9)."""

from __future__ import annotations

from typing import Any

NUL = "\x00"
# What a NUL becomes: the replacement character says a character was there, as a bad byte's decoding does.
NUL_SHOWN = "\ufffd"


def nul_free(value: Any) -> Any:
    """`value` with every NUL in its strings (dict keys and nested lists and dicts included) replaced; `value`
    itself when it holds none, so a clean value is never copied."""
    if isinstance(value, str):
        return value.replace(NUL, NUL_SHOWN) if NUL in value else value
    if isinstance(value, list | tuple):
        cleaned = [nul_free(item) for item in value]
        if all(new is old for new, old in zip(cleaned, value, strict=True)):
            return value
        return type(value)(cleaned) if isinstance(value, list) else tuple(cleaned)
    if isinstance(value, dict):
        pairs = [(nul_free(key), nul_free(item)) for key, item in value.items()]
        if all(k is old_k and v is old_v for (k, v), (old_k, old_v) in zip(pairs, value.items(), strict=True)):
            return value
        return dict(pairs)
    return value
