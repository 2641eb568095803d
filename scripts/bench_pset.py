"""Time read_pset on a generated problem set the size of ResearchCodeBench (20 papers, 212 snippets, ~10 MB)."""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.paper2code.pset import read_pset  # noqa: E402

PAPERS = 20
SNIPPETS = 212
PAPER_TEXT_BYTES = 290_000
CODE_FILLER_LINES = 1_500


def snippet_block(paper: int, number: int) -> str:
    """A method whose body is one snippet of 8 lines of code."""
    name = f"step {number} of paper {paper}"
    body = "".join(f"        value_{i} = value_{i - 1} * 2 + {number}  # scale\n" for i in range(1, 8))
    return (
        f"    def step_{number}(self, value_0):\n"
        f'        # <paper2code name="{name}">\n{body}'
        f"        return value_7\n"
        f'        # </paper2code name="{name}">\n\n'
    )


def pset_generate(root: Path) -> int:
    """Write the set; return its size in bytes."""
    entries = []
    per_paper = [SNIPPETS // PAPERS + (1 if p < SNIPPETS % PAPERS else 0) for p in range(PAPERS)]
    filler = "".join(
        f"# helper line {i}: keeps the file realistically long\nCONSTANT_{i} = {i}\n" for i in range(CODE_FILLER_LINES)
    )
    paragraph = "We propose a method whose update rule is $x_{t+1} = x_t - \\eta \\nabla f(x_t)$. " * 12 + "\n\n"
    total = 0
    for paper, count in enumerate(per_paper):
        paper_id = f"paper-{paper:02d}"
        blocks = "".join(snippet_block(paper, n) for n in range(count))
        files = {
            "paper2code_paper.tex": paragraph * (PAPER_TEXT_BYTES // len(paragraph)),
            "paper2code_test.py": "import model\nprint('ok')\n",
            "model.py": f"import math\n\n{filler}\n\nclass Model:\n{blocks}",
            "utils.py": filler,
            "requirements.txt": "numpy\n",
        }
        for path, text in files.items():
            (root / paper_id / path).parent.mkdir(parents=True, exist_ok=True)
            (root / paper_id / path).write_text(text, encoding="utf-8")
            total += len(text.encode())
        entries.append(
            {
                "id": paper_id,
                "title": f"Paper {paper}",
                "arxiv_date": "2025-01-01",
                "annotated_file_paths": "model.py",
                "context_file_paths": ["utils.py"],
            }
        )
    (root / "papers.yaml").write_text(yaml.safe_dump(entries, sort_keys=False), encoding="utf-8")
    return total


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        size = pset_generate(root)
        timings = []
        for _ in range(3):
            start = time.perf_counter()
            papers = read_pset(root)
            timings.append(time.perf_counter() - start)
        start = time.perf_counter()
        hashes = {paper.content_hash for paper in papers}
        hashing = time.perf_counter() - start
        snippets = sum(len(f.snippets) for paper in papers for f in paper.annotated.values())
        assert len(papers) == PAPERS and snippets == SNIPPETS and len(hashes) == PAPERS
        best = min(timings)
        print(f"{len(papers)} papers, {snippets} snippets, {size / 1e6:.1f} MB")
        print(f"read_pset: first {timings[0]:.3f} s, best {best:.3f} s, {size / 1e6 / best:.0f} MB/s")
        print(f"content_hash of every paper: {hashing:.3f} s")


if __name__ == "__main__":
    main()
