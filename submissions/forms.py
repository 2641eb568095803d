"""The author's forms, one per step of a submission, and the maintainer's decision form."""

from __future__ import annotations

from typing import cast

from django import forms
from django.forms.utils import pretty_name
from django.utils.text import slugify

from benchmarks.paper2code.pset import TEST_ENTRY_POINT, example_script_problem, tests_missing_problem
from benchmarks.paper2code.requirements import requirements_problems
from benchmarks.validators import link_validate
from submissions.packages import PAPER_FILES, draft_context_refusals


class MetadataForm(forms.Form):
    title = forms.CharField(max_length=500)
    id = forms.SlugField(
        max_length=100,
        required=False,
        label="Paper id",
        help_text="Folder name in the problem set; made from the title when left empty.",
    )
    arxiv_abs = forms.URLField(
        required=False, label="Abstract page (arXiv) link", assume_scheme="https", validators=[link_validate]
    )
    venue = forms.CharField(max_length=100, required=False, help_text="e.g. ICLR2025")
    arxiv_v1_date = forms.DateField(
        required=False, label="Date of the paper's first version", widget=forms.DateInput(attrs={"type": "date"})
    )
    arxiv_date = forms.DateField(
        required=False, label="Date of the version used", widget=forms.DateInput(attrs={"type": "date"})
    )
    github_url = forms.URLField(
        required=False, label="Official code repository", assume_scheme="https", validators=[link_validate]
    )
    first_commit_date = forms.DateField(
        required=False, label="Date of the code's first commit", widget=forms.DateInput(attrs={"type": "date"})
    )
    last_commit_date = forms.DateField(
        required=False, label="Date of the code's last commit", widget=forms.DateInput(attrs={"type": "date"})
    )

    def clean(self):
        super().clean()  # Form.clean returns cleaned_data, typed as optional
        data = self.cleaned_data
        if data.get("title") and not data.get("id"):
            data["id"] = slugify(data["title"])[:100] or "paper"
        first, last = data.get("first_commit_date"), data.get("last_commit_date")
        if first and last and last < first:
            self.add_error("last_commit_date", "The last commit cannot be before the first.")
        return data

    def draft_values(self, kept: dict | None = None) -> dict:
        """The paper's details as the draft keeps them: this form's fields over the `kept` details, whose keys it
        does not ask for (the example script step 4 names, an archive's other papers.yaml keys) stay as they were."""
        typed = {k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in self.cleaned_data.items()}
        return {"metadata": {**{k: v for k, v in (kept or {}).items() if k not in self.fields}, **typed}}


def metadata_labelled(metadata: dict) -> list[tuple[str, object]]:
    """A revision's papers.yaml fields as (label, value), labelled as the details step's form labels them (the one
    place a field's label is kept); a key the form does not ask for reads as words."""
    fields = MetadataForm.base_fields
    return [
        (str(fields[key].label or pretty_name(key)) if key in fields else pretty_name(key), value)
        for key, value in metadata.items()
    ]


class PaperForm(forms.Form):
    FORMATS = [("md", "Markdown (.md)"), ("tex", "LaTeX (.tex)")]
    upload = forms.FileField(required=False, label="Upload the paper's text (.tex or .md)")
    text = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 12}), label="… or paste it here")
    text_format = forms.ChoiceField(choices=FORMATS, initial="md", label="Format of pasted text")

    def clean(self):
        super().clean()  # Form.clean returns cleaned_data, typed as optional
        data = self.cleaned_data
        upload = data.get("upload")
        if upload:
            name = upload.name.lower()
            if not name.endswith((".tex", ".md")):
                self.add_error("upload", "The paper must be a .tex or .md file.")
                return data
            raw = upload.read()
            if not raw.strip():
                self.add_error("upload", f"{upload.name} is empty (0 bytes of text).")
                return data
            try:
                data["paper_text"] = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                self.add_error("upload", f"{upload.name} is not UTF-8 text (byte {exc.start}).")
                return data
            data["paper_path"] = PAPER_FILES[0] if name.endswith(".tex") else PAPER_FILES[1]
        elif data.get("text", "").strip():
            data["paper_text"] = data["text"]
            data["paper_path"] = PAPER_FILES[0] if data.get("text_format") == "tex" else PAPER_FILES[1]
        else:  # the whole step is empty: said at the top of the form, where it is seen after the click
            self.add_error(
                None,
                "This step is empty: upload the paper's text (.tex or .md) or paste it, then save and continue; or "
                "skip the step (below the button) if your code brings the text.",
            )
        return data


