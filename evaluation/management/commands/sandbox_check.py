"""Say which sandbox backends work on this machine, and why the others don't.

Exit status: 0 when SANDBOX_BACKEND selects a working backend, 3 when it is `auto` and none works (so
`make run` can fall back to `local` loudly), 1 when the backend it names does not work.
"""

import sys

from django.conf import settings
from django.core.management.base import BaseCommand

from sandbox import BACKENDS, NoSandboxError, SandboxError, backend_class, backend_get

NO_SANDBOX_EXIT = 3


class Command(BaseCommand):
    help = "Print which sandbox backends work here and which one SANDBOX_BACKEND selects (exit 3: auto found none)."

    def handle(self, *args, **options) -> None:
        for name in BACKENDS:
            try:
                ok, reason = backend_class(name)(settings.SANDBOX_CACHE_DIR).available()
            except Exception as exc:  # a backend that cannot even load is just as unavailable
                ok, reason = False, f"{type(exc).__name__}: {exc}"
            self.stdout.write(f"{name:<7} {'works' if ok else 'no':<6} {reason}")
        try:
            backend = backend_get()
            ok, reason = backend.available()
        except NoSandboxError as exc:
            self.stdout.write(f"SANDBOX_BACKEND={settings.SANDBOX_BACKEND} selects: none ({exc})")
            sys.exit(NO_SANDBOX_EXIT)
        except SandboxError as exc:
            ok, reason, backend = False, str(exc), None
        name = backend.name if backend else settings.SANDBOX_BACKEND
        self.stdout.write(
            f"SANDBOX_BACKEND={settings.SANDBOX_BACKEND} selects: {name}"
            + ("" if ok else f", which does not work here ({reason})")
            + (
                " - NO ISOLATION: untrusted code runs as this user, on this host"
                if ok and backend and backend.unsafe
                else ""
            )
        )
        if not ok:
            sys.exit(1)
