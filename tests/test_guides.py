"""The guides are the repository's docs/ files rendered in the site, linked from the navigation and the README."""

from __future__ import annotations

import re

import pytest

from config.guides import GUIDES
from tests.conftest import REPO, page_text

pytestmark = pytest.mark.django_db


def test_format_guide_renders_the_repository_file(client):
    body = client.get("/guides/format/").content.decode()
    text = (REPO / "docs" / "FORMAT.md").read_text()
    headings = re.findall(r"^## (.+)$", text, flags=re.M)
    assert len(headings) > 5
    for heading in headings:
        assert heading.replace("`", "").split()[-1] in body  # rendered (code spans become <code>)
    assert '<h1 id="the-task-package-format-researchcodebench-compatible">' in body
    assert '<div class="highlight"><pre>' in body, "fenced blocks render as highlighted code"


def test_leaderboard_guide_says_the_token_scheme(client):
    body = client.get("/guides/leaderboard/").content.decode()
    assert "Getting a model on the leaderboard" in body and "Authorization: Token" in body
    assert 'aria-current="page">Getting on the leaderboard' in body


def test_the_verdicts_guide_names_every_verdict_and_category_the_code_defines_in_a_developers_words(client):
    """The newcomer read /guides/verdicts/ as internal notes (module paths, issue numbers, code names): it is a
    model developer's page, naming every verdict and outcome category the code can record, with what each does to a
    score, and the engineers' detail lives in the evaluating guide."""
    from evaluation.models import Outcome
    from evaluation.outcomes import ERROR_AFTER_AGENT, UNJUDGED

    response = client.get("/guides/verdicts/")
    assert response.status_code == 200
    article = re.search(r"<article.*?</article>", response.content.decode(), flags=re.S)
    assert article, "the guide renders"
    text = page_text(article.group(0))
    named = [*Outcome.Status.values, *(c for c in Outcome.Category.values if c), UNJUDGED, ERROR_AFTER_AGENT]
    assert [name for name in named if name not in text] == [], "every verdict, category and held finding is named"
    labels = [label for value, label in Outcome.Category.choices if value]
    assert [label for label in labels if label not in text] == [], "each category as the run and item pages say it"
    for said in ("sealed replay", "If you think a verdict is wrong", "Left out", "Counted as not passed"):
        assert said in text, said
    jargon = re.findall(r"\bissue \d+|\b\w+\.py\b|\b(?:evaluation|benchmarks|sandbox|agents)\.\w+", text)
    assert jargon == [], "no module paths, code names or issue numbers on a developer's page"
    assert client.get("/guides/evaluating/").content.decode().count('id="judging-in-detail"') == 1


def test_unknown_guide_is_a_404_and_paths_cannot_escape(client):
    assert client.get("/guides/nope/").status_code == 404
    assert client.get("/guides/..%2Fconfig%2Fsettings/").status_code == 404


def test_guides_are_linked_from_the_navigation_and_the_readme(client):
    nav = client.get("/").content.decode().split("</nav>")[0]
    assert 'href="/guides/">Guides</a>' in nav and 'href="/api/v1/docs/">API</a>' in nav
    index = client.get("/guides/").content.decode()  # the index says which guide is for whom
    for slug in GUIDES:
        assert f'href="/guides/{slug}/"' in index
    assert "for model developers" in index and "for authors" in index
    readme = (REPO / "README.md").read_text()
    for filename, _ in GUIDES.values():
        assert f"(docs/{filename})" in readme


