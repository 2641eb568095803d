"""Extraction takes the last ```python block of an answer, exactly as rcb-v1 does (FORMAT.md 7.1)."""

from __future__ import annotations

import pytest

from benchmarks.paper2code.extract import extract_code


@pytest.mark.parametrize(
    ("answer", "code"),
    [
        ("```python\n    x = 1\n```", "    x = 1\n"),
        ("Here you go:\n```python\n    x = 1\n```\nDone.", "    x = 1\n"),
        ("```python\na\n```\ntext\n```python\nb\n```\n", "b\n"),
        ("```python\na\n```\n```python\nb = 1\n", "a\n"),  # an unterminated last block is not a block
        ("```python\nb = 1\n", ""),
        ("```py\nx\n```", ""),
        ("```Python\nx\n```", ""),
        ("``` python\nx\n```", ""),
        ("```python x\n```", ""),
        ("```\nx\n```", ""),
        ("no code at all", ""),
        ("", ""),
        ("```python\n```", ""),
        ("```python\nx = '``'\n```", "x = '``'\n"),
        ("```python\nx\n```python\ny\n```", "x\n"),  # a block ends at the next three backticks, whatever follows
    ],
)
def test_extract_code(answer: str, code: str) -> None:
    assert extract_code(answer) == code
