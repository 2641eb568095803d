"""REST API of runs: start, status, pin, cancel, resume, priority, verification, the reproducibility manifest."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.http import StreamingHttpResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import generics, permissions, serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from benchmarks.api import release_get, release_unknown_message
from benchmarks.models import BenchmarkVersion
from benchmarks.permissions import IsOwnerOrMaintainer, user_may_change
from evaluation.models import RUN_MODES, EvaluationRun, ModelEntry, RunScore
from evaluation.provenance import provenance_of
from evaluation.reproducibility import run_endpoint, run_manifest_chunks
from evaluation.selectors.items import run_progress
from evaluation.selectors.runs import repeat_runs, runs_visible, withhold_usage
from evaluation.services import (
    MAX_REASON_CHARS,
    MAX_REPEAT,
    MAX_SAMPLES,
    RUN_PRIORITY_MAX,
    run_cancel,
    run_pin,
    run_priority_set,
    run_resume,
    run_unpin,
    run_verify,
    runs_start,
)


class ProgressSerializer(serializers.Serializer):
    total = serializers.IntegerField()
    done = serializers.IntegerField()
    passed = serializers.IntegerField()
    failed = serializers.IntegerField()
    # The ignore: DRF's metaclass takes declared fields off the class, so Serializer.errors stays the property.
    errors = serializers.IntegerField()  # type: ignore[assignment]
    generated = serializers.IntegerField()
    percent = serializers.FloatField()


class ScoreSerializer(serializers.ModelSerializer):
    tokens = serializers.IntegerField(
        read_only=True, allow_null=True, help_text="Tokens in and out; null when unknown or withheld."
    )
    usage_withheld = serializers.SerializerMethodField(
        help_text="True where tokens and cost are null because they are withheld from the viewer (what held-out "
        "items spent), not unknown."
    )

    def get_usage_withheld(self, score: RunScore) -> bool:
        return bool(getattr(score, "usage_withheld", False))

    class Meta:
        model = RunScore
        fields = [
            "items",
            "passed",
            "failed",
            "errors",
            "flagged",
            "pass_rate",
            "pass_rate_std",
            "pass_rate_ci_low",
            "pass_rate_ci_high",
            "scaled_pass_rate",
            "scaled_pass_rate_std",
            "scaled_ci_low",
            "scaled_ci_high",
            "pass_at_k",
            "tokens",
            "prompt_tokens",
            "completion_tokens",
            "cost",
            "usage_withheld",
        ]


class RunSerializer(serializers.ModelSerializer):
    model: serializers.SlugRelatedField[ModelEntry] = serializers.SlugRelatedField(slug_field="name", read_only=True)
    release: serializers.SlugRelatedField[BenchmarkVersion] = serializers.SlugRelatedField(
        source="version", slug_field="name", read_only=True
    )
    created_by: serializers.SlugRelatedField[User] = serializers.SlugRelatedField(
        slug_field="username", read_only=True, allow_null=True
    )
    progress = serializers.SerializerMethodField()
    score = serializers.SerializerMethodField()
    split_scores = serializers.SerializerMethodField()
    provenance_label = serializers.SerializerMethodField(help_text='The provenance in a word, e.g. "self-reported".')
    provenance_statement = serializers.SerializerMethodField(
        help_text='What the platform vouches for, as the leaderboard and the run page say it, e.g. "verified '
        'upload: checked by NAME, reason".'
    )
    endpoint = serializers.SerializerMethodField(
        help_text="What the run calls, fixed at its start: litellm_model, api_base (empty: the provider's own "
        "address; null: the model's own endpoint, shown to its owner and maintainers only) and the parameters sent; "
        "null for runs that call no model (uploads, calibration models)."
    )

    repeat_runs = serializers.SerializerMethodField(
        help_text="The ids of the runs started together with this one (repeat > 1), this one included; "
        "empty for a run started alone."
    )
    status_label = serializers.CharField(
        read_only=True,
        help_text='The status as the run page says it: "Paused" for a run that paused itself (stored cancelled, '
        "pause_reason saying why).",
    )
    paused = serializers.SerializerMethodField(
        help_text="The run paused itself (its model calls kept failing): resume it once the cause is fixed."
    )
    pinned = serializers.SerializerMethodField(
        help_text='Its owner pinned it as the model\'s leaderboard row in its setting (PATCH {"pinned": ...}).'
    )

    class Meta:
        model = EvaluationRun
        extra_kwargs = {
            "mode": {
                "help_text": "single: one prompt, one answer per item; agent: the model worked in a sandbox "
                "over many turns within agent_budget per item (the agent-runs guide, /guides/agent-runs/)."
            },
            "agent_budget": {
                "help_text": 'Agent runs: the per-item budget, {"turns", "tokens", "seconds", "cost" '
                "(USD)}, each within the release's maximum; {} for single-shot runs."
            },
        }
        fields = [
            "id",
            "model",
            "release",
            "status",
            "status_label",
            "paused",
            "pause_reason",
            "pinned",
            "pinned_at",
            "provenance",
            "provenance_label",
            "provenance_statement",
            "endpoint",
            "protocol",
            "mode",
            "agent_budget",
            "repeat_group",
            "repeat_runs",
            "with_paper",
            "samples",
            "params",
            "total_items",
            "covers_held_out",
            "priority",
            "progress",
            "score",
            "split_scores",
            "created_by",
            "created_at",
            "started_at",
            "finished_at",
        ]

    def get_paused(self, run: EvaluationRun) -> bool:
        return bool(run.pause_reason) and run.status == EvaluationRun.Status.CANCELLED

    def get_pinned(self, run: EvaluationRun) -> bool:
        return run.pinned_at is not None

    @extend_schema_field(serializers.ListField(child=serializers.IntegerField()))
    def get_repeat_runs(self, run: EvaluationRun) -> list[int]:
        return repeat_runs(run=run)

    def get_provenance_label(self, run: EvaluationRun) -> str:
        return provenance_of(run).label

    def get_provenance_statement(self, run: EvaluationRun) -> str:
        return provenance_of(run).statement

    @extend_schema_field(OpenApiTypes.OBJECT)
    def get_endpoint(self, run: EvaluationRun) -> dict | None:
        request = self.context.get("request")
        return run_endpoint(run, user=request and request.user)

    @extend_schema_field(ProgressSerializer)
    def get_progress(self, run: EvaluationRun) -> dict:
        progress = run_progress(run)
        return {**ProgressSerializer(progress).data, "percent": progress.percent}

    @extend_schema_field(ScoreSerializer(allow_null=True))
    def _viewer(self):
        """The request's user; None (what every visitor sees) where the serializer was given no request."""
        request = self.context.get("request")
        return request.user if request else None

    def get_score(self, run: EvaluationRun) -> dict | None:
        score = run.scores.filter(paper=None, split="").first()
        if score is None:
            return None
        return ScoreSerializer(withhold_usage(run=run, scores=[score], user=self._viewer())[0]).data

    @extend_schema_field(
        serializers.DictField(
            child=ScoreSerializer(), help_text="Aggregates per split: public, held_out (when covered)."
        )
    )
    def get_split_scores(self, run: EvaluationRun) -> dict:
        scores = withhold_usage(
            run=run, scores=list(run.scores.filter(paper=None).exclude(split="")), user=self._viewer()
        )
        return {score.split: ScoreSerializer(score).data for score in scores}


