"""The proposed tests' float32 row, measured (issue 35, item 2): the float32 layer norm of
tests/submissions/test_proposed_float32.py (its tests assert within 2e-2, a tolerance meant for bfloat16 code) is
recorded in bwrap, then ten nudges of its epsilon, the mutation check's own mutants of the body and four correct
alternatives are replayed on the recorded calls and judged three ways: by scoring's sealed replay (the paper's
loosest tolerance), by the proposed tests' table with float32's row as it was (the same 2e-2) and as it is now
(numpy's allclose defaults). Each line: S, B, N where scoring, the table before, the table now kill or fail it.

With --item the same for the layer norm's mean square returned as a Python float (`.item()`,
tests/submissions/test_proposed_plain_float32.py): "before" is then the table without a float32 row for plain floats.

Run: .venv/bin/python scripts/measure_float32_tolerance.py [--cache DIR] [--item]
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import os
import re
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

LINE = "    normed = (x - mean) / np.sqrt(var + 1e-5)\n"
EPSILONS = ["1e-4", "1e-6", "1e-8", "0.0", "1e-3", "2e-5", "5e-6", "1.5e-5", "1e-5 * 10", "1e-5 / 10"]
ALTERNATIVES = [
    (
        "computed in float64, cast back",
        "    w = x.astype(np.float64)\n    m = w.mean(axis=-1, keepdims=True)\n"
        "    out = (w - m) / np.sqrt(((w - m) ** 2).mean(axis=-1, keepdims=True) + 1e-5)\n"
        "    return (out * weight + bias).astype(np.float32)\n",
    ),
    (
        "weight folded into the scale",
        "    mean = x.mean(axis=-1, keepdims=True)\n    var = np.square(x - mean).mean(axis=-1, keepdims=True)\n"
        "    return (x - mean) * (weight / np.sqrt(var + 1e-5)) + bias\n",
    ),
    (
        "E[x^2] - E[x]^2 variance",
        "    mean = x.mean(axis=-1, keepdims=True)\n    var = (x * x).mean(axis=-1, keepdims=True) - mean * mean\n"
        "    return (x - mean) / np.sqrt(var + 1e-5) * weight + bias\n",
    ),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", type=Path, default=None, help="the sandbox's environment cache")
    parser.add_argument("--item", action="store_true", help="the float32 function returning .item()")
    args = parser.parse_args()
    import django

    django.setup()
    from benchmarks.paper2code import parse, splice
    from benchmarks.paper2code.mutation import mutants_generate
    from benchmarks.services.blobs import environment_hash
    from evaluation.judging.sealed import SnippetSpan, Tolerance, answer_replay, recording_make, snippet_key
    from sandbox import backend_get
    from sandbox.harness import answer_span
    from submissions.proposed import proposed_tolerance

    # The package is the test's (imported by name, so the type checker stays out of the test suite).
    package = importlib.import_module("tests.submissions.test_proposed_float32")
    FILES, LIMITS, NORM, REORDERED = package.FILES, package.LIMITS, package.NORM, package.REORDERED  # noqa: N806
    alternatives = ALTERNATIVES
    if args.item:
        package = importlib.import_module("tests.submissions.test_proposed_plain_float32")
        FILES, NORM, REORDERED = package.FILES, package.NORM, package.REORDERED  # noqa: N806
        # The same alternatives, each returning its output's mean square as a Python float.
        alternatives = [
            (name, re.sub(r"return (.+)\n$", r"return float(np.square(\1).mean())\n", body))
            for name, body in ALTERNATIVES
        ]

    blobs: dict[str, bytes] = {}

    def store(content: bytes) -> str:
        digest = hashlib.sha256(content).hexdigest()
        blobs[digest] = content
        return digest

    annotated = parse(NORM, "norm.py")
    [snippet] = annotated.snippets
    key, hidden = snippet_key("norm.py", snippet.index), ["paper2code_test.py"]
    backend = backend_get("bwrap", cache_dir=args.cache or Path(tempfile.mkdtemp(prefix="rcb-f32-")))
    environment = backend.environment_build(env_hash=environment_hash("numpy"), requirements="numpy")
    groups = [
        ("epsilon nudges", [(f"eps -> {e}", snippet.code.replace(LINE, LINE.replace("1e-5", e))) for e in EPSILONS]),
        ("the mutation check's mutants", [(m.diff, m.body) for m in mutants_generate(snippet.code)]),
        ("correct alternatives", [("np.var and a multiply by the inverse root", REORDERED), *alternatives]),
    ]
    with backend.session(environment) as session:
        recording = recording_make(
            session=session,
            files=FILES,
            test_entry_point="paper2code_test.py",
            hidden=hidden,
            snippets=[SnippetSpan(key, "norm.py", snippet.start_line, snippet.end_line)],
            limits=LIMITS,
            store=store,
        )
        now = proposed_tolerance(recording)
        before = Tolerance(now.rtol, now.atol, {**(now.by_dtype or {}), "float32": (now.rtol, now.atol)})

        def judged(body: str) -> tuple[bool, bool, bool]:
            files = {**FILES, "norm.py": splice(annotated, snippet, body).encode()}
            span = answer_span(snippet.start_line, body)
            with_now, with_before = (
                answer_replay(
                    session=session,
                    files=files,
                    hidden=hidden,
                    recording=recording,
                    key=key,
                    limits=LIMITS,
                    load=blobs.__getitem__,
                    answer=span,
                    also=also,
                )
                for also in (now, before)
            )
            return bool(with_now.difference), bool(with_before.also_difference), bool(with_now.also_difference)

        for title, bodies in groups:
            said = {name: judged(body) for name, body in bodies}
            scoring, then, today = (sum(verdicts[i] for verdicts in said.values()) for i in range(3))
            print(f"{title}: of {len(said)}, scoring {scoring}, proposed before {then}, proposed now {today}")
            for name, verdicts in said.items():
                marks = "".join(mark if hit else "." for mark, hit in zip("SBN", verdicts, strict=True))
                print(f"   {marks} {name[:100]}")


if __name__ == "__main__":
    main()
