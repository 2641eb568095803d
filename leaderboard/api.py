"""REST API of the read side: a release's leaderboard (JSON and CSV), two runs compared, its snippets by difficulty."""

from __future__ import annotations

from collections.abc import Callable

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.response import Response
from rest_framework.views import APIView

from benchmarks.api import release_get
from common.csv_export import csv_text
from evaluation.models import RUN_MODES, EvaluationRun
from evaluation.provenance import PROVENANCE_HELP
from leaderboard.analysis import DIFFICULTY_FIELDS, difficulty_record, snippet_difficulty
from leaderboard.comparison import comparison_from_query, comparison_record
from leaderboard.selectors.columns import (
    LEADERBOARD_COLUMNS,
    leaderboard_columns_chosen,
    leaderboard_export_keys,
    leaderboard_record,
)
from leaderboard.selectors.table import LEADERBOARD_SORTS, LeaderboardFilters, leaderboard_rows

_FIELD_KINDS: dict[str, Callable[..., serializers.Field]] = {
    "int": serializers.IntegerField,
    "float": serializers.FloatField,
    "str": serializers.CharField,
    "bool": serializers.BooleanField,
    "date": serializers.DateField,
    "decimal": lambda **kw: serializers.DecimalField(max_digits=12, decimal_places=6, **kw),
}
_COLUMN_HELP = {
    "rank": "1 + the number of entries significantly better (exact McNemar on the items both scored, every pair of "
    "ranked entries, Holm-corrected, family-wise level 0.05): entries no test separates share a rank. Null "
    "for calibration models' reference lines and for runs missing a scored answer on some item "
    "(rank_note says why).",
    "rank_note": "Why the row has no rank; empty when ranked.",
    "provenance": f"{PROVENANCE_HELP.removesuffix('.')}; calibration for a calibration model's reference line "
    "(its badge's word: the run itself is verified).",
    "provenance_statement": "The provenance as the page's badge says it, e.g. \"verified upload: checked by NAME, "
    'reason".',
    "calibration": "A built-in calibration model (reference or placeholder): a reference line, never ranked.",
    "held_out_scaled_pass_rate": "The held-out split's aggregate; null when the run covers the public split only.",
    "finished_on": "The day the run completed (UTC).",
    "pinned": "The model's owner pinned this run as its row in this setting; otherwise the row is the model's latest "
    "completed run in the setting.",
    "mode": "single (one prompt, one answer per item) or agent (the model worked in a sandbox over many turns within "
    "a budget): each its own row; filter with ?mode=.",
    "runs": "How many completed runs the row stands for: more than 1 when its run was started together with others "
    "(repeat).",
    "scaled_pass_rate_mean": "The mean scaled pass@1 across the row's runs (its own score when runs is 1).",
    "scaled_pass_rate_se": "The standard error of that mean (sample standard deviation / sqrt(runs)); null when runs "
    "is 1.",
    "pass_rate_mean": "The mean pass@1 across the row's runs.",
    "pass_rate_se": "The standard error of that mean; null when runs is 1.",
    "cost": "The run's total cost in USD (the mean per run when runs > 1); null, never 0, when any item's cost is "
    "unknown (a model litellm has no price for, uploads, published results).",
    "tokens": "Tokens in and out over the run's items (the public split's where held-out usage is withheld); null, "
    "never 0, when any answer's count is unknown (uploads, published results, a provider that gave none).",
    "prompt_tokens": "Tokens in; null when any answer's count is unknown, as tokens.",
    "completion_tokens": "Tokens out; null when any answer's count is unknown, as tokens.",
    "cost_per_item": "cost / the run's items (snippets x samples); null when cost is.",
    "turns_per_item": "An agent row's mean model turns per item of the public split over its trajectories (a repeat "
    "group's: over every run's items); null for single-shot rows and agent uploads without trajectories.",
    "tokens_per_item": "An agent row's mean tokens (in and out) per item, as turns_per_item.",
    "seconds_per_item": "An agent row's mean wall seconds per item, as turns_per_item.",
}

LeaderboardRowSerializer = type(
    "LeaderboardRowSerializer",
    (serializers.Serializer,),
    {
        column.key: _FIELD_KINDS[column.kind](allow_null=column.nullable, help_text=_COLUMN_HELP.get(column.key, ""))
        for column in LEADERBOARD_COLUMNS
    },
)


class CSVRenderer(BaseRenderer):
    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None) -> bytes:
        if isinstance(data, dict) and "error" in data:
            text = csv_text(header=["error", "message"], rows=[[data["error"]["code"], data["error"]["message"]]])
        else:
            view = (renderer_context or {}).get("view")
            keys = getattr(view, "csv_keys", None) or [column.key for column in LEADERBOARD_COLUMNS]
            text = csv_text(header=keys, rows=([row.get(key) for key in keys] for row in data or []))
        return text.encode(self.charset)


