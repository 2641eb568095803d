"""Add a prompt protocol: a template file and the layout of the code part (e.g. the original harness's)."""

from pathlib import Path

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from benchmarks.paper2code import CONTEXT_JOINS, MASKINGS
from benchmarks.services.protocols import protocol_add


def _read(path: Path) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CommandError(f"{path}: cannot read the template: {exc}") from exc


class Command(BaseCommand):
    help = "Add a prompt protocol from a string.Template file ($paper, $code, $name, $loc; $$ for a dollar)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name", help="The protocol's name, e.g. rcb-original.")
        parser.add_argument("--template", type=Path, required=True, help="The prompt template (UTF-8 text).")
        parser.add_argument(
            "--template-without-paper",
            type=Path,
            help="The template of the without-paper ablation (default: the template, with $paper "
            "saying that the paper is not given).",
        )
        parser.add_argument(
            "--masking",
            choices=list(MASKINGS),
            default="standard",
            help="standard: FORMAT.md section 5; original: the original harness's masked file.",
        )
        parser.add_argument(
            "--context-join",
            choices=list(CONTEXT_JOINS),
            default="standard",
            help="standard: context files as they are; original: their lines without line ends.",
        )
        parser.add_argument(
            "--no-masked-header", action="store_true", help='No "## <path>" header before the masked file.'
        )

    def handle(
        self,
        *args,
        name: str,
        template: Path,
        template_without_paper: Path | None,
        masking: str,
        context_join: str,
        no_masked_header: bool,
        **options,
    ) -> None:
        try:
            row = protocol_add(
                name=name,
                template=_read(template),
                template_without_paper=_read(template_without_paper) if template_without_paper else "",
                masking=masking,
                masked_header=not no_masked_header,
                context_join=context_join,
            )
        except ValidationError as exc:
            raise CommandError("; ".join(f"{k}: {' '.join(v)}" for k, v in exc.message_dict.items())) from exc
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(
            f"prompt protocol {row.name}: masking {row.masking}, context join {row.context_join}, "
            f"masked file {'with' if row.masked_header else 'without'} a path header"
        )