def test_submitting_guide_links_an_example_archive_the_form_takes_whole(client, author, media_root):
    """The example archive is the demo paper as a one-paper problem set: the same bytes on every download, and the
    code step fills every step from it so that the draft can be submitted at once."""
    import io
    import zipfile

    from common.intake import archive_files, limits_default
    from submissions import services
    from submissions.packages import draft_problems

    body = client.get("/guides/submitting/").content.decode()
    assert 'href="/guides/submitting/example.zip"' in body and "full 40-character" in body
    assert "The rules of validation" in body and "<table>" in body
    response = client.get("/guides/submitting/example.zip")
    assert response["Content-Type"] == "application/zip" and "example-dampnest.zip" in response["Content-Disposition"]
    assert client.get("/guides/submitting/example.zip").content == response.content
    names = zipfile.ZipFile(io.BytesIO(response.content)).namelist()
    assert "example-dampnest/papers.yaml" in names and "example-dampnest/dampnest/paper2code_test.py" in names
    assert not any("__pycache__" in name for name in names)

    submission = services.submission_create(author=author)
    files = archive_files(io.BytesIO(response.content), filename="example-dampnest.zip", limits=limits_default())
    services.draft_code_save(
        submission=submission, actor=author, files=files, source={"kind": "archive", "name": "example-dampnest.zip"}
    )
    submission.refresh_from_db()
    assert submission.draft["intake"]["problem_set"] and draft_problems(submission.draft) == []
    assert submission.draft["metadata"]["id"] == "dampnest" and submission.draft["annotated_paths"] == ["optimizer.py"]


def test_links_between_the_docs_become_guide_pages():
    from config.guides import guide_link

    assert guide_link("LEADERBOARD.md") == "/guides/leaderboard/"
    anchored = "AGENT_RUNS.md#bring-your-own-agent-uploads"
    assert guide_link(anchored) == "/guides/agent-runs/#bring-your-own-agent-uploads"
    assert guide_link("docs/FORMAT.md") == "/guides/format/"
    # Anything else is left as written: another file, an anchor, an address.
    assert guide_link("NOTES.md") == "NOTES.md"
    assert guide_link("#usage") == "#usage"
    assert guide_link("https://example.org/LEADERBOARD.md") == "https://example.org/LEADERBOARD.md"


def test_every_relative_link_in_every_guide_resolves(client):
    """Every link a guide page holds that stays on the site (relative, root-relative or an anchor) answers 200, and
    its anchor names an element of the page it lands on. Before the rewrite, /guides/agent-runs/ linked
    LEADERBOARD.md, i.e. /guides/agent-runs/LEADERBOARD.md, a 404; this test failed on it."""
    from urllib.parse import urljoin, urlsplit

    pages: dict[str, str] = {}

    def page(path: str) -> str:
        if path not in pages:
            response = client.get(path)
            assert response.status_code == 200, path
            pages[path] = response.content.decode() if "html" in response.get("Content-Type", "") else ""
        return pages[path]

    checked = 0
    for slug in ["", *GUIDES]:
        here = f"/guides/{slug}/" if slug else "/guides/"
        body = page(here)
        main = body[body.index("<main") :]  # the guide itself, not the site's navigation
        for href in re.findall(r'href="([^"]+)"', main):
            if urlsplit(href).scheme or href.startswith("//"):
                continue
            target = urlsplit(urljoin("http://testserver" + here, href.replace("&amp;", "&")))
            landed = page(target.path)
            if target.fragment:
                assert f'id="{target.fragment}"' in landed, f"{here}: {href} names no element"
            checked += 1
    assert checked >= 4, "the guides link each other"


def test_every_doc_is_a_guide_of_the_one_registry():
    """The README links the docs and the site serves them from one list: a file added to docs/ without its entry
    would be read in the repository and missing from the site."""
    assert {filename for filename, _ in GUIDES.values()} == {path.name for path in (REPO / "docs").glob("*.md")}


