"""Code as code on every page: Pygments highlighting for snippets, masked files, answers and diffs, and the diff of
a model's answer against the reference. Pygments escapes what it renders, so hostile text stays text."""

from __future__ import annotations

import difflib

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import DiffLexer, PythonLexer, TextLexer, get_lexer_by_name, get_lexer_for_filename
from pygments.util import ClassNotFound

CSS_CLASS = "highlight"
# Past this size a text is shown plain: highlighting it would cost more than anyone reads.
MAX_HIGHLIGHT_CHARS = 100_000
_FORMATTER = HtmlFormatter(cssclass=CSS_CLASS, wrapcode=True)


def _lexer(language: str):
    """A lexer by name ("python", "diff") or by a file's name ("model.py"); plain text when none fits."""
    if language in ("", "python"):
        return PythonLexer()
    if language == "diff":
        return DiffLexer()
    try:
        return get_lexer_for_filename(language) if "." in language else get_lexer_by_name(language)
    except ClassNotFound:
        return TextLexer()


def code_html(text: str, language: str = "python") -> SafeString:
    """`text` as a highlighted <pre> block (a plain escaped one when it is very long)."""
    if len(text) > MAX_HIGHLIGHT_CHARS:
        return mark_safe(f'<div class="{CSS_CLASS}"><pre><code>{escape(text)}</code></pre></div>')
    return mark_safe(highlight(text, _lexer(language), _FORMATTER))


def answer_diff(*, reference: str, answer: str, labels: tuple[str, str] = ("reference", "model's answer")) -> str:
    """A unified diff from the reference snippet (or another start, named in `labels`) to the model's code as the
    test ran it, indentation included (the splice takes an answer's lines unchanged, so a dedented answer is a real
    difference); "" when they are the same."""
    before = reference.rstrip().splitlines()
    after = answer.rstrip().splitlines()
    if before == after:
        return ""
    return "\n".join(difflib.unified_diff(before, after, *labels, lineterm="", n=3)) + "\n"


def style_css() -> str:
    """The stylesheet the highlighted blocks need (static/css/pygments.css is this text)."""
    return _FORMATTER.get_style_defs(f".{CSS_CLASS}") + "\n"
