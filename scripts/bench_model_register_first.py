"""The first model registration's wait for litellm, before and after the web process loads it at start.

Each case runs in a fresh interpreter, as a new web process is: "before" sets Django up as any process does and
times the first provider check (what POST /models/new/ calls); "after" imports config.wsgi (the web process's
start, which now loads litellm) and times the same first check. Prints seconds and the ratio.

    DATABASE_URL=... python scripts/bench_model_register_first.py
"""

from __future__ import annotations

import json
import subprocess
import sys

CASE = r"""
import json, os, sys, time
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
start = time.perf_counter()
if sys.argv[1] == "after":
    import config.wsgi  # noqa: F401
else:
    import django
    django.setup()
started = time.perf_counter() - start
from evaluation.llm import provider_problem
begin = time.perf_counter()
assert provider_problem(model="openai/gpt-4o-mini", api_base=None) is None
print(json.dumps({"start": started, "first_check": time.perf_counter() - begin}))
"""


def case(name: str) -> dict:
    out = subprocess.run([sys.executable, "-c", CASE, name], capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    before, after = case("before"), case("after")
    for name, said in (("before", before), ("after", after)):
        print(f"{name}: process start {said['start']:.2f} s, first provider check {said['first_check']:.3f} s")
    print(f"first registration's check, before / after: {before['first_check'] / after['first_check']:.0f}x")


if __name__ == "__main__":
    main()
