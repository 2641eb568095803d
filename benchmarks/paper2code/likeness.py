"""How alike two papers' packages are (issue 37, "one paper once"): a fingerprint made once per package, and the
comparison of two fingerprints, with the rule that calls them a match. No Django.

The similarity, as docs/SUBMITTING.md states it. Every text, title and code file is first folded (`fold`: NFKC as
Python reads identifiers, format characters dropped, Cyrillic and Greek lookalikes of Latin letters made Latin).

- **Title**: lower-cased, every run of non-alphanumerics one space; equal titles match.
- **Paper text**: lower-cased words (TeX commands, Markdown marks and punctuation dropped), cut into overlapping
  shingles of TEXT_SHINGLE words.
- **Code files** (every ``.py`` file): Python tokens with comments, docstrings, blank lines and layout dropped, every
  identifier but keywords, builtins, ``self`` and attribute names after a dot written ``_``, and so are an
  object's own attributes (``self.lr``), so a consistent renaming of variables or attributes changes nothing; every
  string literal ``S``; cut into shingles of CODE_SHINGLE tokens.
- **Snippet bodies**: each snippet's body normalised the same way and hashed whole; bodies of fewer than
  SNIPPET_TOKENS_MIN tokens (``return x``) are left out, since unrelated papers share them.

Text and code are compared by containment: the share of the other paper's shingles the candidate holds, so what is
added to a copy does not hide it (the Jaccard similarity falls as the candidate grows). It is estimated from
sketches (every shingle hash below SAMPLE_BELOW, at least the SKETCH_SIZE smallest), so a fingerprint is small and
a check against hundreds of papers reads no archive. Two packages match when the titles are equal, at least NEAR
of the other's paper text or code is in the candidate, or at least SNIPPETS_SHARE of the other's snippet bodies
are. A package past TEXT_WORDS_MAX words or CODE_TOKENS_PACKAGE code tokens is fingerprinted in part.
"""

from __future__ import annotations

import builtins
import hashlib
import io
import itertools
import keyword
import re
import textwrap
import tokenize
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from benchmarks.paper2code.pset import PaperPackage

FINGERPRINT_VERSION = 2  # a fingerprint of another version is made again, never compared
TEXT_SHINGLE = 5
CODE_SHINGLE = 8
SKETCH_SIZE = 256
SAMPLE_BELOW = 2**63 >> 4  # a large package's sketch keeps every shingle hash below this (1 in 16), and more
SNIPPET_TOKENS_MIN = 12
NEAR = 0.8
SNIPPETS_SHARE = 0.5
TEXT_WORDS_MAX = 200_000  # past these a package is fingerprinted in part (`partial`), never refused
CODE_TOKENS_FILE = 50_000
CODE_TOKENS_PACKAGE = 200_000

_KEPT_NAMES = frozenset(keyword.kwlist) | frozenset(dir(builtins)) | {"self", "cls"}
_TEX_COMMAND = re.compile(r"\\[A-Za-z]+")
_WORD = re.compile(r"[a-z0-9]+")
_SKIPPED = (tokenize.COMMENT, tokenize.NL, tokenize.ENCODING, tokenize.ENDMARKER)


# Latin letters' common lookalikes (Cyrillic, Greek), which NFKC leaves as they are.
_CONFUSABLES = str.maketrans(
    "аеорсухіјѕԁԛԝвнкмтАВЕКМНОРСТУХІЈЅαβεικνορτυχΑΒΕΖΗΙΚΜΝΟΡΤΥΧ",
    "aeopcyxijsdqwbhkmtABEKMHOPCTYXIJSabeiknoptuxABEZHIKMNOPTYX",
)


def fold(text: str) -> str:
    """Text as compared: NFKC (as Python reads identifiers: fullwidth letters are plain ones), invisible format
    characters (Unicode category Cf: zero-width spaces, joiners, direction marks) dropped, and Latin letters'
    Cyrillic and Greek lookalikes written as the Latin letter."""
    text = unicodedata.normalize("NFKC", text)
    if not text.isascii():
        text = "".join(c for c in text if unicodedata.category(c) != "Cf").translate(_CONFUSABLES)
    return text


def _hash63(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "big") >> 1


def title_normalise(title: str) -> str:
    return " ".join(_WORD.findall(fold(title).lower()))


