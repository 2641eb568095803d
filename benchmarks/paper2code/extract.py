"""Extract the model's code from its answer (FORMAT.md 7.1, protocol rcb-v1)."""

from __future__ import annotations

import re

# Non-greedy up to the next fence: an unterminated last block is not a block, so an answer cut off
# mid-block falls back to the previous complete one (or to "").
_BLOCK_RE = re.compile(r"```python\n(.*?)```", re.DOTALL)


def extract_code(answer: str) -> str:
    """The body of the last ```python block in `answer`, or "" when there is none."""
    blocks = _BLOCK_RE.findall(answer)
    return blocks[-1] if blocks else ""


def has_code_block(answer: str) -> bool:
    """Whether `answer` holds a complete ```python block for `extract_code` to take."""
    return _BLOCK_RE.search(answer) is not None
