"""The "original" masking style reproduces the original harness's masked file byte for byte (issue 11, item 4 (a)).

Every expected value below is written out by hand from the stated rule, never computed by the code under test:
lines split as str.splitlines splits, the two placeholder lines each ending with its own "\\n", every other marker
line removed, all joined by "\\n".
"""

from __future__ import annotations

from benchmarks.paper2code.markers import parse
from benchmarks.paper2code.masking import mask_original

NESTED = (
    b"import torch\n"
    b"\n"
    b"\n"
    b"class Model:\n"
    b"    def forward(self, x):\n"
    b"        h = x\n"
    b'        # <paper2code name="outer">\n'
    b"        y = h + 1\n"
    b'        # <paper2code name="inner">\n'
    b"        z = y * 2  # double\n"
    b'        # </paper2code name="inner">\n'
    b"        out = z.sum()\n"
    b'        # </paper2code name="outer">\n'
    b"        return out\n"
)


def masked(source: bytes, name: str) -> bytes:
    annotated = parse(source.decode("utf-8"), "model.py")
    assert annotated.is_valid
    return mask_original(annotated, annotated.snippet(name)).encode("utf-8")


def test_outer_snippet_hides_the_inner_one_and_loses_the_final_newline() -> None:
    assert masked(NESTED, "outer") == (
        b"import torch\n\n\nclass Model:\n    def forward(self, x):\n        h = x\n"
        b'        # TODO: Implement block "outer"\n\n'
        b"        # Approximately 3 line(s) of code.\n\n"
        b"        return out"
    )


def test_inner_snippet_drops_the_outer_markers() -> None:
    assert masked(NESTED, "inner") == (
        b"import torch\n\n\nclass Model:\n    def forward(self, x):\n        h = x\n"
        b"        y = h + 1\n"
        b'        # TODO: Implement block "inner"\n\n'
        b"        # Approximately 1 line(s) of code.\n\n"
        b"        out = z.sum()\n"
        b"        return out"
    )


LAST = b'def f(x):\n    # <paper2code name="last">\n    return x + 1\n    # </paper2code name="last">\n'


def test_snippet_ending_the_file_keeps_the_placeholders_newline() -> None:
    expected = b'def f(x):\n    # TODO: Implement block "last"\n\n    # Approximately 1 line(s) of code.\n'
    assert masked(LAST, "last") == expected
    assert masked(LAST.removesuffix(b"\n"), "last") == expected


def test_inner_snippet_ending_the_file_before_its_parents_end_marker() -> None:
    source = (
        b'def g():\n    # <paper2code name="body">\n    a = 1\n    # <paper2code name="tail">\n    return a\n'
        b'    # </paper2code name="tail">\n    # </paper2code name="body">'
    )
    assert (
        masked(source, "tail") == b'def g():\n    a = 1\n    # TODO: Implement block "tail"\n\n'
        b"    # Approximately 1 line(s) of code.\n"
    )
    assert (
        masked(source, "body") == b'def g():\n    # TODO: Implement block "body"\n\n'
        b"    # Approximately 2 line(s) of code.\n"
    )


def test_crlf_line_ends_become_newlines() -> None:
    source = b'a = 1\r\n# <paper2code name="s">\r\nb = 2\r\n# </paper2code name="s">\r\nc = 3\r\n'
    assert masked(source, "s") == b'a = 1\n# TODO: Implement block "s"\n\n# Approximately 1 line(s) of code.\n\nc = 3'


def test_lines_split_as_str_splitlines_splits() -> None:
    source = b'a = 1  \x0c b = 2\n# <paper2code name="s">\nx = 1\n# </paper2code name="s">\n'
    assert (
        masked(source, "s") == b'a = 1  \n b = 2\n# TODO: Implement block "s"\n\n# Approximately 1 line(s) of code.\n'
    )
