"""How long one paper once costs (issue 37): making a package's fingerprint, and one check of a paper against N
stored fingerprints (their JSON read as the database gives it, and compared). No Django, no database.

    python scripts/bench_likeness.py [N]
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.paper2code.likeness import likeness, package_fingerprint  # noqa: E402
from benchmarks.paper2code.pset import read_pset  # noqa: E402

REPO = Path(__file__).resolve().parent.parent


def main(papers_stored: int) -> None:
    papers = [*read_pset(REPO / "benchmarks/demo"), *read_pset(REPO / "tests/evaluation/packages/muon")]
    started = time.perf_counter()
    prints = [package_fingerprint(p) for p in papers]
    made = (time.perf_counter() - started) / len(papers)
    stored = [json.dumps(prints[i % len(prints)]) for i in range(papers_stored)]
    started = time.perf_counter()
    loaded = [json.loads(text) for text in stored]
    read = time.perf_counter() - started
    started = time.perf_counter()
    found = sum(
        likeness(candidate=prints[0], title=papers[0].title, other=other, other_title="").is_match for other in loaded
    )
    compared = time.perf_counter() - started
    print(
        f"fingerprint: {made * 1000:.1f} ms per paper, {sum(map(len, stored)) / papers_stored / 1024:.1f} KiB stored; "
        f"one check against {papers_stored} papers: {read * 1000:.0f} ms reading + {compared * 1000:.0f} ms "
        f"comparing ({found} matches)"
    )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 500)
