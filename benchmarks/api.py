"""REST API for releases (published or deprecated benchmark versions), their downloads and their items."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.http import Http404, JsonResponse
from django.http.response import HttpResponseBase
from django.shortcuts import get_object_or_404
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import generics, serializers
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.views import APIView

from benchmarks.models import BenchmarkVersion, Snippet
from benchmarks.paper2code import Protocol
from benchmarks.selectors import blob_read, protocol_get, snippet_masked_file, snippet_prompt, versions_visible
from benchmarks.services.downloads import release_items_in_protocol
from benchmarks.services.release_settings import version_settings
from benchmarks.views import DOWNLOAD_TYPES, DOWNLOADS_RETRY_AFTER, download_response, downloads_not_ready_message
from benchmarks.visibility import changelog_visible, items_visible
from common.api import error_body

RELEASES_NAMED = 20  # an unknown-release error lists at most this many names


PROTOCOL_PARAMETER = OpenApiParameter("protocol", str, description="A prompt protocol's name (default: the release's).")


def releases_visible(*, user) -> QuerySet[BenchmarkVersion]:
    """Published and deprecated versions; drafts are not releases, even for maintainers."""
    return versions_visible(user=user).exclude(status=BenchmarkVersion.Status.DRAFT)


def release_unknown_message(*, name: str) -> str:
    """Says which releases exist, so a mistyped name can be corrected without another request."""
    names = list(
        BenchmarkVersion.objects.exclude(status=BenchmarkVersion.Status.DRAFT)
        .order_by("-published_at", "name")
        .values_list("name", flat=True)[:RELEASES_NAMED]
    )
    shown = str(name)[:100]
    if not names:
        return f"no release {shown!r}: no release is published yet"
    return f"no release {shown!r}; releases: {', '.join(names)}" + (" …" if len(names) == RELEASES_NAMED else "")


def release_get(*, name: str, user) -> BenchmarkVersion:
    version = releases_visible(user=user).filter(name=name).first()
    if version is None:
        raise Http404(release_unknown_message(name=name))
    return version


def request_protocol(request, version: BenchmarkVersion) -> Protocol:
    """The protocol named by `?protocol=` (UnknownProtocol, a 400, if none has that name), else the release's."""
    return protocol_get(name=request.query_params.get("protocol") or version.protocol_name)


class DownloadSerializer(serializers.Serializer):
    filename = serializers.CharField()
    sha256 = serializers.CharField()
    size = serializers.IntegerField()
    url = serializers.CharField()


class ReleaseSerializer(serializers.ModelSerializer):
    previous: serializers.SlugRelatedField[BenchmarkVersion] = serializers.SlugRelatedField(
        slug_field="name", read_only=True, allow_null=True
    )
    task_count = serializers.IntegerField(read_only=True)
    changelog = serializers.SerializerMethodField()
    downloads = serializers.SerializerMethodField()
    downloads_status = serializers.CharField(
        read_only=True,
        help_text=(
            '"ready"; "preparing" while a worker builds them after publishing (no downloads listed yet); "failed"'
        ),
    )
    settings = serializers.SerializerMethodField()

    class Meta:
        model = BenchmarkVersion
        fields = [
            "name",
            "status",
            "notes",
            "manifest_hash",
            "previous",
            "changelog",
            "task_count",
            "downloads",
            "downloads_status",
            "settings",
            "published_at",
            "deprecated_at",
            "deprecation_note",
        ]

    @extend_schema_field(serializers.DictField())
    def get_settings(self, version: BenchmarkVersion) -> dict:
        """Default prompt protocol and the limits of one test run that every run on the release uses."""
        return version_settings(version=version)

    @extend_schema_field(serializers.JSONField(allow_null=True))
    def get_changelog(self, version: BenchmarkVersion) -> dict | None:
        request = self.context.get("request")
        return changelog_visible(version=version, user=request.user) if request else None

    @extend_schema_field(serializers.DictField(child=DownloadSerializer()))
    def get_downloads(self, version: BenchmarkVersion) -> dict:
        request = self.context.get("request")
        links = {}
        for kind, entry in version.downloads.items():
            url = reverse("api-release-download", kwargs={"name": version.name, "kind": kind})
            links[kind] = {
                "filename": entry["filename"],
                "sha256": entry["sha256"],
                "size": entry["size"],
                "url": request.build_absolute_uri(url) if request else url,
            }
        return links


class ItemSerializer(serializers.ModelSerializer):
    """A benchmark item as a model sees it: never the reference code, never the tests."""

    paper = serializers.CharField(source="task.paper.slug")
    file = serializers.CharField(source="file_path")
    snippet = serializers.CharField(source="name")
    masked_code = serializers.SerializerMethodField()
    mutation = serializers.SerializerMethodField()

    class Meta:
        model = Snippet
        fields = ["id", "paper", "file", "snippet", "loc", "depth", "masked_code", "mutation"]

    @extend_schema_field(
        serializers.CharField(
            allow_null=True,
            help_text="The item's file with the snippet masked; null with ?masked_code=false (the field is always "
            "there, so one schema reads both).",
        )
    )
    def get_masked_code(self, snippet: Snippet) -> str | None:
        if not self.context.get("with_masked_code", True):  # each is a whole file: a page of ids stays small
            return None
        return snippet_masked_file(snippet=snippet, protocol=self.context["protocol"])

    def get_mutation(self, snippet: Snippet) -> dict | None:
        """How strong its tests are: the counts and score only, since a surviving mutant spells reference lines."""
        m = snippet.mutation
        return None if m is None else {key: m.get(key) for key in ("generated", "killed", "survived", "score")}


