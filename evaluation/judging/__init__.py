"""The one step from an answer to its verdict (evaluation/judging/step.py): single-shot items, agent items, uploads,
reproduction and validation all judge through it, so a verdict rule is written once."""

from evaluation.judging.step import answer_verdict, environment_failed, item_judge

__all__ = ["answer_verdict", "environment_failed", "item_judge"]
