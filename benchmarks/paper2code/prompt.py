"""Prompt protocols (FORMAT.md 5-6): a template and the layout of its code part, as data a maintainer can add.

A template is `string.Template` text: `$paper` (the paper's text), `$code` (context files and masked file), `$name`
and `$loc` (the snippet's name and lines of code); `$$` is a literal dollar.
"""

from __future__ import annotations

import hashlib
import string
from collections.abc import Sequence
from dataclasses import dataclass

from benchmarks.paper2code.markers import AnnotatedFile, Snippet
from benchmarks.paper2code.masking import MASKINGS

PROTOCOL = "rcb-v1"
PLACEHOLDERS = ("paper", "code", "name", "loc")
CONTEXT_JOINS = ("standard", "original")
# What `$paper` becomes in the "without paper" ablation of a protocol that has no template of its own for it.
NO_PAPER_TEXT = (
    "(The paper's text is not given for this task: infer what the block computes from the code and the "
    "name of the TODO block.)"
)


@dataclass(frozen=True)
class Protocol:
    """How one item becomes a prompt.

    `masking` is a key of MASKINGS; `context_join` "standard" shows a context file as it is, "original" concatenates
    its lines with their line ends removed (the original harness's bug); `masked_header` puts "## <path>" before the
    masked file. `template_without_paper` ("" : `template` with $paper = NO_PAPER_TEXT) is the ablation's.
    """

    name: str
    template: str
    template_without_paper: str = ""
    masking: str = "standard"
    masked_header: bool = True
    context_join: str = "standard"

    def problems(self) -> list[str]:
        """What is wrong with this protocol, each saying where; empty when it can be used."""
        problems = []
        if self.masking not in MASKINGS:
            problems.append(f"masking {self.masking!r} is unknown; known: {', '.join(MASKINGS)}")
        if self.context_join not in CONTEXT_JOINS:
            problems.append(f"context join {self.context_join!r} is unknown; known: {', '.join(CONTEXT_JOINS)}")
        for label, text in (("template", self.template), ("template without paper", self.template_without_paper)):
            if label == "template" or text:
                problems += [f"{label}: {p}" for p in template_problems(text, paper=label == "template")]
        return problems


def template_problems(text: str, *, paper: bool = True) -> list[str]:
    """Placeholders that string.Template would refuse or that no item fills, with their line; a missing $code."""
    problems = []
    template = string.Template(text)
    for match in template.pattern.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        name = match.group("named") or match.group("braced")
        if match.group("invalid") is not None:
            problems.append(
                f'line {line}: a lone "$" (write $$ for a dollar sign, or one of '
                f"{', '.join('$' + p for p in PLACEHOLDERS)})"
            )
        elif name is not None and name not in PLACEHOLDERS:
            problems.append(
                f"line {line}: unknown placeholder ${name}; known: {', '.join('$' + p for p in PLACEHOLDERS)}"
            )
    if "code" not in template.get_identifiers():
        problems.append("$code is missing: the model would never see the masked file")
    if paper and "paper" not in template.get_identifiers():
        problems.append("$paper is missing: the model would never see the paper (the ablation has its own template)")
    return problems


_RCB_V1 = """You are an expert machine learning researcher and software engineer reproducing the official code of a research paper. Below are the paper (or a note that it is omitted) and files from its implementation. In the last file, one block of code has been removed and replaced by two TODO comment lines. Write the missing block so that the code does what the paper describes.

<<PAPER>>

# Code

$code# Instructions

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
"""

RCB_V1 = Protocol(
    name="rcb-v1",
    template=_RCB_V1.replace("<<PAPER>>", "# Paper\n\n$paper"),
    template_without_paper=_RCB_V1.replace(
        "<<PAPER>>",
        "# Paper (omitted)\n\nThe paper's text is not given for this task: infer what the block computes "
        "from the code and the name of the TODO block.",
    ),
)


def protocol_mask(protocol: Protocol, file: AnnotatedFile, snippet: Snippet) -> str:
    """The masked file in this protocol's masking style."""
    return MASKINGS[protocol.masking](file, snippet)


