"""CSV that spreadsheets open safely: a text cell they would read as a formula is prefixed with a quote (OWASP)."""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterable, Sequence
from typing import Any

# Excel, LibreOffice and Google Sheets evaluate a cell starting with one of these as a formula.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?")


def csv_cell(value: Any) -> Any:
    """The value as a spreadsheet must see it: plain numbers stay numbers, formula-like text becomes text."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS) and not _NUMBER.fullmatch(value):
        return "'" + value
    return value


def csv_text(*, header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A whole CSV document, every cell neutralised; the one way the platform writes CSV."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow([csv_cell(name) for name in header])
    writer.writerows([csv_cell(value) for value in row] for row in rows)
    return buffer.getvalue()
