"""Snippet markers are parsed into a tree, and every marker problem is reported at file:line with its names."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchmarks.paper2code.markers import END_RE, START_RE, AnnotatedFile, count_loc, parse
from benchmarks.paper2code.problems import Problem

FORMAT_EXAMPLE = """class Attention:
    def forward(self, q, k, v):
        # <paper2code name="compute attention">
        scores = q @ k.T / self.scale  # scaled dot product

        # softmax over keys
        return scores.softmax(-1) @ v
        # </paper2code name="compute attention">
"""

NESTED = """def step(x):
    # <paper2code name="outer">
    y = x + 1
    # <paper2code name="inner">
    z = y * 2
    # </paper2code name="inner">
    return z
    # </paper2code name="outer">


def other():
    # <paper2code name="second">
    return 0
    # </paper2code name="second">
"""


def only_error(f: AnnotatedFile) -> Problem:
    assert len(f.errors) == 1, f.problems
    return f.errors[0]


def test_format_example() -> None:
    f = parse(FORMAT_EXAMPLE, "model.py")
    assert f.is_valid and f.problems == ()
    (s,) = f.snippets
    assert (s.name, s.file, s.index, s.start_line, s.end_line) == ("compute attention", "model.py", 0, 3, 8)
    assert (s.indent, s.parent, s.depth, s.code_indent) == (" " * 8, None, 0, " " * 8)
    assert s.code == "".join(FORMAT_EXAMPLE.splitlines(keepends=True)[3:7])
    assert s.loc == 2
    assert f.snippet("compute attention") is s


def test_regexes_are_the_format_ones() -> None:
    assert START_RE.match('  #<paper2code   name="a b">  ').group(1) == "a b"
    assert END_RE.match('# </paper2code name="x">\n').group(1) == "x"
    assert not START_RE.match('# <paper2code name="">')


def test_nested_tree() -> None:
    f = parse(NESTED)
    outer, inner, second = f.snippets
    assert [s.name for s in f.snippets] == ["outer", "inner", "second"]
    assert [s.index for s in f.snippets] == [0, 1, 2]
    assert (inner.parent, inner.depth, outer.parent, second.parent, second.depth) == (0, 1, None, None, 0)
    assert f.children(outer) == (inner,) and f.children(inner) == ()
    assert '# <paper2code name="inner">' in outer.code
    assert (outer.loc, inner.loc, second.loc) == (3, 1, 1)


def test_snippet_missing_raises_key_error() -> None:
    with pytest.raises(KeyError):
        parse(NESTED).snippet("nope")


def test_crlf_and_missing_final_newline() -> None:
    f = parse('a = 1\r\n\t# <paper2code name="s">\r\n\tb = 2\r\n\t# </paper2code name="s">')
    (s,) = f.snippets
    assert f.is_valid
    assert (s.start_line, s.end_line, s.indent, s.code, s.code_indent) == (2, 4, "\t", "\tb = 2\r\n", " ")


def test_empty_snippet() -> None:
    (s,) = parse('# <paper2code name="e">\n# </paper2code name="e">\n').snippets
    assert (s.code, s.loc, s.code_indent) == ("", 0, "")


def test_unclosed_start() -> None:
    f = parse('x = 1\n# <paper2code name="open">\ny = 2\n', "m.py")
    p = only_error(f)
    assert (p.line, p.names) == (2, ("open",)) and "m.py:2" in str(p) and "never closed" in p.message
    assert f.snippets == () and not f.is_valid


def test_end_without_start() -> None:
    p = only_error(parse('x = 1\n# </paper2code name="lost">\n', "m.py"))
    assert (p.line, p.names) == (2, ("lost",)) and "m.py:2" in str(p) and '"lost"' in p.message


def test_end_of_a_name_that_is_not_open() -> None:
    f = parse('# <paper2code name="a">\nx\n# </paper2code name="b">\n# </paper2code name="a">\n', "m.py")
    p = only_error(f)
    assert (p.line, p.names) == (3, ("b", "a")) and "m.py:3" in str(p)
    assert [s.name for s in f.snippets] == ["a"]


def test_crossed_nesting_reported_once_and_neither_returned() -> None:
    text = '# <paper2code name="a">\n# <paper2code name="b">\nx\n# </paper2code name="a">\n# </paper2code name="b">\n'
    f = parse(text, "m.py")
    p = only_error(f)
    assert (p.line, p.names) == (4, ("a", "b")) and "m.py:4" in str(p) and "nest" in p.message
    assert f.snippets == ()


def test_crossing_inside_a_valid_parent_keeps_the_parent() -> None:
    text = (
        '# <paper2code name="p">\n# <paper2code name="a">\n# <paper2code name="b">\n'
        '# </paper2code name="a">\n# </paper2code name="b">\n# </paper2code name="p">\n'
    )
    f = parse(text)
    assert len(f.errors) == 1 and [s.name for s in f.snippets] == ["p"]


def test_indentation_mismatch_names_both_lines_and_keeps_snippet() -> None:
    f = parse('def f():\n    # <paper2code name="s">\n    pass\n# </paper2code name="s">\n', "m.py")
    p = only_error(f)
    assert (p.line, p.names) == (4, ("s",)) and "m.py:4" in str(p)
    assert "line 2" in p.message and "line 4" in p.message
    assert [s.name for s in f.snippets] == ["s"]


def test_duplicate_name_is_an_error_but_both_are_returned() -> None:
    text = '# <paper2code name="d">\nx\n# </paper2code name="d">\n' * 2
    f = parse(text, "m.py")
    p = only_error(f)
    assert (p.line, p.names) == (4, ("d",)) and "m.py:4" in str(p) and "1" in p.message and "4" in p.message
    assert len(f.snippets) == 2 and f.snippet("d").start_line == 1


@pytest.mark.parametrize(
    ("line", "names", "hint"),
    [
        ("# <paper2code name=x>", ("x",), "double quotes"),
        ('<paper2code name="a">', ("a",), '"#"'),
        ('x = 1  # <paper2code name="a">', ("a",), 'before "#"'),
        ('# <paper2cod name="a">', ("a",), "spelled"),
        ('# <Paper2Code name="a">', ("a",), "spelled"),
        ("# </paper2code>", (), "name"),
        ('# <paper2code name="a"> extra', ("a",), "extra"),
        ('# <paper2code name = "a">', ("a",), "="),
        ('# <paper2code name="">', (), "empty"),
        ('# <paper2code name="a"', ("a",), ">"),
    ],
)
def test_near_miss_is_a_warning(line: str, names: tuple[str, ...], hint: str) -> None:
    f = parse(f"x = 1\n{line}\n", "m.py")
    (p,) = f.problems
    assert (p.severity, p.line, p.names) == ("warning", 2, names)
    assert "m.py:2" in str(p) and hint in p.message
    assert f.is_valid and f.snippets == ()


def test_mentions_of_paper2code_files_are_not_near_misses() -> None:
    assert parse('open("paper2code_paper.tex")\n# see paper2code_test.py\n').problems == ()


@pytest.mark.parametrize(
    ("code", "loc"),
    [
        ("", 0),
        ("\n\n", 0),
        ("   \n\t\n", 0),
        ("x = 1\n", 1),
        ("x = 1  # c\n", 1),
        ("# c\n    # indented\n\t# tab-indented\n", 0),
        ("#!/usr/bin/env python\n", 0),
        ('"""Doc\n# looks like a comment\nnot a comment\n"""\n', 3),
        ('# <paper2code name="n">\ny\n# </paper2code name="n">\n', 1),
        ("a\r\nb", 2),
    ],
)
def test_count_loc(code: str, loc: int) -> None:
    assert count_loc(code) == loc


