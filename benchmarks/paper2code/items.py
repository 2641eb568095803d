"""A release's items file (JSON lines, docs/LEADERBOARD.md) read back: every item with its prompt rebuilt.

Two line types: a `paper` line (its text and `prompt_template`, once, before that paper's items) and an `item` line
(`masked_code`, `file`, `snippet`, `loc`, ...), whose prompt is `prompt_fill(paper["prompt_template"], {**paper,
**item})`. Files of releases published before the template moved into the paper line give each item
`prompt_parts` instead, whose prompt is `paper_text.join(prompt_parts)`; both are read.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator

from benchmarks.paper2code.prompt import prompt_fill


def items_read(lines: Iterable[str | bytes]) -> Iterator[dict]:
    """Each item line as a dict with its `prompt` added; paper lines are taken in on the way."""
    papers: dict[str, dict] = {}
    for line in lines:
        if not line.strip():
            continue
        record = json.loads(line)
        if record["type"] == "paper":
            papers[record["paper"]] = record
            continue
        paper = papers[record["paper"]]
        if "prompt_parts" in record:
            prompt = paper["paper_text"].join(record["prompt_parts"])
        else:
            prompt = prompt_fill(paper["prompt_template"], {**paper, **record})
        yield {**record, "prompt": prompt}
