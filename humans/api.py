"""REST API of the human baseline, for tools with their own interface: open an attempt (an item or a random one),
pause, resume, abandon, submit once, read the attempt and its result; and a release's Humans row. The same services
and rules as the pages: public items only, one attempt per item per person, no result before the submission."""

from __future__ import annotations

from django.http import Http404
from drf_spectacular.utils import extend_schema
from rest_framework import permissions, serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from benchmarks.api import release_get
from humans import selectors, services
from humans.models import Attempt
from humans.prompts import attempt_prompt


class AttemptOpenSerializer(serializers.Serializer):
    item = serializers.IntegerField(
        required=False, allow_null=True, help_text="A public item's id; omitted: a random item not yet attempted."
    )
    with_paper = serializers.BooleanField(default=True, help_text="false: the ablation, the prompt without the paper.")


class AttemptSubmitSerializer(serializers.Serializer):
    body = serializers.CharField(trim_whitespace=False, help_text="The snippet body, at any consistent indentation.")
    keystrokes = serializers.IntegerField(required=False, allow_null=True, min_value=0)
    pastes = serializers.JSONField(required=False, help_text='Paste events: [{"at": seconds, "chars": n}, ...].')


def attempt_record(attempt: Attempt) -> dict:
    """An attempt as the API returns it to its person: the prompt while it is open, the result once scored."""
    record: dict = {
        "id": attempt.pk,
        "release": attempt.version.name,
        "item": attempt.snippet_id,
        "with_paper": attempt.with_paper,
        "state": attempt.state,
        "opened_at": attempt.opened_at,
        "paused_seconds": round(attempt.paused_seconds, 3),
        "active_seconds": attempt.active_seconds,
        "fast_paste": attempt.fast_paste,
        "excluded_reason": attempt.excluded_reason,
    }
    if attempt.state == Attempt.State.OPEN:
        prompt = attempt_prompt(attempt=attempt)
        record["prompt"] = prompt.text
        record["masked_path"], record["masked_code"] = prompt.masked_path, prompt.masked
    if attempt.state == Attempt.State.SUBMITTED:
        item = selectors.attempt_result(attempt=attempt)
        record["result"] = (
            None
            if item is None
            else {
                "status": item.outcome.status,
                "category": item.outcome.category,
                "detail": item.outcome.detail,
                "review": item.outcome.review,  # a maintainer's decision on a flag: confirmed, cleared or ""
                "review_reason": item.outcome.review_reason,
                "tests": item.tests,
                "reference_diff": item.diff,
            }
        )
    return record


def _own(request, pk: int) -> Attempt:
    attempt = selectors.attempt_get(pk=pk, user=request.user)
    if attempt is None:
        raise Http404(f"you have no attempt {pk}")
    return attempt


class AttemptOpen(APIView):
    """Open an attempt at a public item of the release (the clock starts now), or return the live one at it."""

    permission_classes = [permissions.IsAuthenticated]

    @extend_schema(request=AttemptOpenSerializer, responses={201: dict})
    def post(self, request, name: str) -> Response:
        version = release_get(name=name, user=request.user)
        data = AttemptOpenSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        attempt = services.attempt_open(
            user=request.user,
            version=version,
            snippet_id=data.validated_data.get("item"),
            with_paper=data.validated_data["with_paper"],
        )
        return Response(attempt_record(attempt), status=status.HTTP_201_CREATED)


class AttemptDetail(APIView):
    """An attempt of yours: its state, clock and, once scored, its result."""

    permission_classes = [permissions.IsAuthenticated]

    @extend_schema(responses={200: dict})
    def get(self, request, pk: int) -> Response:
        return Response(attempt_record(_own(request, pk)))


class AttemptSubmit(APIView):
    """Submit the body, once: the clock stops and the answer is scored by the evaluation pipeline."""

    permission_classes = [permissions.IsAuthenticated]

    @extend_schema(request=AttemptSubmitSerializer, responses={202: dict})
    def post(self, request, pk: int) -> Response:
        attempt = _own(request, pk)
        data = AttemptSubmitSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        attempt = services.attempt_submit(
            attempt=attempt,
            user=request.user,
            body=data.validated_data["body"],
            keystrokes=data.validated_data.get("keystrokes"),
            pastes=data.validated_data.get("pastes"),
        )
        return Response(attempt_record(attempt), status=status.HTTP_202_ACCEPTED)


class AttemptAction(APIView):
    """Base of pause, resume and abandon."""

    permission_classes = [permissions.IsAuthenticated]
    service = staticmethod(services.attempt_pause)

    @extend_schema(request=None, responses={200: dict})
    def post(self, request, pk: int) -> Response:
        return Response(attempt_record(self.service(attempt=_own(request, pk), user=request.user)))


class AttemptPause(AttemptAction):
    """Stop the clock."""


class AttemptResume(AttemptAction):
    """Start the clock again; the pause is not counted."""

    service = staticmethod(services.attempt_resume)


class AttemptAbandon(AttemptAction):
    """Give the item up: nothing is scored and it cannot be attempted again."""

    service = staticmethod(services.attempt_abandon)


class ReleaseHumans(APIView):
    """The release's Humans row (self-reported): pass@1 and scaled pass@1 with 95% intervals over attempted items
    (null under interval_min_items items: too few to resample), people, attempts, median minutes, thin items; per
    item, the human pass rate."""

    permission_classes = [permissions.AllowAny]

    @extend_schema(responses={200: dict})
    def get(self, request, name: str) -> Response:
        version = release_get(name=name, user=request.user)
        if version.status == version.Status.DRAFT:
            raise Http404(f"release {name} is a draft: drafts have no results")
        row = selectors.humans_row(version=version)
        return Response(
            {
                "release": version.name,
                "mode": "human",
                "provenance": "self_reported",
                "people": row.people,
                "attempts": row.attempts,
                "items": row.items,
                "pass_rate": row.pass_rate,
                "pass_rate_ci": None if row.pass_ci is None else [row.pass_ci.low, row.pass_ci.high],
                "scaled_pass_rate": row.scaled_pass_rate,
                "scaled_pass_rate_ci": None if row.scaled_ci is None else [row.scaled_ci.low, row.scaled_ci.high],
                "interval_min_items": row.interval_min_items,
                "median_minutes": row.median_minutes,
                "thin_items": row.thin_items,
                "thin_below_people": row.thin_people,
                "not_scored": row.counts,
                "per_item": {
                    str(pk): {"people": r.people, "passed": r.passed, "thin": r.thin} for pk, r in row.per_item.items()
                },
            }
        )
