"""Refusals of production settings (DEBUG=false) that would leave the site open: placeholders, shared keys."""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urlsplit

from django.core.exceptions import ImproperlyConfigured

# .env.example's placeholders all contain this; a value that still does was never set.
PLACEHOLDER = "change-me"
MIN_FIELD_KEY_LENGTH = 32


def production_secrets_check(
    *, secrets: Mapping[str, str], urls: Mapping[str, str], secret_key: str, field_key: str
) -> None:
    """Raise ImproperlyConfigured listing every placeholder or missing secret, so the site refuses to start."""
    problems = [
        f"{name} is still the placeholder of .env.example ({value!r}); set a secret of your own"
        for name, value in secrets.items()
        if PLACEHOLDER in value.lower()
    ]
    problems += [
        f"the password in {name} is still the placeholder of .env.example; set a secret of your own"
        for name, url in urls.items()
        if url and PLACEHOLDER in (urlsplit(url).password or "").lower()
    ]
    if not field_key:
        problems.append(
            "FIELD_ENCRYPTION_KEY is required in production (a secret of its own, not SECRET_KEY): "
            'python3 -c "import secrets; print(secrets.token_urlsafe(32))"'
        )
    elif field_key == secret_key:
        problems.append(
            "FIELD_ENCRYPTION_KEY must differ from SECRET_KEY (a leaked SECRET_KEY would unlock "
            "every stored model API key)"
        )
    elif len(field_key) < MIN_FIELD_KEY_LENGTH:
        problems.append(f"FIELD_ENCRYPTION_KEY is {len(field_key)} characters; use at least {MIN_FIELD_KEY_LENGTH}")
    if problems:
        raise ImproperlyConfigured("refusing to start with DEBUG=false:\n- " + "\n- ".join(problems))