@given(st.text())
def test_parse_never_raises_on_any_text(text: str) -> None:
    f = parse(text)
    assert all(p.line >= 1 for p in f.problems)


marker_like_lines = st.one_of(
    st.builds(
        lambda indent, hash_, slash, tag, name, tail: f'{indent}{hash_}<{slash}{tag} name="{name}">{tail}',
        st.sampled_from(["", "  ", "\t", "    "]),
        st.sampled_from(["# ", "#", ""]),
        st.sampled_from(["", "/"]),
        st.sampled_from(["paper2code", "paper2cod", "Paper2Code"]),
        st.sampled_from(["a", "b", "a b", ""]),
        st.sampled_from(["", " ", " x"]),
    ),
    st.sampled_from(["x = 1", "", "  # c", "# </paper2code>", "# <paper2code name=a>"]),
    st.text(max_size=20),
)


@given(st.lists(marker_like_lines, max_size=30), st.sampled_from(["\n", "\r\n"]))
def test_parse_never_raises_on_marker_like_lines(lines: list[str], ending: str) -> None:
    f = parse(ending.join(lines), "m.py")
    for s in f.snippets:
        assert 1 <= s.start_line < s.end_line and f.snippets[s.index] is s
        parent = f.snippets[s.parent] if s.parent is not None else None
        assert parent is None or parent.start_line < s.start_line < s.end_line < parent.end_line


code_lines = st.from_regex(r"[a-z_][a-z0-9_ =+()#]{0,15}", fullmatch=True)
noise_lines = st.one_of(
    st.from_regex(r"[ \t]{0,6}", fullmatch=True),
    st.builds(
        lambda ws, text: f"{ws}#{text}",
        st.from_regex(r"[ \t]{0,6}", fullmatch=True),
        st.from_regex(r"[^\n]{0,10}", fullmatch=True),
    ),
)


@given(st.lists(code_lines, max_size=8), st.lists(st.tuples(st.integers(0, 8), noise_lines), max_size=8))
def test_loc_ignores_blank_and_comment_lines(code: list[str], noise: list[tuple[int, str]]) -> None:
    noisy = list(code)
    for at, line in noise:
        noisy.insert(min(at, len(noisy)), line)

    def snippet_loc(lines: list[str]) -> int:
        body = "".join(f"    {x}\n" for x in lines)
        text = f'def f():\n    # <paper2code name="s">\n{body}    # </paper2code name="s">\n'
        return parse(text).snippet("s").loc

    assert snippet_loc(noisy) == snippet_loc(code) == count_loc("\n".join(code))
