"""Which endpoints held-out prompts may go to: the one trust rule, asked when a run starts and before each prompt."""

from __future__ import annotations

from django.conf import settings

from benchmarks.selectors import (
    user_is_maintainer,
)
from evaluation.models import (
    EvaluationRun,
    ModelEntry,
)

# Call parameters a model not registered by a maintainer may carry on a held-out run: sampling only, so nothing
# can send the prompt anywhere else or ask the provider to keep it for the key's owner.
HELD_OUT_SAFE_PARAMS = frozenset(
    {
        "temperature",
        "top_p",
        "top_k",
        "max_tokens",
        "max_completion_tokens",
        "seed",
        "stop",
        "presence_penalty",
        "frequency_penalty",
        "reasoning_effort",
    }
)


def _maintainer_owned(model: ModelEntry) -> bool:
    return model.owner is not None and user_is_maintainer(user=model.owner)


def _endpoint_trusted_with_held_out(*, model: ModelEntry, provider: str, api_base: str, params: dict) -> bool:
    """Whether held-out prompts may go to `model` called with this provider, api_base and parameters.

    Calibration models never leave the platform; a model registered by a maintainer is the maintainers' call;
    any other model only on a provider of HELD_OUT_PROVIDERS, at the provider's own address (never the owner's
    api_base) and with sampling parameters only (nothing like `store` that asks the provider to keep the prompt for
    the key's owner).
    """
    if model.kind in (ModelEntry.Kind.REFERENCE, ModelEntry.Kind.PLACEHOLDER):
        return True
    if model.kind != ModelEntry.Kind.LITELLM:
        return False
    if _maintainer_owned(model):
        return True
    return provider in settings.HELD_OUT_PROVIDERS and not api_base and set(params) <= HELD_OUT_SAFE_PARAMS


def model_trusted_with_held_out(*, model: ModelEntry) -> bool:
    """Whether held-out prompts may go to this model as it is set up now: only endpoints maintainers trust."""
    return _endpoint_trusted_with_held_out(
        model=model, provider=model.provider, api_base=model.api_base, params=model.default_params
    )


def run_covers_held_out(*, model: ModelEntry, params: dict | None = None, uploaded: bool = False) -> bool:
    """Whether a new run evaluates held-out items too; uploads and runs of untrusted models cover the public split
    only (a run's own parameters are held to the same sampling-only rule as the model's)."""
    if uploaded:
        return False
    return _endpoint_trusted_with_held_out(
        model=model, provider=model.provider, api_base=model.api_base, params={**model.default_params, **(params or {})}
    )


def run_sends_held_out(*, run: EvaluationRun) -> bool:
    """Whether a held-out prompt of `run` may leave now: asked again before each one, against the endpoint the run
    snapshot at its start (what it really calls), with today's trust (a maintainer's role, HELD_OUT_PROVIDERS)."""
    return run.covers_held_out and _endpoint_trusted_with_held_out(
        model=run.model, provider=run.provider, api_base=run.api_base, params=run.call_params
    )
