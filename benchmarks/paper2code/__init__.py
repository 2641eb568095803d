"""Framework-free core of the ResearchCodeBench task format: markers, masking, prompts, extraction and scoring."""

from benchmarks.paper2code.extract import extract_code, has_code_block
from benchmarks.paper2code.markers import END_RE, START_RE, AnnotatedFile, Snippet, code_indent, count_loc, parse
from benchmarks.paper2code.masking import mask, noop, splice, strip_markers
from benchmarks.paper2code.metrics import ItemResult, Score, pass_at_k, score
from benchmarks.paper2code.outcome import FAIL_STRINGS, passes
from benchmarks.paper2code.problems import PackageError, Problem
from benchmarks.paper2code.prompt import PROTOCOL, TEMPLATES, build_prompt, prompt_hash

__all__ = [
    "END_RE", "FAIL_STRINGS", "PROTOCOL", "START_RE", "TEMPLATES",
    "AnnotatedFile", "ItemResult", "PackageError", "Problem", "Score", "Snippet",
    "build_prompt", "code_indent", "count_loc", "extract_code", "has_code_block", "mask", "noop", "parse", "pass_at_k", "passes",
    "prompt_hash", "score", "splice", "strip_markers",
]