class ItemDetailSerializer(ItemSerializer):
    prompt = serializers.SerializerMethodField()
    protocol = serializers.SerializerMethodField()

    class Meta(ItemSerializer.Meta):
        fields = [*ItemSerializer.Meta.fields, "protocol", "prompt"]

    def get_protocol(self, snippet: Snippet) -> str:
        return self.context["protocol"].name

    def get_prompt(self, snippet: Snippet) -> str:
        files = {path: blob_read(sha256=digest) for path, digest in snippet.task.files.items()}
        return snippet_prompt(
            snippet=snippet, files=files, with_paper=self.context["with_paper"], protocol=self.context["protocol"]
        )


class ReleaseList(generics.ListAPIView):
    """Published and deprecated releases, newest first."""

    serializer_class = ReleaseSerializer

    def get_queryset(self):
        return releases_visible(user=self.request.user).order_by("-published_at", "name")


class ReleaseDetail(generics.RetrieveAPIView):
    """One release: manifest hash, changelog against the previous release, downloads with their sha256."""

    serializer_class = ReleaseSerializer
    queryset = BenchmarkVersion.objects.none()  # for the schema; get_object does the lookup

    def get_object(self) -> BenchmarkVersion:
        return release_get(name=self.kwargs["name"], user=self.request.user)


class IgnoreClientContentNegotiation(BaseContentNegotiation):
    """A download is a file whatever the client's Accept header says."""

    def select_parser(self, request, parsers):
        return parsers[0]

    def select_renderer(self, request, renderers, format_suffix=None):
        return renderers[0], renderers[0].media_type


@extend_schema(
    parameters=[
        OpenApiParameter(
            "protocol",
            str,
            description=(
                "Items only: a prompt protocol's name; another than the release's is built on request, "
                "not the hashed file."
            ),
        )
    ]
)
class ReleaseDownload(APIView):
    """A release file (the public problem set as zip, or every item as JSONL), byte for byte as hashed."""

    content_negotiation_class = IgnoreClientContentNegotiation

    @extend_schema(responses={(200, "application/octet-stream"): OpenApiTypes.BINARY})
    def get(self, request, name: str, kind: str) -> HttpResponseBase:
        version = release_get(name=name, user=request.user)
        entry = version.downloads.get(kind)
        if entry is None and kind in DOWNLOAD_TYPES and version.downloads_status in ("preparing", "failed"):
            # 409 while a worker builds them (ask again after Retry-After), 503 when the build failed
            preparing = version.downloads_status == "preparing"
            return JsonResponse(
                error_body(
                    code=f"downloads_{version.downloads_status}", message=downloads_not_ready_message(version=version)
                ),
                status=409 if preparing else 503,
                headers={"Retry-After": str(DOWNLOADS_RETRY_AFTER)},
            )
        if entry is None:
            raise Http404(f"release {name} has no download {kind!r}; it has: {', '.join(version.downloads)}")
        filename, digest = entry["filename"], entry["sha256"]
        protocol = request_protocol(request, version)
        if kind == "items" and protocol.name != version.protocol_id:
            filename = filename.replace("-items.jsonl", f"-items-{protocol.name}.jsonl")
            digest = release_items_in_protocol(version=version, protocol=protocol)
        return download_response(
            sha256=digest, filename=filename, content_type=DOWNLOAD_TYPES.get(kind, "application/octet-stream")
        )


def _query_flag(request, name: str, default: bool = True) -> bool:
    value = request.query_params.get(name)
    return default if value is None else value.lower() not in ("false", "0", "no")


@extend_schema(
    parameters=[
        PROTOCOL_PARAMETER,
        OpenApiParameter(
            "masked_code",
            bool,
            description="Include each item's masked file (default true); false gives ids and metadata "
            "only (masked_code null), a page of which is a few kB instead of a file per item.",
        ),
    ]
)
class ItemList(generics.ListAPIView):
    """The release's items (snippets less retired ones; held-out ones for maintainers only) with the masked file;
    ids are what uploads refer to."""

    serializer_class = ItemSerializer

    def get_queryset(self):
        return items_visible(
            version=release_get(name=self.kwargs["name"], user=self.request.user), user=self.request.user
        )

    def get_serializer_context(self) -> dict[str, Any]:
        if getattr(self, "swagger_fake_view", False):  # the schema generator has no release
            return dict(super().get_serializer_context())
        version = release_get(name=self.kwargs["name"], user=self.request.user)
        return {
            **super().get_serializer_context(),
            "protocol": request_protocol(self.request, version),
            "with_masked_code": _query_flag(self.request, "masked_code"),
        }


@extend_schema(
    parameters=[
        OpenApiParameter("with_paper", bool, description="Include the paper (default true)."),
        PROTOCOL_PARAMETER,
    ]
)
class ItemDetail(generics.RetrieveAPIView):
    """One item with its full prompt (FORMAT.md sections 5-6)."""

    serializer_class = ItemDetailSerializer
    queryset = Snippet.objects.none()  # for the schema; get_object does the lookup

    def get_object(self) -> Snippet:
        version = release_get(name=self.kwargs["name"], user=self.request.user)
        return get_object_or_404(items_visible(version=version, user=self.request.user), pk=self.kwargs["item_id"])

    def get_serializer_context(self) -> dict[str, Any]:
        if getattr(self, "swagger_fake_view", False):  # the schema generator has no release
            return dict(super().get_serializer_context())
        version = release_get(name=self.kwargs["name"], user=self.request.user)
        with_paper = _query_flag(self.request, "with_paper")
        return {
            **super().get_serializer_context(),
            "with_paper": with_paper,
            "protocol": request_protocol(self.request, version),
        }
