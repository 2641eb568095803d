"""The one JSON spelling of a value that hashes agree on (run manifests, environment locks)."""

from __future__ import annotations

import hashlib
import json


def canonical_json(value) -> str:
    """Sorted keys, no spaces, UTF-8, dates as ISO text."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def canonical_hash(value) -> str:
    return hashlib.sha256(canonical_json(value).encode("utf-8")).hexdigest()
