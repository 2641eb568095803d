"""Encryption at rest for per-model API keys (Fernet, keyed by FIELD_ENCRYPTION_KEY or derived from SECRET_KEY)."""

from __future__ import annotations

import base64
import hashlib

from cryptography.fernet import Fernet, InvalidToken
from django.conf import settings


def _fernet() -> Fernet:
    secret = settings.FIELD_ENCRYPTION_KEY or settings.SECRET_KEY
    return Fernet(base64.urlsafe_b64encode(hashlib.sha256(secret.encode()).digest()))


def secret_encrypt(plain: str) -> str:
    return _fernet().encrypt(plain.encode()).decode()


def secret_decrypt(token: str) -> str:
    try:
        return _fernet().decrypt(token.encode()).decode()
    except InvalidToken as exc:
        raise ValueError("stored API key cannot be decrypted: was FIELD_ENCRYPTION_KEY changed?") from exc
