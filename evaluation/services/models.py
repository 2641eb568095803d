"""The model registry: register and change models, and check that the platform may call a model's endpoint."""

from __future__ import annotations

from datetime import date
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction

from benchmarks.selectors import user_is_maintainer
from common.addresses import AddressRefused, host_addresses_check
from evaluation.errors import EvaluationError
from evaluation.models import EvaluationRun, ModelEntry

if TYPE_CHECKING:
    from evaluation.llm import ModelCall


def user_pays_platform(*, user) -> bool:
    """Whether `user` (None: the platform itself, a command or the scheduler) may spend the platform's provider
    keys and reach private addresses (local inference servers): maintainers only."""
    return user is None or user_is_maintainer(user=user)


def model_endpoint_check(*, model: ModelEntry, api_key: str | None, platform_pays: bool | None = None) -> None:
    """Whether the platform may call `model` with `api_key` (its own key, or None) as its owner set it up.

    A user's model brings its own key and an https api_base at a public address; only maintainers' models
    (or the platform's, without owner) use private addresses, and the platform's keys where `platform_pays`
    (default: the owner is a maintainer; at run start: the one starting it is). ValidationError names the
    field at fault.
    """
    from evaluation.llm import api_base_problem, own_key_problem, params_problems, provider_problem  # litellm: heavy

    if model.kind == ModelEntry.Kind.UPLOADED:
        if model.api_base or api_key:
            raise ValidationError(
                {
                    "api_base"
                    if model.api_base
                    else "api_key": "a model of uploaded generations is never called: it takes no api_base or api_key"
                }
            )
        if problems := params_problems(model.default_params, where="default_params"):
            raise ValidationError({"default_params": problems})
        return
    if model.kind != ModelEntry.Kind.LITELLM:
        raise ValidationError({"kind": f"{model.kind} models are built in; register 'litellm' or 'uploaded' models"})
    if not model.litellm_model:
        raise ValidationError({"litellm_model": "litellm_model is required, e.g. 'openai/gpt-4o-mini'"})
    if problems := params_problems(model.default_params, where="default_params"):
        raise ValidationError({"default_params": problems})
    platform = user_pays_platform(user=model.owner)
    if not api_key and not (platform if platform_pays is None else platform_pays):
        raise ValidationError(
            {
                "api_key": "api_key is required: a model without a key of its own would be called "
                "with the platform's provider keys, which only maintainers' models use "
                "(to score answers made elsewhere, register kind 'uploaded')"
            }
        )
    if model.api_base and not platform:
        if problem := api_base_problem(model.api_base):
            raise ValidationError({"api_base": problem})
        parts = urlsplit(model.api_base)
        try:
            host_addresses_check(
                parts.hostname or "",
                parts.port or 443,
                what="api_base host",
                allowed_hosts=settings.MODEL_API_ALLOWED_HOSTS,
            )
        except AddressRefused as exc:
            raise ValidationError({"api_base": str(exc)}) from None
    api_base = model.api_base or None
    problem = (
        own_key_problem(model=model.litellm_model, api_base=api_base, api_key=api_key)
        if api_key
        else provider_problem(model=model.litellm_model, api_base=api_base)
    )
    if problem:
        raise ValidationError({"litellm_model": problem})


@transaction.atomic
def model_register(
    *,
    name: str,
    display_name: str,
    litellm_model: str = "",
    api_base: str = "",
    api_key: str | None = None,
    organization: str = "",
    knowledge_cutoff: date | None = None,
    open_weights: bool = False,
    default_params: dict | None = None,
    owner=None,
    kind: str = ModelEntry.Kind.LITELLM,
) -> ModelEntry:
    """Register a model owned by `owner` (who registers it; None: the platform): see model_endpoint_check."""
    model = ModelEntry(
        name=name,
        display_name=display_name,
        litellm_model=litellm_model,
        api_base=api_base,
        organization=organization,
        knowledge_cutoff=knowledge_cutoff,
        open_weights=open_weights,
        default_params={} if default_params is None else default_params,
        owner=owner,
        kind=kind,
    )
    model.full_clean()
    model_endpoint_check(model=model, api_key=api_key)
    model.api_key_set(api_key)
    model.save()
    return model


