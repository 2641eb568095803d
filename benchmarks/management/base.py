"""Base for commands that take `--version NAME` (a benchmark version), which Django reserves by default."""

from django.core.management.base import BaseCommand, CommandParser


class VersionCommand(BaseCommand):
    """Lets `--version` name a benchmark version instead of printing Django's version."""

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: object) -> CommandParser:
        return super().create_parser(prog_name, subcommand, conflict_handler="resolve", **kwargs)
