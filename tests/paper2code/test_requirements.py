"""The requirements policy: PEP 508 requirements or comments, everything else refused with its line and why."""

from __future__ import annotations

import pytest

from benchmarks.paper2code import PackageError
from benchmarks.paper2code.requirements import requirements_problems, requirements_vetted

# (line, a word the reason must hold)
REFUSED = [
    ("-r /etc/passwd", "-r"),
    ("--requirement=/etc/shadow", "--requirement"),
    ("-c constraints.txt", "-c"),
    ("-e .", "-e"),
    ("-f https://example.org/wheels", "-f"),
    ("--index-url http://x", "--index-url"),
    ("-i http://x", "-i"),
    ("--extra-index-url https://x/simple", "--extra-index-url"),
    ("--trusted-host x", "--trusted-host"),
    ("--pre", "--pre"),
    ("git+https://github.com/example/pkg.git@main#egg=pkg", "VCS"),
    ("hg+https://example.org/pkg", "VCS"),
    ("pkg @ https://example.org/pkg-1.0.tar.gz", "direct reference"),
    ("pkg@git+https://github.com/example/pkg", "direct reference"),
    ("https://example.org/pkg-1.0-py3-none-any.whl", "URL"),
    ("file:///tmp/pkg", "file:"),
    ("./pkg", "local path"),
    ("../pkg", "local path"),
    ("/abs/pkg", "local path"),
    ("~/pkg", "local path"),
    ("src/pkg", "local path"),
    ("C:\\pkg", "local path"),
    ("pkg.tar.gz", "archive"),
    ("dist.whl", "archive"),
    ('numpy; python_version == "${SECRET_KEY}"', "environment variables"),
    ("numpy==${X}", "environment variables"),
    ("numpy --hash=sha256:00", "--hash"),
    ("numpy \\", "continuation"),
    ("numpy >> 1", "PEP 508"),
    ("%%%", "PEP 508"),
]


@pytest.mark.parametrize("line,why", REFUSED)
def test_a_refused_line_is_named_with_its_line_number_and_why(line, why):
    text = f"# the usual\nnumpy>=1.26\n\n{line}\nscipy\n"
    problems = requirements_problems(text, file="requirements.txt")
    assert [(p.file, p.line) for p in problems] == [("requirements.txt", 4)]
    assert why in problems[0].message and "refused" in problems[0].message


def test_every_refused_line_is_listed_at_once():
    text = "-r /etc/passwd\nnumpy\n--index-url http://x\n-e .\ngit+https://x/y\nname @ https://x/y.whl\n./pkg\n"
    with pytest.raises(PackageError) as caught:
        requirements_vetted(text, file="paper2code_requirements.txt")
    assert [p.line for p in caught.value.problems] == [1, 3, 4, 5, 6, 7]
    assert str(caught.value).startswith("paper2code_requirements.txt:1: error: '-r /etc/passwd' is refused")


ALLOWED = [
    "numpy",
    "numpy==2.1.3",
    "torch>=2.1,<3",
    "scikit-learn~=1.5.0",
    "requests[socks,security]>=2",
    'pywin32; sys_platform == "win32"',
    'tomli>=1.1; python_version < "3.11"',
    "jax[cpu]==0.4.30 ; platform_machine == 'x86_64'",
    "numpy  # pinned by the paper",
    "zope.interface",
]


@pytest.mark.parametrize("line", ALLOWED)
def test_pep_508_requirements_with_extras_versions_markers_and_comments_pass(line):
    assert requirements_problems(f"# header\n\n{line}\n") == []


def test_pip_gets_canonical_lines_only():
    text = "# comment\n\nnumpy  # trailing comment\ntorch>=2.1,<3\nrequests[socks] ; python_version >= '3.8'\n"
    assert requirements_vetted(text) == ('numpy\ntorch<3,>=2.1\nrequests[socks]; python_version >= "3.8"\n')


def test_blank_requirements_are_fine():
    assert requirements_problems("") == [] and requirements_vetted("\n# none\n") == ""