def text_words(text: str) -> list[str]:
    """The paper text's words (folded, see `fold`): TeX commands and every mark that is not a letter or digit
    dropped; at most TEXT_WORDS_MAX."""
    words = _WORD.finditer(_TEX_COMMAND.sub(" ", fold(text)).lower())
    return [m.group() for m in itertools.islice(words, TEXT_WORDS_MAX)]


def code_tokens(source: str, limit: int = CODE_TOKENS_FILE) -> list[str]:
    """Python source as normalised tokens (see the module's docstring), at most `limit` of them; a file that does
    not tokenize is taken as its words, so nothing is ever refused here."""
    source = textwrap.dedent(fold(source))
    try:
        raw = list(itertools.islice(tokenize.generate_tokens(io.StringIO(source).readline), 2 * limit))
    except Exception:  # noqa: BLE001 - whatever the tokenizer makes of a file, its words still tell
        return _WORD.findall(source.lower())[:limit]
    tokens: list[str] = []
    previous = before = ""
    for i, token in enumerate(raw):
        kind, text = token.type, token.string
        if kind in _SKIPPED:
            continue
        if kind == tokenize.STRING:
            j = i + 1  # the next token that is not a comment or a blank line, looked for by index: no copies
            while j < len(raw) and raw[j].type in (tokenize.COMMENT, tokenize.NL):
                j += 1
            after = raw[j].type if j < len(raw) else None
            if previous in ("", ";", "<indent>", "<dedent>", ":") and after in (tokenize.NEWLINE, tokenize.ENDMARKER):
                continue  # a docstring, or a string standing alone: a comment in effect
            text = "S"
        elif kind == tokenize.NAME and text not in _KEPT_NAMES and (previous != "." or before in ("self", "cls")):
            text = "_"  # an object's own attributes are named by the author, like variables
        elif kind == tokenize.NEWLINE:
            text = ";"
        elif kind == tokenize.INDENT:
            text = "<indent>"
        elif kind == tokenize.DEDENT:
            text = "<dedent>"
        tokens.append(text)
        before, previous = previous, text
        if len(tokens) >= limit:
            break
    return tokens


def _shingles(tokens: list[str], width: int) -> set[int]:
    if len(tokens) <= width:
        return {_hash63(" ".join(tokens))} if tokens else set()
    return {_hash63(" ".join(tokens[i : i + width])) for i in range(len(tokens) - width + 1)}


def _sketch(shingles: set[int]) -> list[int]:
    """The shingles' sketch: every hash below SAMPLE_BELOW, and at least the SKETCH_SIZE smallest, sorted; so it
    holds every hash of the set up to its largest, and a paper's sample does not shrink when another grows."""
    ordered = sorted(shingles)
    return ordered[: max(SKETCH_SIZE, sum(1 for h in ordered if h < SAMPLE_BELOW))]


def _bound(sketch: list[int]) -> float:
    return float("inf") if len(sketch) < SKETCH_SIZE else sketch[-1]  # a short sketch is the whole set


def _sampled(a: list[int], b: list[int]) -> tuple[set[int], set[int]]:
    """Both sketches' hashes up to the lower of their bounds: below it each sketch holds all its set's hashes."""
    bound = min(_bound(a), _bound(b))
    return {h for h in a if h <= bound}, {h for h in b if h <= bound}


def jaccard_estimate(a: list[int], b: list[int]) -> float:
    """The Jaccard similarity of two sets from their sketches (exact while both are smaller than SKETCH_SIZE)."""
    sa, sb = _sampled(a, b)
    return len(sa & sb) / len(sa | sb) if sa and sb else 0.0


def containment_estimate(contained: list[int], container: list[int]) -> float:
    """The share of the set `contained` that `container` also holds (|A∩B|/|A|), from their sketches: what was added
    to the container (junk text, a junk module) does not lower it, as it lowers the Jaccard similarity."""
    sa, sb = _sampled(contained, container)
    return len(sa & sb) / len(sa) if sa and sb else 0.0