def commit_problem(commit: str) -> str | None:
    """Why a commit the author typed does not pin the code, or None: only a full hash names one commit for good
    (a branch moves, an abbreviation can become ambiguous)."""
    if not commit:
        return "Give the commit's full hash (git rev-parse HEAD prints it)."
    if bad := sorted({c for c in commit if c not in "0123456789abcdef"}):
        return (
            f"A commit hash is hexadecimal (0-9, a-f); {commit[:50]!r} has {', '.join(map(repr, bad[:5]))}. "
            "Give the full hash, not a branch or tag name (git rev-parse HEAD prints it)."
        )
    if len(commit) != 40:
        return (
            f"Give the full commit hash: 40 hexadecimal characters; this one has {len(commit)}. "
            "git rev-parse HEAD prints it."
        )
    return None


class CodeForm(forms.Form):
    SOURCES = [("archive", "An archive (.zip or .tar.gz)"), ("git", "A git repository at a commit")]
    source = forms.ChoiceField(choices=SOURCES, widget=forms.RadioSelect, initial="archive", label="Code from")
    archive = forms.FileField(required=False, label="Archive (.zip, .tar.gz); a whole one-paper problem set works too")
    git_url = forms.CharField(required=False, label="Repository URL (https://…)", max_length=500)
    commit = forms.CharField(
        required=False,
        label="Commit (full hash)",
        max_length=100,
        help_text="40 hexadecimal characters, e.g. from git rev-parse HEAD; never a branch.",
    )

    def clean_git_url(self) -> str:
        url = self.cleaned_data.get("git_url", "").strip()
        if url and self.data.get("source") == "git":
            from common.intake import IntakeError, git_url_check

            try:
                return git_url_check(url)
            except IntakeError as exc:
                raise forms.ValidationError(str(exc)) from exc
        return url

    def clean(self):
        super().clean()  # Form.clean returns cleaned_data, typed as optional
        data = self.cleaned_data
        if data.get("source") == "archive" and not data.get("archive"):
            self.add_error("archive", "Choose an archive to upload.")
        if data.get("source") == "git":
            if not data.get("git_url") and "git_url" not in self.errors:  # a refused URL says why already
                self.add_error("git_url", "Give the repository's https:// URL.")
            commit = (data.get("commit") or "").strip().lower()
            if problem := commit_problem(commit):
                self.add_error("commit", problem)
            data["commit"] = commit
        return data


class OfferedChoiceField(forms.MultipleChoiceField):
    """Checkboxes for the choices offered, taking any of `takes` as posted (so `clean` refuses one not offered with
    its reason, never as an unknown choice)."""

    takes: frozenset[str] = frozenset()

    def valid_value(self, value) -> bool:
        return str(value) in self.takes or super().valid_value(value)


