"""Run one GPU task end to end on a host that has a GPU: the docker backend with NVIDIA's container runtime builds
the environment (torch), the item's test runs in a container holding the GPU request, and the script prints what
the sandbox saw (CUDA available, device name, a matmul on the device) and the verdict.

Run: SANDBOX_GPU=true .venv/bin/python scripts/gpu_check.py [--requirements "torch"] [--cache var/sandbox-gpu]
On a host without a GPU it says so and exits non-zero: the engine refuses the device request.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

TEST = """import unittest

import torch


class GpuTest(unittest.TestCase):
    def test_matmul_on_the_gpu(self):
        self.assertTrue(torch.cuda.is_available(), "no CUDA device in the sandbox")
        print("device:", torch.cuda.get_device_name(0))
        x = torch.randn(256, 256, device="cuda")
        self.assertEqual((x @ x).device.type, "cuda")


if __name__ == "__main__":
    unittest.main()
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requirements", default="torch")
    parser.add_argument("--cache", type=Path, default=REPO / "var" / "sandbox-gpu")
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    from benchmarks.paper2code.requirements import requirements_vetted
    from benchmarks.services.blobs import environment_hash
    from evaluation.executor import harness_run, limits_default
    from sandbox import SandboxError, backend_get

    has_device = Path("/dev/nvidia0").exists()
    print(f"host: /dev/nvidia0 {'present' if has_device else 'ABSENT'}", flush=True)
    backend = backend_get("docker", cache_dir=args.cache.resolve())
    ok, why = backend.available()
    if not ok:
        sys.exit(f"the docker backend is not available: {why}")
    requirements = requirements_vetted(args.requirements)
    start = time.monotonic()
    environment = backend.environment_build(env_hash=environment_hash(requirements), requirements=requirements)
    print(f"environment {environment.hash[:12]} ready in {time.monotonic() - start:.0f} s", flush=True)
    limits = limits_default()
    limits = type(limits)(**{**limits.__dict__, "gpu": True})
    with backend.session(environment) as session:
        try:
            run = harness_run(
                session=session,
                files={"paper2code_test.py": TEST.encode()},
                test_entry_point="paper2code_test.py",
                limits=limits,
            )
        except SandboxError as exc:
            sys.exit(f"the engine refused the GPU run: {exc}")
    print(f"verdict: {run.verdict.status} {run.verdict.category} {run.verdict.detail}")
    if run.result is None:
        sys.exit("the run was refused before it ran")
    print(f"duration: {run.result.duration:.1f} s; stdout tail:\n{run.result.stdout[-1500:]}")
    print(f"stderr tail:\n{run.result.stderr[-1500:]}")
    sys.exit(0 if run.verdict.status == "passed" else 1)


if __name__ == "__main__":
    main()
