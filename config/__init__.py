"""The Django project (the design card's `platform/`; see docs/ARCHITECTURE.md for why it is named config)."""

from .celery import app as celery_app

__all__ = ["celery_app"]