class FilesForm(forms.Form):
    annotated_paths = forms.MultipleChoiceField(
        label="Annotated files",
        help_text="Choose the Python files whose snippets are to be implemented (every Python file is listed); "
        "those holding snippet markers are preselected.",
        widget=forms.CheckboxSelectMultiple,
    )
    context_paths = OfferedChoiceField(
        required=False,
        widget=forms.CheckboxSelectMultiple,
        label="Context files (shown to the model unmasked)",
        help_text="Not offered: the annotated files, the test entry point and other test files, and files holding a "
        "snippet's reference code or recorded calls; shown whole in every prompt, they would give the answer away; "
        "nor the paper's text, which the runs without the paper must not have. "
        "To show a file you no longer annotate, save this step without it first.",
    )
    requirements = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 5}),
        label="Requirements (one per line)",
        help_text="PEP 508 requirements from the package index (name, extras, versions, markers) and comments; "
        "no pip options, URLs, repositories or local paths.",
    )
    example_script = forms.ChoiceField(
        required=False,
        label="Example script (optional)",
        help_text="A Python file of your code that calls the annotated code (a short training loop, a demo). "
        "Validation runs it with the reference and records each call of a snippet's function, and proposes replay "
        "tests from those calls (downloadable once validation passed): a start when you have few tests of your own. "
        f"Without a {TEST_ENTRY_POINT}, those proposed tests become your package's tests.",
    )
    test_entry_point = TEST_ENTRY_POINT  # FORMAT.md 1: every task runs `python paper2code_test.py`; shown, not chosen

    def __init__(self, *args, files: dict[str, str], **kwargs):
        super().__init__(*args, **kwargs)
        self.draft_files = files  # path -> sha256 of the draft's stored files (Form.files is for uploads)
        self.paths = paths = sorted(files)
        for name, choices in (
            ("annotated_paths", [(p, p) for p in paths if p.endswith(".py")]),
            ("context_paths", [(p, p) for p in self._context_offered(paths)]),
            ("example_script", [("", "none"), *((p, p) for p in paths if p.endswith(".py"))]),
        ):
            field = self.fields[name]
            if isinstance(field, forms.ChoiceField):  # both are, as declared above (self.fields holds plain Fields)
                field.choices = choices
        context = self.fields["context_paths"]
        if isinstance(context, OfferedChoiceField):
            context.takes = frozenset(paths)  # posted anyway, a path not offered is refused in `clean` with its reason

    def _context_offered(self, paths: list[str]) -> list[str]:
        """The files offered as context, the one decision for the page and its return with a form error (walk 38:
        a posted form offered them all): none that `clean` would refuse (the annotated files, the test entry point
        and other test files, a copy of the reference, recorded calls). The annotated files are the posted ones,
        else the draft's."""
        posted = self.data.getlist("annotated_paths") if self.is_bound and hasattr(self.data, "getlist") else []
        chosen = posted or self.initial.get("annotated_paths") or []
        annotated = [p for p in chosen if p in self.draft_files]
        refused = draft_context_refusals(files=self.draft_files, annotated_paths=annotated, context_paths=paths)
        return [p for p in paths if p not in refused]

    def clean_requirements(self) -> str:
        text = self.cleaned_data.get("requirements", "")
        refused = requirements_problems(text)
        if refused:
            raise forms.ValidationError([f"Line {p.line}: {p.message}" for p in refused])
        return text

    def clean(self):
        super().clean()  # Form.clean returns cleaned_data, typed as optional
        data = self.cleaned_data
        refused = draft_context_refusals(
            files=self.draft_files,
            annotated_paths=data.get("annotated_paths") or [],
            context_paths=data.get("context_paths") or [],
        )
        for path, reason in refused.items():
            self.add_error("context_paths", f"{path} cannot be a context file: it {reason}.")
        script = data.get("example_script") or ""
        if script and (problem := example_script_problem(script, self.paths, data.get("annotated_paths") or [])):
            self.add_error("example_script", f"{script} {problem}.")
        if TEST_ENTRY_POINT in (data.get("annotated_paths") or []):
            self.add_error("annotated_paths", f"The test entry point {TEST_ENTRY_POINT} cannot be an annotated file.")
        if missing := tests_missing_problem(self.paths, example_script=script, tests_proposed=True):
            self.add_error(
                None,
                f"The code has no tests: {missing} (every task runs `python {TEST_ENTRY_POINT}` in the paper's "
                "folder; steps 3 and 4).",
            )
        return data


class DecisionForm(forms.Form):
    DECISIONS = [("accept", "Accept"), ("request_changes", "Request changes"), ("reject", "Reject")]
    decision = forms.ChoiceField(choices=DECISIONS, widget=forms.RadioSelect)
    reason = forms.CharField(widget=forms.Textarea(attrs={"rows": 4}), label="Reason (sent to the author)")
    replace_confirmed = forms.BooleanField(required=False, label="Replace the draft's task of the same paper id")
    duplicate_reason = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        label="Why it is not a duplicate, though it matches another paper (kept in the release's changelog)",
        help_text="Needed to accept: the matches are listed at the top of this page.",
    )

    def __init__(self, *args, existing=None, matches=(), **kwargs):
        super().__init__(*args, **kwargs)
        if existing is None:  # asked only when accepting would replace something
            del self.fields["replace_confirmed"]
        if not matches:  # asked only when the submission matches another paper
            del self.fields["duplicate_reason"]


class CommentForm(forms.Form):
    body = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), label="Your comment")
    snippet = forms.CharField(required=False, widget=forms.HiddenInput)


class TryAnswerForm(forms.Form):
    """An alternative body for one snippet of a validated revision, judged as evaluation judges a model's answer."""

    snippet = forms.ChoiceField(label="Snippet")
    code = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 8, "spellcheck": "false", "class": "code"}),
        label="Body to try",
        strip=False,
        help_text="The lines that replace the snippet's reference, with their indentation relative to each other as "
        "in the file, at any common indentation (column 0 too; tabs count as Python reads them): they are moved to "
        "the snippet's own indentation, as an uploaded body is.",
    )
    note = forms.CharField(
        max_length=300, required=False, label="What it changes", help_text="e.g. float32 instead of bfloat16"
    )

    def __init__(self, *args, snippets: list[tuple[str, str]], **kwargs):
        """`snippets`: (value "file:index", label) of the revision's snippets."""
        kwargs.setdefault("prefix", "try")
        super().__init__(*args, **kwargs)
        cast(forms.ChoiceField, self.fields["snippet"]).choices = snippets

    def target(self) -> tuple[str, int]:
        file, _, index = self.cleaned_data["snippet"].rpartition(":")
        return file, int(index)
