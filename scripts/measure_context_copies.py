"""False refusals of the context-copy rule on real files (issue 33): every installed .py, .pyi, .yaml, .yml and .json
file of a site-packages folder is compared, as a context file would be (a one-line reference of
REFERENCE_LINE_MIN_TOKENS counts alone), with the references of the demo set, tinyformer and Muon, by its raw text
and JSON strings (the rule before) and also by its string literals' and YAML scalars' values (the rule now).
Each line: the references, the files refused before and now, and the time each reading took.

Run: .venv/bin/python scripts/measure_context_copies.py [SITE_PACKAGES]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SETS = {
    "demo": ROOT / "benchmarks" / "demo",
    "tinyformer": ROOT / "tests" / "evaluation" / "packages" / "tinyformer",
    "muon": ROOT / "tests" / "evaluation" / "packages" / "muon",
}
SUFFIXES = (".py", ".pyi", ".yaml", ".yml", ".json")


def main() -> None:
    from benchmarks.paper2code import hidden
    from benchmarks.paper2code.markers import parse

    site = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(sys.prefix) / "lib"
    files = {
        str(path): path.read_bytes()
        for path in sorted(site.rglob("*"))
        if path.suffix in SUFFIXES and path.is_file() and path.stat().st_size <= hidden.SCAN_BYTES
    }
    print(f"{len(files)} files under {site}")
    literal_strings = hidden._literal_strings
    for name, folder in SETS.items():
        annotated = [
            parse(path.read_text(), str(path.relative_to(folder)))
            for path in sorted(folder.rglob("*.py"))
            if "<paper2code" in path.read_text()
        ]
        references = hidden.package_references(annotated, lines_alone=True)
        hidden._literal_strings = lambda path, text: ""  # the rule before: raw text and JSON strings
        started = time.perf_counter()
        before = hidden.reference_copies(files, references)
        took_before = time.perf_counter() - started
        hidden._literal_strings = literal_strings
        started = time.perf_counter()
        now = hidden.reference_copies(files, references)
        took = time.perf_counter() - started
        print(
            f"{name}: {len(references)} references, refused before {len(before)} ({took_before:.1f} s), "
            f"now {len(now)} ({took:.1f} s)"
        )
        for path in sorted(set(now) - set(before))[:20]:
            print(f"   new: {path} ({', '.join(now[path])})")


if __name__ == "__main__":
    main()