MODEL_EDITABLE_FIELDS = (
    "display_name",
    "organization",
    "litellm_model",
    "api_base",
    "knowledge_cutoff",
    "open_weights",
    "default_params",
)
# What a run snapshots at its start: these cannot change while a run of the model is queued or running.
MODEL_ENDPOINT_FIELDS = ("litellm_model", "api_base", "default_params")


class ModelInUse(EvaluationError):
    """A change to a model's endpoint while a run of it is queued or running."""

    status = 409
    code = "model_in_use"


def model_endpoint_unchanged_check(*, model: ModelEntry, changes: dict) -> None:
    """Refuse a change of the model's endpoint (model string, api_base, default parameters) while any run of it is
    queued or running, naming the runs. Callers hold the model's row lock, which run_start takes too."""
    changed = [field for field in MODEL_ENDPOINT_FIELDS if field in changes and changes[field] != getattr(model, field)]
    if not changed:
        return
    active = list(
        EvaluationRun.objects.filter(
            model=model, status__in=(EvaluationRun.Status.QUEUED, EvaluationRun.Status.RUNNING)
        )
        .order_by("pk")
        .values_list("pk", flat=True)
    )
    if active:
        runs = ", ".join(f"#{pk}" for pk in active)
        raise ModelInUse(
            f"{', '.join(changed)} of model {model.name} cannot change while run{'s' if len(active) > 1 else ''}"
            f" {runs} {'are' if len(active) > 1 else 'is'} queued or running: each run calls the "
            f"endpoint it started with; cancel {'them' if len(active) > 1 else 'it'} or wait until "
            f"{'they finish' if len(active) > 1 else 'it finishes'}, then change the model"
        )


@transaction.atomic
def model_update(
    *, model: ModelEntry, api_key: str | None = None, clear_api_key: bool = False, **changes
) -> ModelEntry:
    """Change a model's description or call settings; its name (the id runs refer to) never changes, nor its
    endpoint while a run of it is active (model_endpoint_unchanged_check)."""
    unknown = set(changes) - set(MODEL_EDITABLE_FIELDS)
    if unknown:
        raise EvaluationError(f"cannot change {', '.join(sorted(unknown))} of a model")
    model = ModelEntry.objects.select_for_update().get(pk=model.pk)
    model_endpoint_unchanged_check(model=model, changes=changes)
    for field, value in changes.items():
        setattr(model, field, value)
    if api_key or clear_api_key:
        model.api_key_set(api_key)
    model.full_clean()
    model_endpoint_check(model=model, api_key=model.api_key_get())
    model.save()
    return model


def model_call(*, run: EvaluationRun) -> ModelCall:
    """How the run's model is called: the model string, endpoint and parameters the run snapshot at its start, with
    the model's own key only, unless maintainers run it on the platform's keys.

    Checked again here, where the call happens, since owners, keys and maintainers change after run start.
    """
    from evaluation.llm import ModelCall

    model = run.model
    api_key = model.api_key_get()
    if not api_key and not user_pays_platform(user=run.created_by):
        raise EvaluationError(
            f"model {model.name} has no API key of its own, and only maintainers run models on the platform's keys"
        )
    try:
        return ModelCall(
            model=run.litellm_model,
            api_base=run.api_base or None,
            api_key=api_key,
            params=run.call_params,
            platform_key=not api_key,
            private_addresses=user_pays_platform(user=model.owner),
            exempt_hosts=tuple(settings.MODEL_API_ALLOWED_HOSTS),
        )
    except ValueError as exc:  # settings stored before they were checked
        raise EvaluationError(f"run {run.pk} cannot call model {model.name}: {exc}") from None
