"""Framework-free core of the ResearchCodeBench task format: markers, masking, prompts, extraction and scoring."""

from benchmarks.paper2code.extract import extract_code, has_code_block
from benchmarks.paper2code.items import items_read
from benchmarks.paper2code.markers import (
    END_RE,
    START_RE,
    AnnotatedFile,
    Snippet,
    body_reindent,
    code_indent,
    count_loc,
    indent_width,
    parse,
)
from benchmarks.paper2code.masking import MASKINGS, mask, mask_original, noop, splice, strip_markers
from benchmarks.paper2code.metrics import ItemResult, Score, pass_at_k, score
from benchmarks.paper2code.outcome import FAIL_STRINGS, passes
from benchmarks.paper2code.problems import PackageError, Problem
from benchmarks.paper2code.prompt import (
    CONTEXT_JOINS,
    PROTOCOL,
    RCB_V1,
    Protocol,
    build_prompt,
    prompt_fill,
    prompt_hash,
    prompt_template,
    protocol_mask,
)

__all__ = [
    "CONTEXT_JOINS",
    "END_RE",
    "FAIL_STRINGS",
    "MASKINGS",
    "PROTOCOL",
    "RCB_V1",
    "START_RE",
    "AnnotatedFile",
    "ItemResult",
    "PackageError",
    "Problem",
    "Protocol",
    "Score",
    "Snippet",
    "body_reindent",
    "build_prompt",
    "code_indent",
    "count_loc",
    "extract_code",
    "has_code_block",
    "indent_width",
    "items_read",
    "mask",
    "mask_original",
    "noop",
    "parse",
    "pass_at_k",
    "passes",
    "prompt_fill",
    "prompt_hash",
    "prompt_template",
    "protocol_mask",
    "score",
    "splice",
    "strip_markers",
]
