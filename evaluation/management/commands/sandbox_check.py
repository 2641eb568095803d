"""Say which sandbox backends work on this machine, and why the others don't."""

from django.conf import settings
from django.core.management.base import BaseCommand

from evaluation.sandbox import AUTO_ORDER, SandboxError, backend_class, backend_get


class Command(BaseCommand):
    help = "Print which sandbox backends work here and which one SANDBOX_BACKEND selects."

    def handle(self, *args, **options) -> None:
        for name in AUTO_ORDER:
            try:
                ok, reason = backend_class(name)(settings.SANDBOX_CACHE_DIR).available()
            except Exception as exc:  # a backend that cannot even load is just as unavailable
                ok, reason = False, f"{type(exc).__name__}: {exc}"
            self.stdout.write(f"{name:<7} {'works' if ok else 'no':<6} {reason}")
        try:
            chosen = backend_get().name
        except SandboxError as exc:
            chosen = f"none ({exc})"
        self.stdout.write(f"SANDBOX_BACKEND={settings.SANDBOX_BACKEND} selects: {chosen}")