class Leaderboard(APIView):
    """The release's leaderboard: JSON, or CSV with ?format=csv or at leaderboard.csv; the page's filters and sort
    give the page's rows in its order. The JSON has every field; the CSV too, or with `cols` (even empty) the page's
    columns only: the run, the key columns, those `cols` names, each with the fields its page cell shows."""

    renderer_classes = [JSONRenderer, CSVRenderer]
    csv_keys: tuple[str, ...] = ()

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "provenance",
                str,
                enum=EvaluationRun.Provenance.values,
                description="Only ranked entries of this provenance; calibration reference "
                "lines are always included (rank null).",
            ),
            OpenApiParameter("open", bool, description="Only open-weights models."),
            OpenApiParameter("paper", str, enum=["with", "without"], description="Only this setting."),
            OpenApiParameter(
                "mode",
                str,
                enum=[value for value, _ in RUN_MODES],
                description="Only single-shot or only agent rows (calibration reference lines of that mode too).",
            ),
            OpenApiParameter("q", str, description="Model name or organization contains this."),
            OpenApiParameter(
                "sort",
                str,
                enum=list(LEADERBOARD_SORTS),
                description="The page's column to sort the ranked rows by (default: rank); reference lines first.",
            ),
            OpenApiParameter("dir", str, enum=["asc", "desc"], description="Sort direction (default: the page's)."),
            OpenApiParameter(
                "cols",
                str,
                description="CSV only: the page's columns (comma-separated keys of its toggled columns, or empty for "
                "the key columns alone) instead of every field.",
            ),
        ],
        responses={
            (200, "application/json"): LeaderboardRowSerializer(many=True),
            (200, "text/csv"): LeaderboardRowSerializer(many=True),
        },
    )
    def get(self, request, name: str, format: str | None = None) -> Response:
        version = release_get(name=name, user=request.user)
        filters = LeaderboardFilters.from_query(request.query_params)
        if "cols" in request.query_params:
            chosen = leaderboard_columns_chosen(request.query_params)
            self.csv_keys = leaderboard_export_keys(chosen=chosen, agent_view=filters.mode == "agent")
        records = [leaderboard_record(row) for row in leaderboard_rows(version=version, filters=filters)]
        rows = LeaderboardRowSerializer(records, many=True).data
        response = Response(rows)
        if request.accepted_renderer.format == "csv":
            response["Content-Disposition"] = f'attachment; filename="leaderboard-{version.name}.csv"'
        return response


class Compare(APIView):
    """Two runs of one release compared (?a=RUN&b=RUN): LoC-weighted difference of scaled pass@1 (a minus b,
    percentage points) with a paired bootstrap 95% interval resampling papers and an exact McNemar p-value,
    overall and per paper, and per item both pass values and each run's item page (outcome id); `?items=disagreements`
    lists only the items one run passes and the other fails. A scope of one paper has no interval (`ci_low` and
    `ci_high` null): one cluster cannot be resampled; `interval_note` says why, or warns when there are few papers.
    Held-out items count in `overall` only (`items_withheld`) unless you are a maintainer."""

    @extend_schema(
        parameters=[
            OpenApiParameter("a", int, required=True, description="Run id."),
            OpenApiParameter("b", int, required=True, description="Run id."),
        ],
        responses={200: OpenApiTypes.OBJECT},
    )
    def get(self, request, name: str) -> Response:
        version = release_get(name=name, user=request.user)
        # A ComparisonError is a refusal answered in the one error body (common.api.exception_handler).
        result = comparison_from_query(version=version, params=request.query_params, user=request.user)
        return Response(comparison_record(result))


class DifficultyCSVRenderer(BaseRenderer):
    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None) -> bytes:
        if isinstance(data, dict):  # an error body
            return csv_text(
                header=["error", "message"], rows=[[data["error"]["code"], data["error"]["message"]]]
            ).encode(self.charset)
        return csv_text(
            header=list(DIFFICULTY_FIELDS), rows=([row[key] for key in DIFFICULTY_FIELDS] for row in data)
        ).encode(self.charset)


class DifficultySerializer(serializers.Serializer):
    item = serializers.IntegerField()
    paper = serializers.CharField()
    file = serializers.CharField()
    snippet = serializers.CharField()
    loc = serializers.IntegerField()
    models = serializers.IntegerField(help_text="Leaderboard entries with a scored answer (calibration left out).")
    passed = serializers.IntegerField(help_text="Entries passing it (most of their samples).")
    pass_share = serializers.FloatField(help_text="passed / models, 0..1.")
    point_biserial = serializers.FloatField(
        allow_null=True,
        help_text="Correlation of passing with the entries' "
        "scaled pass@1; null where undefined (all or none pass, equal scores).",
    )


class Difficulty(APIView):
    """The release's snippets, hardest first: per snippet the leaderboard entries with a scored answer (`models`,
    calibration models left out), how many pass it (most of their samples), `pass_share`, and `point_biserial`, the
    correlation of passing it with the entries' scaled pass@1 (null where undefined). Held-out snippets are listed
    to maintainers only. JSON, or CSV with ?format=csv."""

    renderer_classes = [JSONRenderer, DifficultyCSVRenderer]

    @extend_schema(
        parameters=[OpenApiParameter("paper", str, description="Only this paper's snippets (its id).")],
        responses={
            (200, "application/json"): DifficultySerializer(many=True),
            (200, "text/csv"): DifficultySerializer(many=True),
        },
    )
    def get(self, request, name: str, format: str | None = None) -> Response:
        version = release_get(name=name, user=request.user)
        items = snippet_difficulty(version=version, rows=leaderboard_rows(version=version), user=request.user)
        paper = request.query_params.get("paper")
        response = Response([difficulty_record(i) for i in items if not paper or i.snippet.paper == paper])
        if request.accepted_renderer.format == "csv":
            response["Content-Disposition"] = f'attachment; filename="difficulty-{version.name}.csv"'
        return response
