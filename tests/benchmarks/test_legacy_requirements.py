"""A legacy set's own requirements files under --environment: kept verbatim as files, never read as requirements,
never installed, never handed to pip (import, validate_pset and a draft's "Validate every paper"); without
--environment the same lines are refused line by line, the message pointing at --environment."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from benchmarks.models import Task
from benchmarks.selectors import blob_read
from tests.submissions.test_validate_pset import legacy_pset

pytestmark = pytest.mark.django_db

# What the published set's papers list (the original harness never installed them: it ran one shared environment).
OWN = (
    "# the authors' own environment\n"
    "git+https://example.invalid/lab/fancy-attention.git@v0.3#egg=fancy-attention\n"
    "https://example.invalid/wheels/tinytorch-0.1-py3-none-any.whl\n"
    "-r requirements-dev.txt\n"
    "numpy @ https://example.invalid/numpy.tar.gz\n"
)
FRAGMENTS = ("example.invalid", "fancy-attention", "tinytorch", "requirements-dev", "git+")


def _set(root):
    environment = legacy_pset(root)
    (root / "legacy-sum" / "requirements.txt").write_text(OWN)
    return environment


def test_without_environment_every_line_is_refused_and_the_message_names_environment(tmp_path):
    _set(tmp_path / "pset")
    for command in ("import_pset", "validate_pset"):
        with pytest.raises(CommandError) as refused:
            call_command(
                command,
                str(tmp_path / "pset"),
                **({"version": "1.0.0"} if command == "import_pset" else {}),
                stdout=io.StringIO(),
                stderr=io.StringIO(),
            )
        text = str(refused.value)
        assert "4 problem(s)" in text, text
        for line, why in (
            (2, "a VCS address (git+https)"),
            (3, "a URL is not allowed"),
            (4, "pip option -r is not allowed"),
            (5, "a direct reference (name @ URL)"),
        ):
            assert f"legacy-sum/requirements.txt:{line}" in text and why in text, (line, text)
        assert text.count("--environment FILE") == 1  # said once, on the file's first refused line
    assert not Task.objects.exists()


def test_with_environment_the_set_imports_and_the_file_is_only_a_file(tmp_path, client, media_root):
    environment = _set(tmp_path / "pset")
    call_command(
        "import_pset",
        str(tmp_path / "pset"),
        version="1.0.0",
        environment=str(environment),
        publish=True,
        stdout=io.StringIO(),
        stderr=io.StringIO(),
    )
    task = Task.objects.get(paper__slug="legacy-sum")
    assert blob_read(sha256=task.files["requirements.txt"]) == OWN.encode()  # verbatim
    assert task.environment_file == "shared-environment.txt"
    assert not any(fragment in task.requirements for fragment in FRAGMENTS)
    page = client.get(reverse("paper-detail", args=["1.0.0", "legacy-sum"])).content.decode()
    assert "runs in the shared environment <code>shared-environment.txt</code>" in page
    assert "it is not installed" in page and "fancy-attention.git@v0.3#egg=fancy-attention" in page
    from benchmarks.selectors import package_load

    assert package_load(task).requirements == ""  # the rebuilt package has no requirements of its own either


def test_validation_with_environment_never_hands_the_files_lines_to_the_build(
    tmp_path,
    sandbox,
    media_root,  # noqa: F811
    maintainer,
):
    """Whole-set validation and a draft version's "Validate every paper", in bwrap: the environment build's inputs
    (its log opens with the requirements it was given) hold nothing of the paper's own file."""
    from submissions import validation
    from submissions.models import SetValidation

    environment = _set(tmp_path / "pset")
    with pytest.raises(CommandError, match=r"2 problem\(s\) in 1 of 1 paper\(s\)"):  # the uncovered snippet only
        call_command(
            "validate_pset",
            str(tmp_path / "pset"),
            environment=str(environment),
            json_out=str(tmp_path / "report.json"),
            stdout=io.StringIO(),
            stderr=io.StringIO(),
        )
    assert json.loads((tmp_path / "report.json").read_text())["papers"]["legacy-sum"]["reference_passed"] is True

    call_command(
        "import_pset",
        str(tmp_path / "pset"),
        version="0.9.0",
        environment=str(environment),
        stdout=io.StringIO(),
        stderr=io.StringIO(),
    )
    draft = validation.version_validation_start(version=Task.objects.get().versions.get(), actor=maintainer)
    for paper in draft.papers.all():
        assert paper.requirements == environment.read_text().strip()
        validation.set_paper_run(paper=paper)
    for run in SetValidation.objects.all():
        paper = run.papers.get()
        checks = {c["key"]: c for c in paper.checks}
        assert checks["requirements"]["status"] == "passed" and checks["reference"]["status"] == "passed", checks
        build_log = checks["requirements"]["detail"]
        assert build_log.startswith("requirements:") and "nothing to install" in build_log
        assert not any(fragment in c["detail"] for c in paper.checks for fragment in FRAGMENTS), paper.checks
