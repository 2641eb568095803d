"""Reading and writing problem sets (benchmarks/paper2code/pset.py) against FORMAT.md 1-3."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from datetime import date
from pathlib import Path

import pytest
import yaml

from benchmarks.paper2code.problems import PackageError
from benchmarks.paper2code.pset import YAML_DEPTH_MAX, read_pset, read_pset_with_warnings, write_pset

PAPER_TEX = "\\section{Method}\nAttention is softmax(QK^T)V.\n"
TEST_PY = "import model\nprint('ok')\n"
# Line 5 opens the snippet, line 7 closes it, line 8 returns.
MODEL_PY = """import math


def attention(q, k, v):
    # <paper2code name="compute attention scores">
    scores = q @ k.T / math.sqrt(k.shape[-1])
    # </paper2code name="compute attention scores">
    return scores @ v
"""


def paper_make(root: Path, paper_id: str = "attn", files: dict | None = None, **entry) -> dict:
    """Write a valid paper folder (`files` adds or replaces files; a None value leaves one out); return its entry."""
    contents = {"paper2code_paper.tex": PAPER_TEX, "paper2code_test.py": TEST_PY, "model.py": MODEL_PY}
    contents.update(files or {})
    for path, content in contents.items():
        if content is None:
            continue
        target = root / paper_id / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content, encoding="utf-8")
    return {
        "id": paper_id,
        "title": f"The {paper_id} paper",
        "arxiv_abs": "https://arxiv.org/abs/2406.14662v3",
        "arxiv_date": date(2025, 2, 6),
        "arxiv_v1_date": date(2024, 6, 20),
        "github_url": f"https://github.com/example/{paper_id}",
        "first_commit_date": date(2025, 4, 7),
        "last_commit_date": date(2025, 4, 8),
        "venue": "ICLR2025",
        "annotated_file_paths": "model.py",
        "context_file_paths": None,
        **entry,
    }


def pset_make(root: Path, *entries: dict) -> Path:
    (root / "papers.yaml").write_text(yaml.safe_dump(list(entries), sort_keys=False), encoding="utf-8")
    return root


def reported(root: Path) -> list[str]:
    """Every error of the set at `root`, as "file:line: error: message" lines."""
    with pytest.raises(PackageError) as info:
        read_pset(root)
    return [str(problem) for problem in info.value.problems]


def assert_reported(root: Path, where: str, *fragments: str) -> None:
    """Some error starts with `where` ("file" or "file:line") and contains every fragment."""
    problems = reported(root)
    hits = [p for p in problems if p.startswith(f"{where}: error:") and all(f in p for f in fragments)]
    assert hits, f"no error at {where} with {fragments}; got:\n" + "\n".join(problems)


# -- a valid set --------------------------------------------------------------------------------


def test_valid_set_reads_metadata_files_and_snippets(tmp_path):
    attn = paper_make(
        tmp_path,
        "attn",
        files={
            "paper2code_paper.md": "# Markdown copy\n",
            "requirements.txt": "torch\n",
            "__pycache__/model.cpython-311.pyc": b"\x00\x01",
            "stale.pyc": b"\x00",
        },
    )
    flow = paper_make(
        tmp_path,
        "flow",
        files={
            "paper2code_paper.tex": None,
            "paper2code_paper.md": "# Flow matching\n",
            "src/flow.py": MODEL_PY.replace("compute attention scores", "scale the scores"),
            "src/helpers.py": "X = 1\n",
            "paper2code_requirements.txt": "numpy\n",
            "requirements.txt": "ignored\n",
        },
        annotated_file_paths=["model.py", "./src/flow.py"],
        context_file_paths=["src/helpers.py"],
        arxiv_date="2025-03-02",
        first_commit_date="2025-03-01",
        last_commit_date=None,
        notes={"source": "hand-made"},
    )
    del flow["venue"]
    pset_make(tmp_path, attn, flow)

    first, second = read_pset(tmp_path)

    assert first.id == "attn" and first.title == "The attn paper" and first.venue == "ICLR2025"
    assert first.arxiv_date == date(2025, 2, 6) and first.last_commit_date == date(2025, 4, 8)
    assert first.paper_path == "paper2code_paper.tex" and first.paper_text == PAPER_TEX
    assert first.annotated_paths == ("model.py",) and first.context_paths == ()
    assert first.requirements_path == "requirements.txt" and first.requirements == "torch\n"
    assert first.test_entry_point == "paper2code_test.py"
    assert list(first.files) == sorted(first.files)
    assert set(first.files) == {
        "model.py",
        "paper2code_paper.md",
        "paper2code_paper.tex",
        "paper2code_test.py",
        "requirements.txt",
    }
    assert first.files["model.py"] == MODEL_PY.encode()
    [snippet] = first.annotated["model.py"].snippets
    assert (snippet.name, snippet.start_line, snippet.end_line, snippet.loc) == ("compute attention scores", 5, 7, 1)

    assert second.arxiv_date == date(2025, 3, 2) and second.first_commit_date == date(2025, 3, 1)
    assert second.last_commit_date is None and second.venue == ""
    assert second.paper_path == "paper2code_paper.md"
    assert second.annotated_paths == ("model.py", "src/flow.py") and second.context_paths == ("src/helpers.py",)
    assert second.annotated["src/flow.py"].snippets[0].name == "scale the scores"
    assert second.requirements_path == "paper2code_requirements.txt" and second.requirements == "numpy\n"
    assert second.extra == {"notes": {"source": "hand-made"}}
    metadata = second.metadata()
    assert metadata["annotated_file_paths"] == ["model.py", "src/flow.py"]
    assert metadata["context_file_paths"] == ["src/helpers.py"]
    assert metadata["arxiv_date"] == date(2025, 3, 2) and metadata["notes"] == {"source": "hand-made"}
    assert first.metadata()["context_file_paths"] is None
    assert set(second.file_hashes) == set(second.files)


def test_no_requirements_file_gives_empty_requirements(tmp_path):
    pset_make(tmp_path, paper_make(tmp_path))
    [paper] = read_pset(tmp_path)
    assert paper.requirements_path is None and paper.requirements == ""


def test_per_paper_yaml_is_ignored_even_when_it_disagrees_or_is_broken(tmp_path):
    broken = "mask_file_path: other.py\ntest_entry_point: run.py\n  : [\n"
    pset_make(tmp_path, paper_make(tmp_path, files={"paper2code.yaml": broken}))
    [paper] = read_pset(tmp_path)
    assert paper.annotated_paths == ("model.py",) and paper.test_entry_point == "paper2code_test.py"
    assert paper.files["paper2code.yaml"] == broken.encode()


def test_symlink_inside_the_folder_is_read_as_a_regular_file(tmp_path):
    pset_make(tmp_path, paper_make(tmp_path, files={"data/real.txt": "payload\n"}))
    os.symlink("data/real.txt", tmp_path / "attn" / "alias.txt")
    os.symlink("data", tmp_path / "attn" / "linked")
    [paper] = read_pset(tmp_path)
    assert paper.files["alias.txt"] == b"payload\n" and paper.files["linked/real.txt"] == b"payload\n"


# -- marker errors, reported with the paper-relative file and line --------------------------------

MARKER_CASES = {
    "unclosed marker": ('    # <paper2code name="a">\n    x = 1\n', 8, "never closed"),
    "end without start": ('    x = 1\n    # </paper2code name="a">\n', 9, "no matching start"),
    "crossed nesting": (
        '    # <paper2code name="a">\n    # <paper2code name="b">\n    x = 1\n'
        '    # </paper2code name="a">\n    # </paper2code name="b">\n',
        11,
        "must nest",
    ),
    "indentation mismatch": ('    # <paper2code name="a">\n    x = 1\n  # </paper2code name="a">\n', 10, "indented"),
    "duplicate names": (
        '    # <paper2code name="compute attention scores">\n    x = 1\n'
        '    # </paper2code name="compute attention scores">\n',
        8,
        "duplicate",
    ),
}


@pytest.mark.parametrize("case", MARKER_CASES)
def test_marker_errors_name_file_and_line(tmp_path, case):
    body, line, fragment = MARKER_CASES[case]
    model = MODEL_PY.replace("    return scores @ v\n", body + "    return scores @ v\n")
    pset_make(tmp_path, paper_make(tmp_path, files={"model.py": model}))
    name = '"compute attention scores"' if case == "duplicate names" else '"a"'
    assert_reported(tmp_path, f"attn/model.py:{line}", "paper attn:", fragment, name)


def test_unquoted_marker_name_is_a_warning_not_an_error(tmp_path):
    model = MODEL_PY + "# <paper2code name=helper>\n"
    pset_make(tmp_path, paper_make(tmp_path, files={"model.py": model}))
    papers, warnings = read_pset_with_warnings(tmp_path)
    assert [p.id for p in papers] == ["attn"] and read_pset(tmp_path)[0].id == "attn"
    assert len(warnings) == 1
    assert str(warnings[0]).startswith("attn/model.py:9: warning: paper attn:")
    assert "double quotes" in str(warnings[0])


def test_annotated_file_without_snippets(tmp_path):
    pset_make(tmp_path, paper_make(tmp_path, files={"model.py": "x = 1\n"}))
    assert_reported(tmp_path, "attn/model.py", "no snippets")


# -- folder errors ----------------------------------------------------------------------------------


def test_missing_test_entry_point(tmp_path):
    pset_make(tmp_path, paper_make(tmp_path, files={"paper2code_test.py": None}))
    assert_reported(tmp_path, "attn/paper2code_test.py", "missing test entry point")


def test_missing_paper_text(tmp_path):
    pset_make(tmp_path, paper_make(tmp_path, files={"paper2code_paper.tex": None}))
    assert_reported(tmp_path, "attn/paper2code_paper.tex", "missing paper text", "paper2code_paper.md")


def test_empty_paper_text(tmp_path):
    pset_make(tmp_path, paper_make(tmp_path, files={"paper2code_paper.tex": " \n\t\n"}))
    assert_reported(tmp_path, "attn/paper2code_paper.tex", "empty")


def test_annotated_and_context_paths_outside_the_folder_or_missing(tmp_path):
    (tmp_path / "x").write_text(MODEL_PY)
    paper_make(tmp_path)
    (tmp_path / "papers.yaml").write_text(
        "- id: attn\n"
        "  annotated_file_paths:\n"
        "    - model.py\n"
        "    - ../x\n"
        "  context_file_paths:\n"
        "    - /etc/passwd\n"
        "    - gone.py\n"
    )
    assert_reported(tmp_path, "papers.yaml:4", "paper attn:", "'../x'", "outside the paper folder")
    assert_reported(tmp_path, "papers.yaml:6", "'/etc/passwd'", "outside the paper folder")
    assert_reported(tmp_path, "papers.yaml:7", "context file attn/gone.py does not exist")


def test_missing_annotated_file(tmp_path):
    pset_make(tmp_path, paper_make(tmp_path, annotated_file_paths="nope.py"))
    assert_reported(tmp_path, "papers.yaml:10", "annotated file attn/nope.py does not exist")


def test_symlink_pointing_outside_the_folder(tmp_path):
    (tmp_path / "secret.txt").write_text("outside\n")
    pset_make(tmp_path, paper_make(tmp_path))
    os.symlink(tmp_path / "secret.txt", tmp_path / "attn" / "leak.txt")
    os.makedirs(tmp_path / "attn" / "sub")
    os.symlink("../../secret.txt", tmp_path / "attn" / "sub" / "leak2.txt")
    assert_reported(tmp_path, "attn/leak.txt", "symlink points outside the paper folder")
    assert_reported(tmp_path, "attn/sub/leak2.txt", "symlink points outside the paper folder")
    os.symlink("missing.txt", tmp_path / "attn" / "dangling.txt")
    os.symlink("..", tmp_path / "attn" / "sub" / "up")
    assert_reported(tmp_path, "attn/dangling.txt", "symlink is broken")
    assert_reported(tmp_path, "attn/sub/up", "loops")


def test_non_utf8_file_names_the_line_of_the_first_bad_byte(tmp_path):
    model = MODEL_PY.encode().replace(b"import math\n", b"import math\n\n# caf\xe9\n")
    pset_make(tmp_path, paper_make(tmp_path, files={"model.py": model}))
    assert_reported(tmp_path, "attn/model.py:3", "not valid UTF-8", "0xe9")


# -- papers.yaml errors -----------------------------------------------------------------------------


def test_missing_papers_yaml(tmp_path):
    paper_make(tmp_path)
    assert_reported(tmp_path, "papers.yaml", "missing")


def test_papers_yaml_not_a_list(tmp_path):
    (tmp_path / "papers.yaml").write_text("id: attn\ntitle: x\n")
    assert_reported(tmp_path, "papers.yaml:1", "must be a list", "dict")


def test_invalid_yaml_names_the_line(tmp_path):
    (tmp_path / "papers.yaml").write_text("- id: attn\n  title: ok\n  venue: [ICLR\n- id: other\n")
    problems = reported(tmp_path)
    assert len(problems) == 1 and problems[0].startswith("papers.yaml:") and "invalid YAML" in problems[0]
    assert problems[0].startswith(("papers.yaml:3:", "papers.yaml:4:"))


def test_entry_without_id_and_entry_not_a_mapping(tmp_path):
    paper_make(tmp_path)
    (tmp_path / "papers.yaml").write_text(
        "- id: attn\n  annotated_file_paths: model.py\n- title: no id here\n  venue: ICLR2025\n- just a string\n"
    )
    assert_reported(tmp_path, "papers.yaml:3", "entry 2 has no id")
    assert_reported(tmp_path, "papers.yaml:5", "entry 3 is not a mapping")


def test_missing_folder(tmp_path):
    entry = paper_make(tmp_path, "ghost")
    (tmp_path / "ghost").rename(tmp_path / "elsewhere")
    pset_make(tmp_path, paper_make(tmp_path), entry)
    assert_reported(tmp_path, "papers.yaml:12", "paper ghost:", "folder ghost/ does not exist")


def test_duplicate_id(tmp_path):
    entry = paper_make(tmp_path)
    pset_make(tmp_path, entry, dict(entry))
    assert_reported(tmp_path, "papers.yaml:12", "paper attn: duplicate id (first at line 1)")


def test_unsafe_id_and_bad_date(tmp_path):
    pset_make(tmp_path, paper_make(tmp_path, arxiv_date="2025-02-30"), {"id": "../up"})
    assert_reported(tmp_path, "papers.yaml:4", "paper attn: arxiv_date '2025-02-30' is not a date")
    assert_reported(tmp_path, "papers.yaml:12", "'../up'", "not a safe folder name")


def test_repeated_key_in_an_entry(tmp_path):
    paper_make(tmp_path)
    (tmp_path / "papers.yaml").write_text("- id: attn\n  annotated_file_paths: model.py\n  venue: A\n  venue: B\n")
    assert_reported(tmp_path, "papers.yaml:4", "paper attn: key 'venue' is repeated")


def test_all_problems_of_two_papers_are_reported_at_once(tmp_path):
    broken_markers = MODEL_PY.replace('    # </paper2code name="compute attention scores">\n', "")
    first = paper_make(tmp_path, "attn", files={"paper2code_test.py": None, "model.py": broken_markers})
    second = paper_make(tmp_path, "flow", files={"paper2code_paper.tex": ""}, annotated_file_paths="../x")
    pset_make(tmp_path, first, second)
    problems = reported(tmp_path)
    expected = [
        ("attn/paper2code_test.py: error: paper attn:", "missing test entry point"),
        ("attn/model.py:5: error: paper attn:", "never closed"),
        ("papers.yaml:21: error: paper flow:", "outside the paper folder"),
        ("flow/paper2code_paper.tex: error: paper flow:", "empty"),
    ]
    for prefix, fragment in expected:
        assert any(p.startswith(prefix) and fragment in p for p in problems), (prefix, problems)
    assert len(problems) == len(expected)


# -- writing --------------------------------------------------------------------------------------


def test_round_trip_keeps_content_hashes_metadata_and_bytes(tmp_path):
    source = tmp_path / "source"
    source.mkdir()
    pset_make(
        source,
        paper_make(source, "attn", files={"data/weights.bin": bytes(range(256)), "notes.md": "crlf\r\nline\r\n"}),
        paper_make(
            source,
            "flow",
            files={"paper2code_paper.md": "# md\n", "ctx.py": "Y = 2\n"},
            context_file_paths="ctx.py",
            arxiv_date="2024-01-31",
            last_commit_date=None,
            tags=["a", "b"],
        ),
    )
    papers = read_pset(source)
    write_pset(tmp_path / "copy", papers)
    copies = read_pset(tmp_path / "copy")

    assert [p.content_hash for p in copies] == [p.content_hash for p in papers]
    assert [p.metadata() for p in copies] == [p.metadata() for p in papers]
    assert [dict(p.files) for p in copies] == [dict(p.files) for p in papers]
    assert copies[1].extra == {"tags": ["a", "b"]} and copies[1].arxiv_date == date(2024, 1, 31)


def test_content_hash_follows_content_not_location(tmp_path):
    for name in ("one", "two", "three"):
        (tmp_path / name).mkdir()
        pset_make(tmp_path / name, paper_make(tmp_path / name))
    (tmp_path / "three" / "attn" / "paper2code_test.py").write_text(TEST_PY + "\n")
    one, two, three = (read_pset(tmp_path / name)[0] for name in ("one", "two", "three"))
    assert one.content_hash == two.content_hash != three.content_hash
    assert one == two and hash(one) == hash(two)


def test_write_refuses_a_non_empty_folder(tmp_path):
    (tmp_path / "source").mkdir()
    pset_make(tmp_path / "source", paper_make(tmp_path / "source"))
    papers = read_pset(tmp_path / "source")
    (tmp_path / "target").mkdir()
    (tmp_path / "target" / "keep.txt").write_text("x")
    with pytest.raises(ValueError, match="not an empty folder"):
        write_pset(tmp_path / "target", papers)
    write_pset(tmp_path / "empty", papers)
    assert (tmp_path / "empty" / "attn" / "model.py").read_text() == MODEL_PY


def test_a_paper_folder_that_is_a_symlink_is_refused(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    paper_make(outside)
    (outside / "attn" / "secret.txt").write_text("not the set's\n")
    root = tmp_path / "set"
    root.mkdir()
    entry = paper_make(root, "other")
    os.symlink(outside / "attn", root / "attn")
    pset_make(root, entry, {**entry, "id": "attn"})
    problems = reported(root)
    assert [p for p in problems if p.startswith("papers.yaml:") and "paper attn: folder attn/ is a symlink" in p], (
        problems
    )


def test_yaml_aliases_that_expand_beyond_reason_are_refused(tmp_path):
    """A few hundred bytes of nested aliases ("billion laughs") would expand into megabytes of metadata; an alias or
    two, as a YAML writer makes of shared values, are fine."""
    pset_make(tmp_path, paper_make(tmp_path))
    text = (tmp_path / "papers.yaml").read_text()
    levels = ["  l0: &a0 [" + ", ".join(['"xxxxxxxxxx"'] * 10) + "]"]
    levels += [f"  l{n}: &a{n} [" + ", ".join([f"*a{n - 1}"] * 10) + "]" for n in range(1, 7)]
    (tmp_path / "papers.yaml").write_text(text.rstrip("\n") + "\n" + "\n".join(levels) + "\n")
    assert len((tmp_path / "papers.yaml").read_bytes()) < 2000
    problems = reported(tmp_path)
    assert len(problems) == 1 and "expands to more than 100000 values through its aliases" in problems[0], problems


def test_a_papers_yaml_nested_past_reason_is_refused_without_crashing_the_reader(tmp_path):
    """libyaml's composer recurses in C: 200,000 nested lists crash the process composing them (shown first, in a
    child process); papers.yaml (an author's archive holds one) is refused past YAML_DEPTH_MAX levels before any
    composing, read from the parser's events, and a set's own nesting is far within."""
    pset_make(tmp_path, paper_make(tmp_path))
    text = (tmp_path / "papers.yaml").read_text()
    (tmp_path / "papers.yaml").write_text(text.rstrip("\n") + "\n" + "- " * 200_000 + "x\n")  # one more entry
    composed = subprocess.run(
        [sys.executable, "-c", f"import yaml; yaml.compose(open({str(tmp_path / 'papers.yaml')!r}), yaml.CSafeLoader)"],
        capture_output=True,
        timeout=120,
    )
    assert composed.returncode == -signal.SIGSEGV, composed
    problems = reported(tmp_path)
    assert problems == [f"papers.yaml: error: nests lists or mappings more than {YAML_DEPTH_MAX} levels deep"], problems
    (tmp_path / "papers.yaml").write_text(text.rstrip("\n") + "\n- " + "[" * 1_000_000 + "]" * 1_000_000 + "\n")
    assert reported(tmp_path) == problems
