from django.apps import AppConfig


class EvaluationConfig(AppConfig):
    name = "evaluation"

    def ready(self) -> None:
        from benchmarks.models import BenchmarkVersion
        from benchmarks.services import version_published
        from evaluation.services import continuous_runs_start

        version_published.connect(continuous_runs_start, sender=BenchmarkVersion,
                                  dispatch_uid="evaluation.continuous_runs_start")
