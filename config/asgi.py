"""ASGI entry point."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
application = get_asgi_application()

from evaluation.llm import litellm_load  # noqa: E402  (needs the apps loaded)

# Paid by the web process as it starts, not by the first model registration (see litellm_load).
litellm_load()
