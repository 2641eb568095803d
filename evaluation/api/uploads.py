"""REST API of uploaded runs: a JSONL of answers, or a Harbor job's archive, made a run."""

from __future__ import annotations

from django.urls import reverse
from drf_spectacular.utils import extend_schema
from rest_framework import permissions, serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from common.api import FormParser, MultiPartParser
from evaluation.api.runs import RunSerializer, model_use_require, release_field
from evaluation.harbor.imports import JOB_ARCHIVE, harbor_archive_import
from evaluation.models import RUN_MODES, ModelEntry
from evaluation.services import (
    UPLOAD_FORMAT,
    UPLOAD_FORMAT_AGENT,
    run_from_upload,
    upload_bytes,
)


class UploadSerializer(serializers.Serializer):
    file = serializers.FileField(help_text=UPLOAD_FORMAT + UPLOAD_FORMAT_AGENT)
    model = serializers.SlugRelatedField(slug_field="name", queryset=ModelEntry.objects.all())
    release = release_field()
    with_paper = serializers.BooleanField(default=True)
    protocol = serializers.CharField(
        required=False,
        max_length=20,
        help_text="The prompt protocol the answers were made with (default: the "
        'release\'s); it extracts code from "answer" lines.',
    )
    mode = serializers.ChoiceField(
        choices=RUN_MODES,
        default="single",
        help_text='single: each line an answer; agent: each line the snippet body an agent made elsewhere ("code") '
        'and optionally its "trajectory" (the agent-runs guide, /guides/agent-runs/).',
    )


UPLOAD_PROGRESS = (
    " The answer comes once the file is checked and stored; its items are then queued and scored in the background "
    "(status queued, then running): follow `follow.status` (this run's status and progress), `follow.page` or "
    "`follow.results`."
)


class FollowSerializer(serializers.Serializer):
    status = serializers.URLField(help_text="The run's status and progress (API).")
    page = serializers.URLField(help_text="The run's page.")
    results = serializers.URLField(help_text="Per-item results so far (API, paginated).")


class UploadedRunSerializer(RunSerializer):
    follow = FollowSerializer(read_only=True)
    warnings = serializers.ListField(
        child=serializers.CharField(),
        read_only=True,
        help_text="'line N: ...' for each line taken that will likely fail, e.g. an answer indented less than its "
        "snippet (the protocol splices answers unchanged).",
    )

    class Meta(RunSerializer.Meta):
        fields = [*RunSerializer.Meta.fields, "follow", "warnings"]


class RunUpload(APIView):
    """Score uploaded generations (JSONL) as a new run; a file with any bad line is refused whole."""

    permission_classes = [permissions.IsAuthenticated]
    parser_classes = [MultiPartParser, FormParser]

    @extend_schema(
        request=UploadSerializer,
        responses={201: UploadedRunSerializer},
        description=UPLOAD_FORMAT + UPLOAD_FORMAT_AGENT + UPLOAD_PROGRESS,
    )
    def post(self, request, *args, **kwargs) -> Response:
        serializer = UploadSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        model_use_require(self, request, data["model"])
        run = run_from_upload(
            model=data["model"],
            version=data["release"],
            data=upload_bytes(data["file"]),
            user=request.user,
            with_paper=data["with_paper"],
            protocol=data.get("protocol"),
            mode=data["mode"],
        )
        return _upload_created(request, run)


class HarborJobSerializer(serializers.Serializer):
    file = serializers.FileField(
        help_text=f"The Harbor job: {JOB_ARCHIVE}, holding <trial>/result.json per trial of the release's exported "
        "public tasks (export_harbor, or the release's Harbor dataset download)."
    )
    model = serializers.SlugRelatedField(slug_field="name", queryset=ModelEntry.objects.all())
    release = release_field()


class HarborJobImportedSerializer(UploadedRunSerializer):
    notes = serializers.ListField(
        child=serializers.CharField(),
        read_only=True,
        help_text="'<trial>: ...' for each trial taken with a remark: an answer edited outside its region (scored as "
        "no answer), a trial Harbor could not finish (an error, not scored).",
    )

    class Meta(UploadedRunSerializer.Meta):
        fields = [*UploadedRunSerializer.Meta.fields, "notes"]


class RunHarborImport(APIView):
    """Import a Harbor job (an archive of its folder) as a self-reported agent run: each trial an item whose answer
    the platform scores again (Harbor's reward is kept beside it, never used); the scaffold is the job's agent. A
    job with any problem (missing, foreign or held-out tasks, links or paths leaving it, forged usage, past the
    limits) is refused whole, every problem listed, nothing stored."""

    permission_classes = [permissions.IsAuthenticated]
    parser_classes = [MultiPartParser, FormParser]

    @extend_schema(request=HarborJobSerializer, responses={201: HarborJobImportedSerializer})
    def post(self, request, *args, **kwargs) -> Response:
        serializer = HarborJobSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        model_use_require(self, request, data["model"])
        run, notes = harbor_archive_import(
            data=data["file"],
            filename=data["file"].name,
            version=data["release"],
            model=data["model"],
            user=request.user,
        )
        return _upload_created(request, run, notes=notes)


def _upload_created(request, run, **extra) -> Response:
    """An upload stored, not yet scored (its items are queued in the background): the run and where to follow it."""
    status_url = request.build_absolute_uri(reverse("api-run-detail", args=[run.pk]))
    follow = {
        "status": status_url,
        "page": request.build_absolute_uri(reverse("run-detail", args=[run.pk])),
        "results": request.build_absolute_uri(reverse("api-run-results", args=[run.pk])),
    }
    return Response(
        {
            **RunSerializer(run, context={"request": request}).data,
            "follow": follow,
            "warnings": run.upload_warnings,
            **extra,
        },
        status=status.HTTP_201_CREATED,
        headers={"Location": status_url},
    )
