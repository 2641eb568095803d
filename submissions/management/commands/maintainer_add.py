"""Make an existing account a maintainer (member of the maintainers group)."""

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand, CommandError, CommandParser


class Command(BaseCommand):
    help = "Add a user to the maintainers group, who review submissions and curate versions."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")

    def handle(self, *args, username: str, **options) -> None:
        try:
            user = get_user_model().objects.get(username=username)
        except get_user_model().DoesNotExist as exc:
            raise CommandError(f"no account named {username!r}; sign up first (or use createsuperuser)") from exc
        user.groups.add(Group.objects.get_or_create(name=settings.MAINTAINERS_GROUP)[0])
        self.stdout.write(f"{username} is now a maintainer")
