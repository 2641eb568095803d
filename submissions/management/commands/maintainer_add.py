"""Make an existing account a maintainer (member of the maintainers group)."""

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from benchmarks.services.maintainers import maintainer_grant


class Command(BaseCommand):
    help = "Add a user to the maintainers group, who review submissions and curate versions."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")

    def handle(self, *args, username: str, **options) -> None:
        try:
            user = get_user_model().objects.get(username=username)
        except get_user_model().DoesNotExist as exc:
            raise CommandError(f"no account named {username!r}; sign up first (or use createsuperuser)") from exc
        maintainer_grant(user=user)
        self.stdout.write(f"{username} is now a maintainer")
