"""Fixtures for submissions: people in every role and a draft holding a demo paper."""

from __future__ import annotations

import pytest

from submissions import services
from tests.conftest import DEMO_PSET


def demo_files(paper: str = "dampnest") -> dict[str, bytes]:
    folder = DEMO_PSET / paper
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


def fill_draft(submission, author, paper: str = "dampnest", requirements: str | None = None, **overrides):
    """`requirements` replaces the package's requirements file, where a draft keeps them."""
    files = demo_files(paper)
    if requirements is not None:
        files["paper2code_requirements.txt"] = requirements.encode()
    paper_path = "paper2code_paper.md" if "paper2code_paper.md" in files else "paper2code_paper.tex"
    values = {
        "metadata": {
            "id": paper,
            "title": f"Demo {paper}",
            "venue": "DEMO2025",
            "arxiv_abs": "",
            "github_url": "",
            "arxiv_date": "2025-03-14",
            "arxiv_v1_date": None,
            "first_commit_date": "2025-01-20",
            "last_commit_date": None,
        },
        "files": services.draft_files_store(files),
        "paper_path": paper_path,
        "annotated_paths": ["optimizer.py"] if paper == "dampnest" else [],
        "context_paths": [],
        "source": {"kind": "archive", "name": f"{paper}.zip"},
    }
    values.update(overrides)
    return services.draft_update(submission=submission, actor=author, values=values)


@pytest.fixture
def draft(author, media_root):
    return fill_draft(services.submission_create(author=author), author)
