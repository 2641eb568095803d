from django.apps import AppConfig
from django.db.models.signals import pre_save


def text_fields_storable(sender, instance, raw=False, **kwargs) -> None:
    """Every model's text and JSON values lose their NUL characters and lone surrogates before a save: one place for
    what a sandbox's output, a model's answer or a submitted file may put in any of them (`common.text`)."""
    from common.text import storable

    if raw:  # a fixture's rows are stored as written
        return
    for field in instance._meta.concrete_fields:
        if field.get_internal_type() in ("CharField", "TextField", "JSONField"):
            value = getattr(instance, field.attname)
            cleaned = storable(value)
            if cleaned is not value:
                setattr(instance, field.attname, cleaned)


class OperationsConfig(AppConfig):
    name = "operations"
    verbose_name = "Operations"

    def ready(self) -> None:
        pre_save.connect(text_fields_storable, dispatch_uid="text_fields_storable")
