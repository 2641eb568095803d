"""How alike two papers' packages are (issue 37, "one paper once"): a fingerprint made once per package, and the
comparison of two fingerprints, with the rule that calls them a match. No Django.

The similarity, as docs/SUBMITTING.md states it:

- **Title**: lower-cased, every run of non-alphanumerics one space; equal titles match.
- **Paper text**: lower-cased words (TeX commands, Markdown marks and punctuation dropped), cut into overlapping
  shingles of TEXT_SHINGLE words.
- **Code files** (every ``.py`` file): Python tokens with comments, docstrings, blank lines and layout dropped, every
  identifier but keywords, builtins, ``self`` and attribute names after a dot written ``_`` (so a consistent
  renaming of variables changes nothing), every string literal ``S``; cut into shingles of CODE_SHINGLE tokens.
- **Snippet bodies**: each snippet's body normalised the same way and hashed whole; bodies of fewer than
  SNIPPET_TOKENS_MIN tokens (``return x``) are left out, since unrelated papers share them.

Text and code are compared by the Jaccard similarity of their shingle sets, estimated from bottom-k sketches
(the SKETCH_SIZE smallest 63-bit shingle hashes, standard error about 3 points at 0.8), so a fingerprint is a few
kilobytes whatever the package's size and a check against hundreds of papers reads no archive. Two packages
match when the titles are equal, the paper texts or the code files are at least NEAR alike, or at least
SNIPPETS_SHARE of the candidate's snippet bodies are identical to the other's.
"""

from __future__ import annotations

import builtins
import hashlib
import io
import keyword
import re
import textwrap
import tokenize
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from benchmarks.paper2code.pset import PaperPackage

FINGERPRINT_VERSION = 1  # a fingerprint of another version is made again, never compared
TEXT_SHINGLE = 5
CODE_SHINGLE = 8
SKETCH_SIZE = 256
SNIPPET_TOKENS_MIN = 12
NEAR = 0.8
SNIPPETS_SHARE = 0.5

_KEPT_NAMES = frozenset(keyword.kwlist) | frozenset(dir(builtins)) | {"self", "cls"}
_TEX_COMMAND = re.compile(r"\\[A-Za-z]+")
_WORD = re.compile(r"[a-z0-9]+")
_SKIPPED = (tokenize.COMMENT, tokenize.NL, tokenize.ENCODING, tokenize.ENDMARKER)


def _hash63(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "big") >> 1


def title_normalise(title: str) -> str:
    return " ".join(_WORD.findall(title.lower()))


def text_words(text: str) -> list[str]:
    """The paper text's words: TeX commands and every mark that is not a letter or digit dropped."""
    return _WORD.findall(_TEX_COMMAND.sub(" ", text).lower())


def code_tokens(source: str) -> list[str]:
    """Python source as normalised tokens (see the module's docstring); a file that does not tokenize is taken as
    its words, so nothing is ever refused here."""
    source = textwrap.dedent(source)
    try:
        raw = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return _WORD.findall(source.lower())
    tokens: list[str] = []
    previous = ""
    for i, token in enumerate(raw):
        kind, text = token.type, token.string
        if kind in _SKIPPED:
            continue
        if kind == tokenize.STRING:
            after = next((t.type for t in raw[i + 1 :] if t.type not in (tokenize.COMMENT, tokenize.NL)), None)
            if previous in ("", ";", "<indent>", "<dedent>", ":") and after in (tokenize.NEWLINE, tokenize.ENDMARKER):
                continue  # a docstring, or a string standing alone: a comment in effect
            text = "S"
        elif kind == tokenize.NAME and previous != "." and text not in _KEPT_NAMES:
            text = "_"
        elif kind == tokenize.NEWLINE:
            text = ";"
        elif kind == tokenize.INDENT:
            text = "<indent>"
        elif kind == tokenize.DEDENT:
            text = "<dedent>"
        tokens.append(text)
        previous = text
    return tokens


def _shingles(tokens: list[str], width: int) -> set[int]:
    if len(tokens) <= width:
        return {_hash63(" ".join(tokens))} if tokens else set()
    return {_hash63(" ".join(tokens[i : i + width])) for i in range(len(tokens) - width + 1)}


