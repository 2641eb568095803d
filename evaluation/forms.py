"""The web forms that register a model, start a run and upload generations; each hands its values to the service
the API calls."""

from __future__ import annotations

from django import forms
from django.utils.html import escape, format_html

from benchmarks.models import BenchmarkVersion, PromptProtocol
from evaluation.harbor.imports import JOB_ARCHIVE_COMMAND
from evaluation.models import RUN_MODES, ModelEntry
from evaluation.run_modes import run_mode
from evaluation.services import MAX_REPEAT, MAX_SAMPLES, UPLOAD_FORMAT, UPLOAD_FORMAT_AGENT_HTML
from evaluation.services.uploads import AGENT_RUNS_GUIDE

PARAMS_HELP = (
    'JSON, e.g. {"temperature": 0, "max_tokens": 2048}. Allowed: temperature, top_p, top_k, max_tokens, '
    "max_completion_tokens, seed, stop, presence_penalty, frequency_penalty, reasoning_effort."
)


class ParamsField(forms.JSONField):
    """A JSON object of generation parameters; empty shows as an empty box, not as the literal `null`."""

    def prepare_value(self, value):
        return "" if value is None else super().prepare_value(value)


# The fields only a model the platform calls uses: hidden (static/css/site.css) while "uploaded" is chosen, and
# ignored by the register form when it is, so the page works the same without the style.
CALLED_ONLY = {"data-for-kind": "litellm"}


def _key_input() -> forms.PasswordInput:
    """The key box keeps what the user typed on the re-rendered form of the same POST (never_cache on those views);
    a fresh form never holds a key, and the stored key is never rendered."""
    return forms.PasswordInput(render_value=True, attrs={"autocomplete": "off", **CALLED_ONLY})


def _releases():
    return forms.ModelChoiceField(
        queryset=BenchmarkVersion.objects.exclude(status=BenchmarkVersion.Status.DRAFT),
        to_field_name="name",
        empty_label=None,
    )


class ModelRegisterForm(forms.Form):
    name = forms.SlugField(max_length=100, help_text="The model's id in URLs and the API; it never changes.")
    display_name = forms.CharField(max_length=200)
    organization = forms.CharField(max_length=200, required=False)
    kind = forms.ChoiceField(
        choices=[
            (ModelEntry.Kind.LITELLM, "The platform calls it with my API key"),
            (ModelEntry.Kind.UPLOADED, "I upload its generations"),
        ],
        initial=ModelEntry.Kind.LITELLM,
        widget=forms.RadioSelect,
    )
    litellm_model = forms.CharField(
        max_length=200,
        required=False,
        label="litellm model",
        help_text='provider/model, e.g. "openai/gpt-4o-mini"',
        widget=forms.TextInput(attrs=CALLED_ONLY),
    )
    api_base = forms.CharField(
        max_length=500,
        required=False,
        label="API base URL",
        help_text="Only for a non-default endpoint: https at a public address.",
        widget=forms.TextInput(attrs=CALLED_ONLY),
    )
    api_key = forms.CharField(
        required=False,
        label="API key",
        widget=_key_input(),
        strip=False,
        help_text="Stored encrypted, never shown again; only this key is sent.",
    )
    knowledge_cutoff = forms.DateField(
        required=False, label="Knowledge cut-off", widget=forms.DateInput(attrs={"type": "date"})
    )
    open_weights = forms.BooleanField(required=False)
    default_params = ParamsField(required=False, label="Default generation parameters", help_text=PARAMS_HELP)

    def service_values(self) -> dict:
        values = dict(self.cleaned_data)
        values["default_params"] = values["default_params"] or {}
        values["api_key"] = values["api_key"] or None
        if values["kind"] == ModelEntry.Kind.UPLOADED:  # never called: what the hidden call fields hold is ignored
            values.update(litellm_model="", api_base="", api_key=None)
        return values


class ModelEditForm(forms.Form):
    """A model's description and call settings (the same service as PATCH /api/v1/models/<name>/); the endpoint
    fields cannot change while a run of the model is queued or running."""

    display_name = forms.CharField(max_length=200)
    organization = forms.CharField(max_length=200, required=False)
    litellm_model = ModelRegisterForm.base_fields["litellm_model"]
    api_base = ModelRegisterForm.base_fields["api_base"]
    api_key = forms.CharField(
        required=False,
        label="New API key",
        widget=_key_input(),
        strip=False,
        help_text="Leave empty to keep the stored key.",
    )
    knowledge_cutoff = ModelRegisterForm.base_fields["knowledge_cutoff"]
    open_weights = forms.BooleanField(required=False)
    default_params = ModelRegisterForm.base_fields["default_params"]

    @classmethod
    def for_model(cls, model: ModelEntry, data=None) -> ModelEditForm:
        return cls(data, initial={field: getattr(model, field) for field in cls.base_fields if field != "api_key"})

    def service_values(self) -> dict:
        values = dict(self.cleaned_data)
        values["default_params"] = values["default_params"] or {}
        values["api_key"] = values["api_key"] or None
        return values


