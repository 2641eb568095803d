"""Masking shows the model a TODO in place of one snippet; splicing puts an answer back between the markers."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchmarks.paper2code.markers import is_marker, parse, split_lines
from benchmarks.paper2code.masking import mask, noop, splice, strip_markers

NESTED = """import torch


class Model:
    def forward(self, x):
        h = x
        # <paper2code name="outer">
        y = h + 1
        # <paper2code name="inner">
        z = y * 2  # double
        # </paper2code name="inner">
        out = z.sum()
        # </paper2code name="outer">
        return out
"""


def test_mask_parent_hides_child_entirely() -> None:
    f = parse(NESTED)
    assert (
        mask(f, f.snippet("outer"))
        == """import torch


class Model:
    def forward(self, x):
        h = x
        # TODO: Implement block "outer"
        # Approximately 3 line(s) of code.
        return out
"""
    )


def test_mask_child_keeps_parent_code_without_markers() -> None:
    f = parse(NESTED)
    assert (
        mask(f, f.snippet("inner"))
        == """import torch


class Model:
    def forward(self, x):
        h = x
        y = h + 1
        # TODO: Implement block "inner"
        # Approximately 1 line(s) of code.
        out = z.sum()
        return out
"""
    )


def test_mask_uses_code_indent_not_marker_indent() -> None:
    f = parse('def f():\n# <paper2code name="s">\n\n        x = 1\n    y = 2\n# </paper2code name="s">\n')
    masked = mask(f, f.snippet("s"))
    assert masked == 'def f():\n    # TODO: Implement block "s"\n    # Approximately 2 line(s) of code.\n'


def test_mask_keeps_crlf_and_missing_final_newline() -> None:
    f = parse('a\r\n  # <paper2code name="s">\r\n  b\r\n  # </paper2code name="s">')
    assert mask(f, f.snippet("s")) == 'a\r\n  # TODO: Implement block "s"\r\n  # Approximately 1 line(s) of code.'


def test_mask_of_an_empty_snippet_has_no_indent() -> None:
    f = parse('    # <paper2code name="e">\n    # </paper2code name="e">\n')
    assert mask(f, f.snippet("e")) == '# TODO: Implement block "e"\n# Approximately 0 line(s) of code.\n'


def test_mask_rejects_a_snippet_of_another_file() -> None:
    with pytest.raises(ValueError):
        mask(parse(NESTED), parse(NESTED.replace("inner", "other")).snippet("other"))


def test_splice_replaces_code_and_keeps_markers() -> None:
    f = parse(NESTED)
    spliced = splice(f, f.snippet("inner"), "        z = y * 3")
    assert spliced == NESTED.replace("z = y * 2  # double", "z = y * 3")
    assert parse(spliced).is_valid


def test_splice_empty_code_leaves_no_lines_between_markers() -> None:
    f = parse(NESTED)
    assert splice(f, f.snippet("inner"), "") == NESTED.replace("        z = y * 2  # double\n", "")


def test_splice_adds_the_files_own_newline() -> None:
    f = parse('# <paper2code name="s">\r\nx\r\n# </paper2code name="s">\r\n')
    assert splice(f, f.snippet("s"), "y") == '# <paper2code name="s">\r\ny\r\n# </paper2code name="s">\r\n'


def test_noop_is_pass_at_code_indent() -> None:
    f = parse(NESTED)
    assert noop(f.snippet("outer")) == "        pass\n"
    assert parse(splice(f, f.snippet("outer"), noop(f.snippet("outer")))).snippet("outer").loc == 1


def test_strip_markers_gives_plain_reference() -> None:
    assert strip_markers(NESTED) == "".join(line for line in NESTED.splitlines(True) if "paper2code" not in line)


names = st.text(st.characters(blacklist_characters='"\n\r', blacklist_categories=("Cs",)), min_size=1, max_size=8)
code_lines = st.one_of(
    st.from_regex(r"[a-z_][a-z0-9_ =+()#']{0,12}", fullmatch=True),
    st.from_regex(r"#[a-z ]{0,8}", fullmatch=True),
    st.from_regex(r"[ \t]{0,4}", fullmatch=True),
)


@st.composite
def annotated_files(draw: st.DrawFn) -> str:
    """A valid annotated file: unique names, nested snippets, mixed indentation, \\n or \\r\\n endings."""
    unique = iter(draw(st.lists(names, min_size=1, max_size=6, unique=True)))

    def snippet(indent: int, depth: int) -> list[str]:
        name = next(unique, None)
        if name is None:
            return []
        inner = indent + draw(st.sampled_from([0, 4]))
        pad = " " * indent
        return [f'{pad}# <paper2code name="{name}">', *block(inner, depth + 1), f'{pad}# </paper2code name="{name}">']

    def block(indent: int, depth: int) -> list[str]:
        lines: list[str] = []
        for kind in draw(st.lists(st.sampled_from(["code", "code", "snippet"]), max_size=4)):
            if kind == "snippet" and depth < 3:
                lines += snippet(indent + draw(st.sampled_from([0, 4])), depth)
            else:
                lines.append(" " * (indent + draw(st.sampled_from([0, 2]))) + draw(code_lines))
        return lines

    lines = block(0, 0) + snippet(draw(st.sampled_from([0, 4])), 0) + block(0, 0)
    ending = draw(st.sampled_from(["\n", "\r\n"]))
    return ending.join(lines) + (ending if draw(st.booleans()) else "")


@given(annotated_files())
def test_generated_files_are_valid(text: str) -> None:
    f = parse(text)
    assert f.is_valid and f.snippets


@given(annotated_files())
def test_splice_of_reference_reproduces_original(text: str) -> None:
    f = parse(text)
    for s in f.snippets:
        assert splice(f, s, s.code) == text


@given(annotated_files())
def test_mask_has_no_markers_and_placeholders_at_code_indent(text: str) -> None:
    f = parse(text)
    for s in f.snippets:
        masked = split_lines(mask(f, s))
        assert not any(is_marker(line) for line in masked)
        bare = [line.rstrip("\r\n") for line in masked]
        at = bare.index(f'{s.code_indent}# TODO: Implement block "{s.name}"')
        assert bare[at + 1] == f"{s.code_indent}# Approximately {s.loc} line(s) of code."
        # Putting the snippet's plain code back in place of the placeholders gives the plain reference.
        assert "".join(masked[:at]) + strip_markers(s.code) + "".join(masked[at + 2 :]) == strip_markers(text)
