"""Fixtures of the agents app's tests: the evaluation tests' own, imported rather than copied."""

from tests.evaluation.conftest import celery_inline  # noqa: F401 (a fixture)
