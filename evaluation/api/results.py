"""REST API of a run's per-item results, with each test's outcome."""

from __future__ import annotations

from functools import cached_property

from django.shortcuts import get_object_or_404
from django.urls import reverse
from drf_spectacular.utils import extend_schema_field
from rest_framework import generics, serializers

from benchmarks import visibility
from evaluation.models import EvaluationRun, Outcome
from evaluation.selectors.item_pages import RunItem, run_outcomes_ordered
from evaluation.selectors.runs import runs_visible


class SubtestsSerializer(serializers.Serializer):
    passed = serializers.IntegerField(help_text="Sub-tests of the test that passed.")
    run = serializers.IntegerField(help_text="Sub-tests the test ran (0: it has none).")


class TestResultSerializer(serializers.Serializer):
    id = serializers.CharField()
    outcome = serializers.CharField()
    passed = serializers.BooleanField()
    problem = serializers.CharField()
    subtests = SubtestsSerializer()
    detail = serializers.CharField(help_text="The failing test's traceback tail where the task is visible to you.")


class ResultSerializer(serializers.ModelSerializer):
    """One item's outcome with the error detail its page shows, the model's code and the harness's count of the
    tests (as the item's page shows it); never the reference code, the tests' files or their output."""

    item = serializers.IntegerField(source="snippet_id")
    paper = serializers.CharField(source="snippet.task.paper.slug")
    file = serializers.CharField(source="snippet.file_path")
    snippet = serializers.CharField(source="snippet.name")
    category_label = serializers.CharField(
        source="get_category_display", help_text='The category in words, e.g. "Name or import error".'
    )
    detail = serializers.CharField(
        help_text="What went wrong, as the item's page says it (e.g. the exception's "
        "name, the time limit); empty when it passed."
    )
    extracted_code = serializers.SerializerMethodField()
    page = serializers.SerializerMethodField(help_text="The item's page: the code beside the reference, the diff.")
    tests_summary = serializers.CharField(help_text='The harness\'s own count, e.g. "3 of 4 tests passed".')
    tests = serializers.SerializerMethodField(
        help_text="Each test the harness counted: id, outcome, passed, why it "
        "did not, sub-tests ({passed, run}); the traceback tail where the task is "
        "visible to you."
    )
    traceback = serializers.SerializerMethodField(
        help_text="The last traceback the item printed, as its page shows it (a syntax error's too, which no test "
        'ran to count), where the task is visible to you; "" otherwise or when it passed.'
    )
    output = serializers.SerializerMethodField(
        help_text='The last lines the item printed (stdout, then stderr), as its page shows them; "" as traceback.'
    )
    error_line = serializers.SerializerMethodField(
        help_text="The line of the snippet's file the traceback's last frame there names (a syntax error's line); "
        "null when none."
    )

    class Meta:
        model = Outcome
        fields = [
            "item",
            "sample",
            "paper",
            "file",
            "snippet",
            "status",
            "category",
            "category_label",
            "detail",
            "duration",
            "extracted_code",
            "page",
            "tests_summary",
            "tests",
            "traceback",
            "output",
            "error_line",
        ]

    def _item(self, outcome: Outcome) -> RunItem:
        return RunItem(outcome=outcome, show_reference=outcome.snippet.task_id in self.context.get("visible_tasks", ()))

    @extend_schema_field(TestResultSerializer(many=True))
    def get_tests(self, outcome: Outcome) -> list[dict]:
        return self._item(outcome).tests

    def get_traceback(self, outcome: Outcome) -> str:
        return self._item(outcome).traceback_tail

    def get_output(self, outcome: Outcome) -> str:
        return self._item(outcome).output_tail

    def get_error_line(self, outcome: Outcome) -> int | None:
        return self._item(outcome).error_line

    def get_extracted_code(self, outcome: Outcome) -> str | None:
        return outcome.generation.extracted_code if outcome.generation else None

    def get_page(self, outcome: Outcome) -> str:
        url = reverse("run-item", args=[outcome.run_id, outcome.pk])
        request = self.context.get("request")
        return request.build_absolute_uri(url) if request else url


class RunResults(generics.ListAPIView):
    """Per-item results of a run so far, with the error detail of the item's page: public items for everyone,
    held-out ones for maintainers only (the same rule as the run page)."""

    serializer_class = ResultSerializer

    @cached_property
    def run(self) -> EvaluationRun:  # read once per request: the queryset and the serializer's context need it
        return get_object_or_404(runs_visible(user=self.request.user).select_related("version"), pk=self.kwargs["pk"])

    def get_queryset(self):
        return run_outcomes_ordered(run=self.run, user=self.request.user).select_related(
            "generation", "run__model", "snippet__task__paper"
        )

    def get_serializer_context(self) -> dict:
        context = dict(super().get_serializer_context())
        if "pk" in self.kwargs:
            context["visible_tasks"] = set(
                visibility.tasks_visible(version=self.run.version, user=self.request.user).values_list("pk", flat=True)
            )
        return context
