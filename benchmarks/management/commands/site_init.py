"""Bring a deployed site to its starting state: the demo release and the first maintainer, from the environment.

Run by the web container on every start, so it changes nothing when both are already there.
"""

import os

from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from benchmarks.models import BenchmarkVersion
from benchmarks.services.maintainers import maintainer_ensure

DEMO_PATH = "benchmarks/demo"


class Command(BaseCommand):
    help = (
        "Load the demo release (DEMO_RELEASE, default demo-1.0.0; empty: none) and create the maintainer "
        "MAINTAINER_USERNAME with MAINTAINER_EMAIL and MAINTAINER_PASSWORD (kept if the account exists)."
    )

    def handle(self, *args: object, **options: object) -> None:
        demo = os.environ.get("DEMO_RELEASE", "demo-1.0.0")
        if demo and not BenchmarkVersion.objects.filter(name=demo).exists():
            call_command("import_pset", DEMO_PATH, version=demo, publish=True, stdout=self.stdout)
        elif demo:
            self.stdout.write(f"demo release {demo} already loaded")
        username = os.environ.get("MAINTAINER_USERNAME", "")
        if not username:
            self.stdout.write("no MAINTAINER_USERNAME: no maintainer account created")
            return
        password = os.environ.get("MAINTAINER_PASSWORD", "")
        if len(password) < 12:
            raise CommandError("MAINTAINER_PASSWORD must be set, at least 12 characters (see .env.example)")
        _, created = maintainer_ensure(
            username=username, email=os.environ.get("MAINTAINER_EMAIL", ""), password=password
        )
        self.stdout.write(f"maintainer {username} {'created' if created else 'already exists (password kept)'}")
