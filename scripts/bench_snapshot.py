"""Time of the sealed replay's value codec: encoding in the sandbox (snapshot + dumps), parsing in the worker, and
comparing with a recording, for an Adam optimizer's state after one step of a 1M-parameter model and for one 64x512
float32 tensor; the baseline is json.dumps/json.loads of the same numbers as plain lists.

`python scripts/bench_snapshot.py [repeats]` (default 5; the median of the repeats is printed). Needs numpy; the
Adam case needs torch (a 64x512 numpy array stands in for the tensor without it).
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evaluation.judging.compare import compare, parse  # noqa: E402
from sandbox.programs.snapshot import dumps, snapshot_roots  # noqa: E402

REPEATS = int(sys.argv[1]) if len(sys.argv) > 1 else 5
CAPS = {"max_bytes": 256 << 20, "max_depth": 64, "max_items": 100_000}


def median_seconds(work: Callable[[], Any]) -> float:
    times = []
    for _ in range(REPEATS):
        started = time.perf_counter()
        work()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def measure(label: str, roots: dict[str, Any], plain: Any) -> None:
    """One line per step: our codec on ROOTS, and json of PLAIN (the same numbers as nested lists)."""
    data = dumps(snapshot_roots(roots, **CAPS))
    parsed = parse(data, max_bytes=CAPS["max_bytes"], max_depth=CAPS["max_depth"])
    other = parse(data, max_bytes=CAPS["max_bytes"], max_depth=CAPS["max_depth"])
    assert compare(parsed, other, rtol=1e-6, atol=1e-9) is None
    encode = median_seconds(lambda: dumps(snapshot_roots(roots, **CAPS)))
    decode = median_seconds(lambda: parse(data, max_bytes=CAPS["max_bytes"], max_depth=CAPS["max_depth"]))
    # Two parses of one document share no node: the comparison walks and decodes everything.
    judged = median_seconds(lambda: compare(parsed, other, rtol=1e-6, atol=1e-9))
    text = json.dumps(plain)
    plain_encode = median_seconds(lambda: json.dumps(plain))
    plain_decode = median_seconds(lambda: json.loads(text))
    print(f"{label}: snapshot {len(data) / 1e6:.2f} MB, plain json {len(text) / 1e6:.2f} MB")
    print(f"  encode   {encode * 1e3:9.2f} ms   (json.dumps of lists {plain_encode * 1e3:9.2f} ms)")
    print(f"  parse    {decode * 1e3:9.2f} ms   (json.loads of lists {plain_decode * 1e3:9.2f} ms)")
    print(f"  compare  {judged * 1e3:9.2f} ms")


def main() -> None:
    print(f"median of {REPEATS} runs; python {sys.version.split()[0]}")
    try:
        import torch
    except ImportError:
        print("torch is not installed: the Adam case is skipped")
    else:
        torch.manual_seed(0)
        model = torch.nn.Linear(1000, 1000)  # 1,001,000 parameters
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
        model(torch.randn(8, 1000)).square().mean().backward()
        optimizer.step()
        plain = {
            "params": [p.detach().tolist() for p in model.parameters()],
            "grads": [p.grad.tolist() for p in model.parameters() if p.grad is not None],
            "state": [{k: v.tolist() for k, v in optimizer.state[p].items()} for p in model.parameters()],
        }
        measure("Adam after one step, 1,001,000 parameters", {"return": optimizer, "args": model}, plain)
        tensor = torch.randn(64, 512)
        measure("torch float32 64x512", {"return": tensor}, tensor.tolist())
    import numpy as np

    array = np.random.default_rng(0).standard_normal((64, 512), dtype=np.float32)
    measure("numpy float32 64x512", {"return": array}, array.tolist())


if __name__ == "__main__":
    main()