class ReleaseField(serializers.SlugRelatedField):
    """A release by name; an unknown name is refused with the names that exist."""

    def to_internal_value(self, data):
        try:
            return super().to_internal_value(data)
        except serializers.ValidationError as error:
            if isinstance(data, str) and error.get_codes() == ["does_not_exist"]:
                raise serializers.ValidationError(release_unknown_message(name=data), code="does_not_exist") from error
            raise


def release_field(**kwargs) -> serializers.SlugRelatedField:
    return ReleaseField(
        slug_field="name",
        help_text="A published release, e.g. 1.0.0.",
        queryset=BenchmarkVersion.objects.exclude(status=BenchmarkVersion.Status.DRAFT),
        **kwargs,
    )


class RunStartSerializer(serializers.Serializer):
    model = serializers.SlugRelatedField(slug_field="name", queryset=ModelEntry.objects.all())
    release = release_field()
    with_paper = serializers.BooleanField(default=True)
    samples = serializers.IntegerField(default=1, min_value=1, max_value=MAX_SAMPLES)
    params = serializers.DictField(default=dict, help_text='Generation parameters, e.g. {"temperature": 0}.')
    protocol = serializers.CharField(
        required=False, max_length=20, help_text="A prompt protocol's name; default: the release's protocol."
    )
    mode = serializers.ChoiceField(
        choices=RUN_MODES,
        default="single",
        help_text="single: one prompt, one answer per item; agent: the model works in a "
        "sandbox over many turns (its model must support tool calling).",
    )
    budget = serializers.DictField(
        required=False,
        help_text=(
            'Agent runs: the per-item budget, any of {"turns", "tokens", "seconds", "cost"}; each at most the '
            "release's maximum, which is also the default. Refused for single-shot runs."
        ),
    )
    repeat = serializers.IntegerField(
        default=1,
        min_value=1,
        max_value=MAX_REPEAT,
        help_text="Runs of this setting to start together (e.g. 3, as the published agent adaptation reports): "
        "they share a repeat_group and the leaderboard shows them as one row with the mean and standard error "
        "across the runs. The response is the first run; repeat_runs lists them all.",
    )


def model_use_require(view: APIView, request, model: ModelEntry) -> None:
    """Runs spend the model owner's key and put rows on the leaderboard in the model's name: owner or maintainer.

    Built-in calibration models have no owner, so only maintainers run them.
    """
    if not user_may_change(user=request.user, owner_id=model.owner_id):
        view.permission_denied(request, message=f"only the owner of model {model.name} or a maintainer may run it")