class RunStartForm(forms.Form):
    release = _releases()
    with_paper = forms.BooleanField(required=False, initial=True, label="Prompt with the paper")
    samples = forms.IntegerField(min_value=1, max_value=MAX_SAMPLES, initial=1)
    params = ParamsField(required=False, label="Generation parameters", help_text=PARAMS_HELP)
    mode = forms.ChoiceField(
        choices=[
            ("single", "Single-shot: one prompt, one answer per item"),
            ("agent", "Agent: works in a sandbox over many turns, within a budget"),
        ],
        initial="single",
        required=False,
        label="Mode",
    )
    budget_turns = forms.IntegerField(required=False, min_value=1, label="Turns per item")
    budget_tokens = forms.IntegerField(required=False, min_value=1, label="Tokens per item")
    budget_seconds = forms.FloatField(required=False, min_value=1, label="Wall seconds per item")
    budget_cost = forms.FloatField(required=False, min_value=0.000001, label="USD per item")
    repeat = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=MAX_REPEAT,
        initial=1,
        label="Repeat runs",
        help_text="Start N identical runs of this setting; the leaderboard shows them as one row with their mean ± "
        "standard error (the published agent adaptation reports 3).",
    )

    BUDGETS = ("turns", "tokens", "seconds", "cost")

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        releases = BenchmarkVersion.objects.exclude(status=BenchmarkVersion.Status.DRAFT).order_by("name")
        for name in self.BUDGETS:
            field = self.fields[f"budget_{name}"]
            field.help_text = budget_maximums_text(name=name, releases=releases)
            # The browser's bound: the largest release maximum (the service holds each run to its own release's).
            if maximums := [run_mode("agent").budget_maximums(release)[name] for release in releases]:
                top = max(maximums)
                field.widget.attrs["max"] = str(int(top)) if float(top).is_integer() else repr(float(top))

    def start_fields(self) -> list:
        return [self[name] for name in self.fields if not name.startswith("budget_")]

    def budget_fields(self) -> list:
        return [self[f"budget_{name}"] for name in self.BUDGETS]

    def service_values(self) -> dict:
        values = dict(self.cleaned_data)
        mode = values.get("mode") or "single"
        # A single-shot run has no budget: fields left filled in before switching the mode are ignored.
        budget = {
            name: values[f"budget_{name}"]
            for name in self.BUDGETS
            if mode == "agent" and values.get(f"budget_{name}") is not None
        }
        return {
            "version": values["release"],
            "with_paper": values["with_paper"],
            "samples": values["samples"],
            "params": values["params"] or {},
            "mode": mode,
            "budget": budget or None,
            "repeat": values.get("repeat") or 1,
        }


def budget_maximums_text(*, name: str, releases) -> str:
    """The help beside a budget field: blank means the release's maximum, and each release's maximum."""
    agent = run_mode("agent")
    maximums = {release.name: agent.amount_text(name, agent.budget_maximums(release)[name]) for release in releases}
    if len(set(maximums.values())) == 1:
        return f"Blank: the release's maximum, {next(iter(maximums.values()))}."
    listed = "; ".join(f"release {release}: {amount}" for release, amount in maximums.items())
    return f"Blank: the release's maximum ({listed})."


class RunUploadForm(forms.Form):
    """A JSONL of generations scored as a self-reported run (the same service as POST /api/v1/runs/upload/)."""

    file = forms.FileField(
        label="Generations (JSONL)",
        help_text=escape(UPLOAD_FORMAT) + UPLOAD_FORMAT_AGENT_HTML,  # rendered as HTML: the guide's link
        widget=forms.FileInput(attrs={"accept": ".jsonl,.json,.txt,application/jsonl"}),
    )
    release = _releases()
    with_paper = forms.BooleanField(
        required=False, initial=True, label="The answers were made with the paper in the prompt"
    )
    protocol = forms.ModelChoiceField(
        queryset=PromptProtocol.objects.order_by("name"),
        to_field_name="name",
        required=False,
        empty_label="the release's protocol",
        label="Prompt protocol",
        help_text='The protocol that extracts code from "answer" lines.',
    )
    mode = forms.ChoiceField(
        choices=RUN_MODES,
        initial="single",
        required=False,
        label="Mode",
        help_text='Agent: each line the snippet body an agent made elsewhere ("code") and optionally its '
        f'"trajectory" (<a href="{AGENT_RUNS_GUIDE}">the agent-runs guide</a>).',
    )

    def __init__(self, *args, **kwargs) -> None:
        # The model page holds the run form too, with fields of the same names: ids of its own, so each label
        # toggles its own form's field (the upload's "made with the paper" checked the run form's box).
        kwargs.setdefault("auto_id", "id_upload_%s")
        super().__init__(*args, **kwargs)

    def service_values(self) -> dict:
        values = self.cleaned_data
        return {
            "version": values["release"],
            "with_paper": values["with_paper"],
            "protocol": values["protocol"].name if values["protocol"] else None,
            "mode": values.get("mode") or "single",
        }


class HarborJobForm(forms.Form):
    """A Harbor job imported as a self-reported agent run (the same service as POST /api/v1/runs/harbor/)."""

    file = forms.FileField(
        label="Harbor job (archive)",
        help_text=format_html(
            "A .tar.gz (.tgz), .tar or .zip of the job's folder (<code>{}</code>); one trial per public task of the "
            "release.",
            JOB_ARCHIVE_COMMAND,
        ),
        widget=forms.FileInput(attrs={"accept": ".tgz,.tar.gz,.tar,.zip"}),
    )
    release = _releases()

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("auto_id", "id_harbor_%s")  # the page's other forms have a `file` and a `release` too
        super().__init__(*args, **kwargs)
