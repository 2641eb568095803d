"""Build the one-message prompt that asks a model to fill a masked snippet (FORMAT.md 6), by template version."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

PROTOCOL = "rcb-v1"


@dataclass(frozen=True)
class PromptTemplate:
    """A versioned prompt: `message` takes {paper} (one of the two paper sections) and {code}."""

    message: str
    paper: str
    no_paper: str


# Never edit a published template: published numbers depend on its exact wording; add a new version instead.
TEMPLATES: dict[str, PromptTemplate] = {
    "rcb-v1": PromptTemplate(
        message='''You are an expert machine learning researcher and software engineer reproducing the official code of a research paper. Below are the paper (or a note that it is omitted) and files from its implementation. In the last file, one block of code has been removed and replaced by two TODO comment lines. Write the missing block so that the code does what the paper describes.

{paper}

# Code

{code}# Instructions

1. Return only the code that replaces the two TODO lines, nothing else.
2. Keep the exact indentation of the TODO lines: write every line as it will appear in the file, indented at least as much as the TODO lines.
3. Do not repeat the surrounding function or class, or any code outside the TODO block.
4. Write complete, working code: no placeholders, no "...", nothing left for later.
5. Use the paper as the reference for what the block computes, and follow the names and conventions of the surrounding code.
6. Wrap your answer in one fenced code block opened by ```python and closed by ```.

# Example

In this code:

```python
class Scorer:
    def total(self, items):
        total = 0.0
        for item in items:
            # TODO: Implement block "add weighted item"
            # Approximately 2 line(s) of code.
        return total
```

a correct answer is:

```python
            weight = self.weights.get(item.kind, 1.0)
            total += weight * item.value
```
''',
        paper="# Paper\n\n{paper_text}",
        no_paper=(
            "# Paper (omitted)\n\nThe paper's text is not given for this task: infer what the block computes "
            "from the code and the name of the TODO block."
        ),
    ),
}


def code_part(context_files: Sequence[tuple[str, str]], masked_path: str, masked_code: str) -> str:
    """Each context file, then the masked file, as "## <path>", a blank line, the content and blank lines."""
    return "".join(f"## {path}\n\n{content}\n\n" for path, content in [*context_files, (masked_path, masked_code)])


def build_prompt(
    *,
    paper_text: str | None,
    context_files: Sequence[tuple[str, str]],
    masked_path: str,
    masked_code: str,
    protocol: str = PROTOCOL,
) -> str:
    """The user message for one masked snippet; `paper_text=None` is the "without paper" ablation."""
    if protocol not in TEMPLATES:
        raise ValueError(f"unknown prompt protocol {protocol!r}; known: {', '.join(sorted(TEMPLATES))}")
    template = TEMPLATES[protocol]
    paper = template.no_paper if paper_text is None else template.paper.format(paper_text=paper_text)
    return template.message.format(paper=paper, code=code_part(context_files, masked_path, masked_code))


def prompt_hash(prompt: str) -> str:
    """The sha256 hex digest of the prompt's UTF-8 bytes, to record exactly what a model was shown."""
    return hashlib.sha256(prompt.encode("utf-8")).hexdigest()