class RunStart(APIView):
    """Start a run of a model on a release; its items are queued once the run is saved."""

    permission_classes = [permissions.IsAuthenticated]

    @extend_schema(request=RunStartSerializer, responses={201: RunSerializer})
    def post(self, request, *args, **kwargs) -> Response:
        serializer = RunStartSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = dict(serializer.validated_data)
        model_use_require(self, request, data["model"])
        runs = runs_start(version=data.pop("release"), user=request.user, **data)
        return Response(RunSerializer(runs[0], context={"request": request}).data, status=status.HTTP_201_CREATED)


class RunPinSerializer(serializers.Serializer):
    pinned = serializers.BooleanField(
        help_text="true: this completed run becomes the model's leaderboard row in its release and setting; false: "
        "the pin is lifted (the latest completed run is the row again)."
    )


class RunDetail(generics.RetrieveAPIView):
    """A run's status, progress and (once completed) overall and per-split scores; PATCH {"pinned": true|false}
    pins or unpins it as its model's leaderboard row (the model's owner or a maintainer), as the model page does."""

    serializer_class = RunSerializer

    def get_queryset(self):
        return runs_visible(user=self.request.user).select_related("model", "version", "created_by")

    @extend_schema(request=RunPinSerializer, responses={200: RunSerializer})
    def patch(self, request, *args, **kwargs) -> Response:
        run = self.get_object()
        serializer = RunPinSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        if serializer.validated_data["pinned"]:
            run = run_pin(run=run, actor=request.user)
        else:
            run = run_unpin(run=run, actor=request.user)
        return Response(RunSerializer(run, context={"request": request}).data)


class RunAction(generics.GenericAPIView):
    """Base of run actions (POST, by the run's creator or a maintainer)."""

    serializer_class = RunSerializer
    permission_classes = [permissions.IsAuthenticated, IsOwnerOrMaintainer]
    owner_field = "created_by"

    def get_queryset(self):
        # A run the user may not see is not found (404), as on GET: a 403 would tell that it exists.
        return runs_visible(user=self.request.user).select_related("model", "version", "created_by")

    def act(self, run: EvaluationRun) -> None:
        raise NotImplementedError

    @extend_schema(request=None, responses={200: RunSerializer})
    def post(self, request, *args, **kwargs) -> Response:
        run = self.get_object()
        self.act(run)
        run.refresh_from_db()
        return Response(RunSerializer(run, context={"request": request}).data)


class RunCancel(RunAction):
    """Cancel a queued or running run; results so far stay."""

    def act(self, run: EvaluationRun) -> None:
        run_cancel(run=run)


class RunResume(RunAction):
    """Resume a cancelled or stalled run: only items without an outcome are queued."""

    def act(self, run: EvaluationRun) -> None:
        run_resume(run=run)


class RunPrioritySerializer(serializers.Serializer):
    priority = serializers.IntegerField(
        min_value=0,
        max_value=RUN_PRIORITY_MAX,
        help_text=("0 (default) to 10: a run of priority p keeps 1 + p shares of items in flight on the workers."),
    )


class RunPriority(APIView):
    """A maintainer sets how large a share of the workers a run gets (its items in flight)."""

    permission_classes = [permissions.IsAuthenticated]

    @extend_schema(request=RunPrioritySerializer, responses={200: RunSerializer})
    def post(self, request, pk: int) -> Response:
        serializer = RunPrioritySerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        run = get_object_or_404(runs_visible(user=request.user).select_related("model", "version", "created_by"), pk=pk)
        run = run_priority_set(run=run, priority=serializer.validated_data["priority"], actor=request.user)
        return Response(RunSerializer(run, context={"request": request}).data)


class RunVerifySerializer(serializers.Serializer):
    reason = serializers.CharField(
        max_length=MAX_REASON_CHARS, help_text="How the self-reported answers were checked; kept in the audit record."
    )


class RunVerify(APIView):
    """A maintainer marks a completed self-reported (uploaded) run as verified, saying why."""

    permission_classes = [permissions.IsAuthenticated]

    @extend_schema(request=RunVerifySerializer, responses={200: RunSerializer})
    def post(self, request, pk: int) -> Response:
        serializer = RunVerifySerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        run = get_object_or_404(EvaluationRun, pk=pk)
        run = run_verify(run=run, actor=request.user, reason=serializer.validated_data["reason"])
        return Response(RunSerializer(run, context={"request": request}).data)


class RunManifest(APIView):
    """The run's reproducibility record: per item the task, prompt, answer and code hashes, environment lock,
    protocol, limits, sandbox backend and verdict, with `sha256` over the canonical JSON of the rest.
    Held-out items and the worker host of each item are listed to maintainers only; others get the public items
    (`scope`, `items_withheld`)."""

    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request, pk: int) -> StreamingHttpResponse:
        run = get_object_or_404(runs_visible(user=request.user).select_related("model", "version"), pk=pk)
        release_get(name=run.version.name, user=request.user)
        # Streamed item by item (a 20,000-item run's manifest is megabytes), so not through a renderer.
        response = StreamingHttpResponse(
            run_manifest_chunks(run=run, user=request.user), content_type="application/json"
        )
        response["Content-Disposition"] = f'inline; filename="run-{run.pk}-manifest.json"'
        return response