def _context_part(protocol: Protocol, context_files: Sequence[tuple[str, str]]) -> str:
    joined = [
        (path, "".join(content.splitlines()) if protocol.context_join == "original" else content)
        for path, content in context_files
    ]
    return "".join(f"## {path}\n\n{content}\n\n" for path, content in joined)


def code_part(protocol: Protocol, context_files: Sequence[tuple[str, str]], masked_path: str, masked_code: str) -> str:
    """Each context file as "## <path>", a blank line, its content and blank lines; then the masked file."""
    context = _context_part(protocol, context_files)
    if protocol.masked_header:
        return context + f"## {masked_path}\n\n{masked_code}\n\n"
    return context + masked_code


def build_prompt(
    *,
    protocol: Protocol,
    paper_text: str | None,
    context_files: Sequence[tuple[str, str]],
    masked_path: str,
    masked_code: str,
    name: str,
    loc: int,
) -> str:
    """The user message for one masked snippet; `paper_text=None` is the "without paper" ablation."""
    if paper_text is None and protocol.template_without_paper:
        template, paper = protocol.template_without_paper, ""
    else:
        template, paper = protocol.template, NO_PAPER_TEXT if paper_text is None else paper_text
    return paper.join(
        _template_parts(
            template, code=code_part(protocol, context_files, masked_path, masked_code), name=name, loc=str(loc)
        )
    )


def _template_parts(template: str, **values: str) -> list[str]:
    """The template's text between its $paper placeholders, each piece substituted with `values`."""
    pieces, start = [], 0
    for match in string.Template.pattern.finditer(template):
        if (match.group("named") or match.group("braced")) == "paper":
            pieces.append(template[start : match.start()])
            start = match.end()
    pieces.append(template[start:])
    return [string.Template(piece).substitute(values) for piece in pieces]


# What an item's prompt takes from the lines of a release's items file, by template placeholder.
TEMPLATE_FIELDS = {"paper": "paper_text", "name": "snippet", "loc": "loc"}


def prompt_template(*, protocol: Protocol, context_files: Sequence[tuple[str, str]]) -> list[str | dict[str, str]]:
    """The prompt (with the paper) of every item of one paper, the template and context files laid out and what
    differs per item left as `{"$": field}` (`paper_text`, `file`, `masked_code`, `snippet`, `loc`: the fields of
    the items file's lines), so a file holds it once per paper; `prompt_fill` gives `build_prompt`'s answer."""
    parts: list[str | dict[str, str]] = []

    def text(piece: str) -> None:
        if piece and parts and isinstance(parts[-1], str):
            parts[-1] += piece
        elif piece:
            parts.append(piece)

    template, start = protocol.template, 0
    for match in string.Template.pattern.finditer(template):
        text(template[start : match.start()])
        start = match.end()
        name = match.group("named") or match.group("braced")
        if match.group("escaped") is not None:
            text("$")
        elif name == "code":
            text(_context_part(protocol, context_files))
            if protocol.masked_header:
                text("## ")
                parts.append({"$": "file"})
                text("\n\n")
            parts.append({"$": "masked_code"})
            text("\n\n" if protocol.masked_header else "")
        elif name in TEMPLATE_FIELDS:
            parts.append({"$": TEMPLATE_FIELDS[name]})
        else:
            raise ValueError(f"protocol {protocol.name}: unknown placeholder in its template at {match.start()}")
    text(template[start:])
    return parts


def prompt_fill(template: Sequence[str | dict[str, str]], fields: dict) -> str:
    """One item's prompt from its paper's `prompt_template` and the fields of its paper and item lines."""
    return "".join(part if isinstance(part, str) else str(fields[part["$"]]) for part in template)


def prompt_hash(prompt: str) -> str:
    """The sha256 hex digest of the prompt's UTF-8 bytes, to record exactly what a model was shown."""
    return hashlib.sha256(prompt.encode("utf-8")).hexdigest()