def fingerprint(*, paper_text: str, code_files: Mapping[str, bytes], snippet_bodies: Iterable[str]) -> dict:
    """A package's fingerprint, JSON as stored: its paper text's and code files' sketches, its code files' sha256,
    the hashes of its snippet bodies (each long enough to tell), and whether it was made of a part of the package
    only (past TEXT_WORDS_MAX words or CODE_TOKENS_PACKAGE code tokens)."""
    code: set[int] = set()
    words = text_words(paper_text)
    partial = len(words) >= TEXT_WORDS_MAX
    left = CODE_TOKENS_PACKAGE
    for path in sorted(code_files):
        tokens = code_tokens(code_files[path].decode("utf-8", "replace"), limit=min(left, CODE_TOKENS_FILE))
        partial |= len(tokens) >= min(left, CODE_TOKENS_FILE)
        left -= len(tokens)
        code |= _shingles(tokens, CODE_SHINGLE)
        if left <= 0:
            break
    snippets, short = [], 0
    for body in snippet_bodies:
        tokens = [t for t in code_tokens(body) if t not in (";", "<indent>", "<dedent>")]
        if len(tokens) >= SNIPPET_TOKENS_MIN:
            snippets.append(_hash63(" ".join(tokens)))
        else:
            short += 1
    return {
        "version": FINGERPRINT_VERSION,
        "text": _sketch(_shingles(words, TEXT_SHINGLE)),
        "code": _sketch(code),
        "files": sorted(hashlib.sha256(data).hexdigest() for data in code_files.values()),
        "snippets": snippets,
        "snippets_short": short,  # bodies left out as too short to tell, counted so the words can say so
        "partial": partial,
    }


@dataclass(frozen=True)
class Likeness:
    """How much of another paper a candidate holds, and whether that is a match; the shares and counts are of the
    other paper's text, code, files and snippet bodies, so what a candidate adds to a copy does not hide it."""

    title_same: bool
    text: float
    code: float
    files_same: int
    files: int
    snippets_same: int
    snippets: int
    snippets_short: int = 0  # the other's bodies too short to compare (SNIPPET_TOKENS_MIN), not in `snippets`

    @property
    def is_match(self) -> bool:
        return (
            self.title_same
            or self.text >= NEAR
            or self.code >= NEAR
            or (self.snippets > 0 and self.snippets_same >= max(1.0, SNIPPETS_SHARE * self.snippets))
        )

    def words(self) -> str:
        """What matched, e.g. "title identical; 100% of its paper text; 97% of its code (4 of its 5 code files
        identical); 8 of its 9 comparable snippet bodies identical (1 too short to compare)"."""
        parts = ["title identical"] if self.title_same else []
        parts.append(f"{self.text:.0%} of its paper text")
        code = f"{self.code:.0%} of its code"
        if self.files_same:
            code += f" ({self.files_same} of its {self.files} code files identical)"
        parts.append(code)
        if self.snippets:
            snippets = f"{self.snippets_same} of its {self.snippets} comparable snippet bodies identical"
            if self.snippets_short:
                snippets += f" ({self.snippets_short} too short to compare)"
            parts.append(snippets)
        return "; ".join(parts)


def likeness(*, candidate: dict, title: str, other: dict, other_title: str) -> Likeness:
    """How much of `other` (a fingerprint, and its paper's title) `candidate` holds; shares and counts are the
    other's."""
    snippets, files = set(candidate["snippets"]), set(candidate["files"])
    return Likeness(
        title_same=bool(title_normalise(title)) and title_normalise(title) == title_normalise(other_title),
        text=containment_estimate(other["text"], candidate["text"]),
        code=containment_estimate(other["code"], candidate["code"]),
        files_same=sum(1 for digest in set(other["files"]) if digest in files),
        files=len(set(other["files"])),
        snippets_same=sum(1 for h in set(other["snippets"]) if h in snippets),
        snippets=len(set(other["snippets"])),
        snippets_short=other.get("snippets_short", 0),  # fingerprints stored before it was counted: not said
    )


def package_fingerprint(package: PaperPackage) -> dict:
    """A problem-set package's fingerprint: its paper text, its Python files and its snippets' bodies."""
    return fingerprint(
        paper_text=package.files.get(package.paper_path, b"").decode("utf-8", "replace"),
        code_files={path: data for path, data in package.files.items() if path.endswith(".py")},
        snippet_bodies=[s.code for annotated in package.annotated.values() for s in annotated.snippets],
    )
