"""Judging an answer: the one step from an answer to its recorded verdict (step.py), the sealed replay (sealed.py:
record the reference's calls, replay an answer alone), its data-only comparison (compare.py) and the verdict that
combines the paper's tests with the replay (verdict.py). Single-shot items, agent items, uploads, reproduction and
validation all judge through step.py, so a verdict rule is written once."""