def test_the_architecture_guide_names_every_package_the_code_has():
    """Each app (and common, config) has its paragraph, and each package inside one its entry: a package added
    without a word in docs/ARCHITECTURE.md fails here, naming it. Task content (the demo's papers) is not code."""
    from scripts.import_graph import PACKAGES

    text = (REPO / "docs" / "ARCHITECTURE.md").read_text()
    missing = [f"{app}/" for app in PACKAGES if f"**{app}/**" not in text]
    for app in PACKAGES:
        for init in sorted((REPO / app).glob("*/**/__init__.py")):
            package = init.parent.relative_to(REPO / app)
            if package.parts[0] in ("migrations", "management", "templatetags", "demo"):
                continue
            if f"`{package.name}/`" not in text:
                missing.append(f"{app}/{package.as_posix()}/")
    assert missing == [], f"docs/ARCHITECTURE.md does not describe {missing}"


def test_the_reference_lists_every_command_and_make_target():
    """The reference's table of commands is complete: a manage.py command or a make target added without its row
    fails here, naming it."""
    text = (REPO / "docs" / "REFERENCE.md").read_text()
    commands = text.split("## Commands")[1].split("\n## ")[0]
    listed = set(re.findall(r"`([a-z_-]+)`", commands)) | set(re.findall(r"`make ([a-z-]+)`", commands))
    ours = {p.stem for p in REPO.glob("*/management/commands/*.py") if not p.stem.startswith("_")}
    targets = set(re.findall(r"^([a-z][a-z-]*):", (REPO / "Makefile").read_text(), flags=re.M)) - {
        "install",
        "install-lint",
    }
    assert sorted((ours | targets) - listed) == []


def test_the_architecture_guide_says_what_each_package_imports_as_the_code_does():
    """The layer diagram's "imports ..." column is the import graph as it is (module- and function-level imports):
    an import between packages added or removed without the guide saying so fails here."""
    from scripts.import_graph import PACKAGES, graph

    text = (REPO / "docs" / "ARCHITECTURE.md").read_text()
    diagram = text.split("## The layers")[1].split("```")[1]
    said = {}
    for line in diagram.strip().splitlines():
        package, imports = line.split()[0], line.split(" imports ", 1)[1]
        imports = imports.split(" (")[0]
        said[package] = set() if imports == "nothing of the project" else set(imports.split(", "))
    counts, _ = graph(PACKAGES)
    actual = {package: {b for a, b, _ in counts if a == package and b != package} for package in PACKAGES}
    assert said == actual


def test_the_reference_lists_every_endpoint_of_the_api_schema_with_its_methods():
    """REFERENCE.md's REST API table says it lists every endpoint: each path and method of the OpenAPI schema has a
    row naming both (PATCH runs/{id}/, pinning, was missing while the table showed GET only)."""
    from drf_spectacular.generators import SchemaGenerator

    text = (REPO / "docs" / "REFERENCE.md").read_text()
    table = text.split("## REST API")[1].split("\n## ")[0]
    rows: list[tuple[set[str], str]] = []
    for line in table.splitlines():
        cells = line.split(" | ")
        if not line.startswith("| `") or len(cells) < 3:
            continue
        paths: set[str] = set()
        last = ""
        for path in re.findall(r"`([a-z{][^`]*/[^`]*|[a-z{][^`]*\.csv)`", cells[0]):
            if "/" not in path.rstrip("/") and last:  # `resume/` after `attempts/{id}/pause/`: its sibling
                path = f"{last.rstrip('/').rsplit('/', 1)[0]}/{path}"
            last = path
            paths.add(re.sub(r"\{[^}]*\}", "{}", path))  # `{id}`, `{name}` and `{pset,items}` are parameters
        rows.append((paths, cells[1]))
    schema = SchemaGenerator().get_schema(request=None, public=True)
    missing = []
    for path, operations in schema["paths"].items():
        short = re.sub(r"\{[^}]*\}", "{}", path.removeprefix("/api/v1/"))
        for method in {"get", "post", "patch", "put", "delete"} & set(operations):
            said = [methods for paths, methods in rows if short in paths]
            if short != "schema/" and not any(method.upper() in methods for methods in said):
                missing.append(f"{method.upper()} {short}")
    assert missing == []
