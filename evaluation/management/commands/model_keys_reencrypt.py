"""Re-encrypt every stored model API key under the current FIELD_ENCRYPTION_KEY (after a key change)."""

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from evaluation.crypto import secret_reencrypt
from evaluation.models import ModelEntry


class Command(BaseCommand):
    help = (
        "Re-encrypt stored model API keys with FIELD_ENCRYPTION_KEY; keys of an earlier key must be readable "
        "through FIELD_ENCRYPTION_KEY_FALLBACKS. Afterwards the fallbacks can be removed."
    )

    def handle(self, *args, **options) -> None:
        changed = 0
        with transaction.atomic():
            for model in ModelEntry.objects.select_for_update().exclude(api_key_encrypted=""):
                try:
                    model.api_key_encrypted = secret_reencrypt(model.api_key_encrypted)
                except ValueError as exc:
                    raise CommandError(f"model {model.name}: {exc}; nothing was changed") from None
                model.save(update_fields=["api_key_encrypted"])
                changed += 1
        self.stdout.write(f"re-encrypted {changed} model API key(s) with the current FIELD_ENCRYPTION_KEY")
