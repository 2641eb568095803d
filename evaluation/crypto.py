"""Encryption at rest for per-model API keys (Fernet, keyed by FIELD_ENCRYPTION_KEY).

FIELD_ENCRYPTION_KEY is required in production; while debugging an unset key falls back to SECRET_KEY (as every
key was derived before, so development databases keep working). FIELD_ENCRYPTION_KEY_FALLBACKS still decrypt:
a site that ran without FIELD_ENCRYPTION_KEY lists its SECRET_KEY there once, runs `model_keys_reencrypt`, and
drops it again.
"""

from __future__ import annotations

import base64
import hashlib

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings


def _fernet_for(secret: str) -> Fernet:
    # Any string is accepted as the secret (sha256 makes the 32-byte key), as it always was.
    return Fernet(base64.urlsafe_b64encode(hashlib.sha256(secret.encode()).digest()))


def _fernet() -> MultiFernet:
    """The current key first (it encrypts), then the fallbacks (they only decrypt)."""
    current = settings.FIELD_ENCRYPTION_KEY or settings.SECRET_KEY
    return MultiFernet([_fernet_for(secret) for secret in (current, *settings.FIELD_ENCRYPTION_KEY_FALLBACKS)])


def secret_encrypt(plain: str) -> str:
    return _fernet().encrypt(plain.encode()).decode()


def secret_decrypt(token: str) -> str:
    try:
        return _fernet().decrypt(token.encode()).decode()
    except InvalidToken as exc:
        raise ValueError(
            "stored API key cannot be decrypted: was FIELD_ENCRYPTION_KEY changed? (list the "
            "earlier key in FIELD_ENCRYPTION_KEY_FALLBACKS)"
        ) from exc


def secret_reencrypt(token: str) -> str:
    """The same secret under the current key (a token of a fallback key becomes one of the current key)."""
    try:
        return _fernet().rotate(token.encode()).decode()
    except InvalidToken as exc:
        raise ValueError("stored API key cannot be decrypted with FIELD_ENCRYPTION_KEY or its fallbacks") from exc