def _sketch(shingles: Iterable[int]) -> list[int]:
    return sorted(shingles)[:SKETCH_SIZE]


def jaccard_estimate(a: list[int], b: list[int]) -> float:
    """The Jaccard similarity of two sets from their bottom-k sketches: of the k smallest hashes of the union, the
    share both sets hold (exact while both sets are smaller than k)."""
    if not a or not b:
        return 0.0
    i = j = seen = both = 0
    while seen < SKETCH_SIZE and (i < len(a) or j < len(b)):  # a merge of the two sorted sketches
        if j == len(b) or (i < len(a) and a[i] < b[j]):
            i += 1
        elif i == len(a) or b[j] < a[i]:
            j += 1
        else:
            both, i, j = both + 1, i + 1, j + 1
        seen += 1
    return both / seen


def fingerprint(*, paper_text: str, code_files: Mapping[str, bytes], snippet_bodies: Iterable[str]) -> dict:
    """A package's fingerprint, JSON as stored: its paper text's and code files' sketches, its code files' sha256,
    and the hashes of its snippet bodies (each long enough to tell)."""
    code: set[int] = set()
    for path in sorted(code_files):
        code |= _shingles(code_tokens(code_files[path].decode("utf-8", "replace")), CODE_SHINGLE)
    snippets = []
    for body in snippet_bodies:
        tokens = [t for t in code_tokens(body) if t not in (";", "<indent>", "<dedent>")]
        if len(tokens) >= SNIPPET_TOKENS_MIN:
            snippets.append(_hash63(" ".join(tokens)))
    return {
        "version": FINGERPRINT_VERSION,
        "text": _sketch(_shingles(text_words(paper_text), TEXT_SHINGLE)),
        "code": _sketch(code),
        "files": sorted(hashlib.sha256(data).hexdigest() for data in code_files.values()),
        "snippets": snippets,
    }


@dataclass(frozen=True)
class Likeness:
    """How alike a candidate is to another paper, and whether that is a match."""

    title_same: bool
    text: float
    code: float
    files_same: int
    files: int
    snippets_same: int
    snippets: int

    @property
    def is_match(self) -> bool:
        return (
            self.title_same
            or self.text >= NEAR
            or self.code >= NEAR
            or (self.snippets > 0 and self.snippets_same >= max(1.0, SNIPPETS_SHARE * self.snippets))
        )

    def words(self) -> str:
        """What matched, e.g. "title identical; paper text 100% similar; code files 97% similar (4 of 5 files
        identical); 8 of 9 snippet bodies identical"."""
        parts = ["title identical"] if self.title_same else []
        parts.append(f"paper text {self.text:.0%} similar")
        code = f"code files {self.code:.0%} similar"
        if self.files_same:
            code += f" ({self.files_same} of {self.files} files identical)"
        parts.append(code)
        if self.snippets:
            parts.append(f"{self.snippets_same} of {self.snippets} snippet bodies identical")
        return "; ".join(parts)


def likeness(*, candidate: dict, title: str, other: dict, other_title: str) -> Likeness:
    """How alike `candidate` (a fingerprint, and its paper's title) is to `other`; counts are the candidate's."""
    other_snippets, other_files = set(other["snippets"]), set(other["files"])
    return Likeness(
        title_same=bool(title_normalise(title)) and title_normalise(title) == title_normalise(other_title),
        text=jaccard_estimate(candidate["text"], other["text"]),
        code=jaccard_estimate(candidate["code"], other["code"]),
        files_same=sum(1 for digest in candidate["files"] if digest in other_files),
        files=len(candidate["files"]),
        snippets_same=sum(1 for h in candidate["snippets"] if h in other_snippets),
        snippets=len(candidate["snippets"]),
    )


def package_fingerprint(package: PaperPackage) -> dict:
    """A problem-set package's fingerprint: its paper text, its Python files and its snippets' bodies."""
    return fingerprint(
        paper_text=package.files.get(package.paper_path, b"").decode("utf-8", "replace"),
        code_files={path: data for path, data in package.files.items() if path.endswith(".py")},
        snippet_bodies=[s.code for annotated in package.annotated.values() for s in annotated.snippets],
    )
