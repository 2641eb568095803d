"""The parallel run groups as tests/parallel.py says. A test run by an xdist worker under `--dist loadgroup` carries its
group in its id, which is what the scheduler groups by (pytest 9.2 silently dropped xdist's own suffix, and every
test was scheduled alone). And a small suite run on two workers as `make test` runs them: each module on one worker,
an explicit group on one worker, the outage tests on one worker, the longest group handed out first."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections import defaultdict

import pytest

from tests.conftest import REPO
from tests.parallel import WORKER


def test_a_worker_s_test_carries_its_module_group_in_its_id(request):
    if not WORKER or not getattr(request.config.option, "loadgroup", False):
        pytest.skip("not run by an xdist worker under --dist loadgroup")
    assert request.node.nodeid.endswith("@tests/test_parallel.py"), request.node.nodeid


_RECORDED = """
import json, os, time
import pytest

def _record(request):
    with open(os.environ["RECORD"], "a") as record:
        record.write(json.dumps([os.environ["PYTEST_XDIST_WORKER"], request.node.nodeid.split("@")[0], time.time()]))
        record.write("\\n")
"""
_SUITE = {
    "test_many.py": "".join(f"def test_{n}(request):\n    _record(request)\n" for n in range(8)),
    "test_few.py": "def test_0(request):\n    _record(request)\ndef test_1(request):\n    _record(request)\n",
    "test_pair_one.py": "@pytest.mark.xdist_group('pair')\ndef test_0(request):\n    _record(request)\n",
    "test_pair_two.py": "@pytest.mark.xdist_group('pair')\ndef test_0(request):\n    _record(request)\n",
    "test_outage_one.py": "@pytest.mark.own_broker\ndef test_0(request):\n    _record(request)\n",
    "test_outage_two.py": "@pytest.mark.own_broker\ndef test_0(request):\n    _record(request)\n",
    "test_long.py": "@pytest.mark.slow\ndef test_0(request):\n    _record(request)\n",
}


def test_two_workers_keep_each_group_on_one_worker_and_start_with_the_longest(tmp_path):
    for name, body in _SUITE.items():
        (tmp_path / name).write_text(_RECORDED + textwrap.dedent(body))
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["tests.parallel"]\n')
    record = tmp_path / "record.jsonl"
    # Not this run's worker (if it is one): the small run has its own, and no Redis database to claim.
    env = {key: value for key, value in os.environ.items() if not key.startswith(("PYTEST_XDIST", "REDIS_URL"))}
    env.update({"RECORD": str(record), "PYTHONPATH": str(REPO)})
    make_test = [sys.executable, "-m", "pytest", "-q", "-n", "2", "--dist", "loadgroup"]
    # pytest-django is left out: these tests need no database (tests/parallel.py reads only Django's settings).
    ran = subprocess.run(
        [*make_test, "-p", "no:django", "-p", "no:cacheprovider"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]

    rows = [json.loads(line) for line in record.read_text().splitlines()]
    assert len(rows) == 15
    workers_of: dict[str, set[str]] = defaultdict(set)
    for worker, nodeid, _ in rows:
        workers_of[nodeid.split("::")[0]].add(worker)
    assert {len(workers) for workers in workers_of.values()} == {1}, workers_of
    assert workers_of["test_pair_one.py"] == workers_of["test_pair_two.py"]
    assert workers_of["test_outage_one.py"] == workers_of["test_outage_two.py"]
    assert {worker for worker, _, _ in rows} == {"gw0", "gw1"}
    # The outage group (two tests counted as 40 s each) and the slow test go out first, one to each worker.
    first_of = {worker: nodeid.split("::")[0] for worker, nodeid, _ in sorted(rows, key=lambda row: -row[2])}
    assert sorted(first_of.values()) in (
        ["test_long.py", "test_outage_one.py"],
        ["test_long.py", "test_outage_two.py"],
    ), first_of
