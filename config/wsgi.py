"""WSGI entry point."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
application = get_wsgi_application()

from evaluation.llm import litellm_load  # noqa: E402  (needs the apps loaded)

# Paid by the web process as it starts, not by the first model registration (see litellm_load).
litellm_load()
