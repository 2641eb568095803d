"""The verifier of an exported Harbor task (tests/verify.py in the task, run by tests/test.sh as root in Harbor's
verifier container): take the answer's region out of the agent's file, splice it into the original file, run the
paper's tests under the platform's own harness (tests/rcb/sandbox/harness.py, a verbatim copy) as the
unprivileged sandbox user, and write the reward and the answer to the verifier's logs.

Framework-free on purpose: it runs where no Django and no platform are installed. The platform never trusts what it
writes: an imported trial's answer is scored again by the platform's own judging step (evaluation/harbor/imports.py).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from sandbox.harness import (
    GuardSpec,
    answer_span,
    harness_command,
    harness_files,
    harness_verdict,
    nonce_new,
)

TESTS = Path(__file__).resolve().parent
LOGS = Path("/logs/verifier")
WORK = Path("/tmp/rcb-verify")
SANDBOX_UID = 10001  # the sandbox base image's unprivileged user, who runs the answer


def answer_read(final: str | None, item: dict) -> tuple[str | None, str]:
    """(the body between the masked file's prefix and suffix, "") or (None, why), as the platform's agent runs do."""
    if final is None:
        return None, f"{item['path']} is missing from the workspace at the end"
    prefix, suffix = item["prefix"], item["suffix"]
    if not final.startswith(prefix):
        return None, f"{item['path']} was changed above the TODO block, so the answer's region cannot be found"
    if not final.endswith(suffix) or len(final) < len(prefix) + len(suffix):
        return None, f"{item['path']} was changed below the TODO block, so the answer's region cannot be found"
    return final[len(prefix) : len(final) - len(suffix)], ""


def tests_passed(verdict, manifest: dict) -> str:
    """Why the harness's count of the tests is no pass against the task's manifest (FORMAT.md 7.5); "" if it is."""
    runner = manifest.get("runner")
    if runner == "script":
        return "" if not verdict.test_runs else "the tests ran through unittest.main, which the reference's do not"
    if runner == "unittest":
        if verdict.test_runs != manifest.get("runs", 1):
            return f"the tests ran {verdict.test_runs} times (the reference's: {manifest.get('runs', 1)})"
        expected = manifest["tests"]
        seen = {test.id: test for test in verdict.tests}
        for name, outcome in expected.items():
            test = seen.get(name)
            if test is None:
                return f"{name} did not run"
            ok = test.clean if outcome == "passed" else test.outcome == outcome
            if not ok or test.subtests[1] < manifest.get("subtests", {}).get(name, 0):
                return f"{name} {test.outcome}"
        extra = sorted(set(seen) - set(expected))
        return f"{extra[0]} is not a test of this task's manifest" if extra else ""
    failing = [test for test in verdict.tests if not test.clean]  # strict: no manifest, every test must pass
    return f"{failing[0].id} {failing[0].outcome}" if failing else ""


def judge(item: dict, final: str | None) -> tuple[bool, str, str | None]:
    """(passed, why not, the answer's body) of the agent's final file."""
    body, problem = answer_read(final, item)
    if body is None:
        return False, problem, None
    code = body + item["ending"] if body and not body.endswith(("\n", "\r")) else body
    first, last = answer_span(item["start_line"], code)
    shutil.rmtree(WORK, ignore_errors=True)
    shutil.copytree(TESTS / "package", WORK, symlinks=False)
    (WORK / item["original"]).write_text(item["head"] + code + item["tail"], encoding="utf-8")
    nonce = nonce_new()
    for name, data in harness_files(nonce).items():
        (WORK / name).write_bytes(data)
    for path in [WORK, *WORK.rglob("*")]:
        os.chown(path, SANDBOX_UID, SANDBOX_UID, follow_symlinks=False)
    guard = GuardSpec(
        answer_file=item["original"],
        first_line=first,
        last_line=last,
        hidden_modules=tuple(item["hidden_modules"]),
        hidden_files=tuple(item["hidden_files"]),
        imports=tuple(item.get("imports", ())),  # a task exported before the guard imported them has none
    )
    command = [
        "setpriv",
        f"--reuid={SANDBOX_UID}",
        f"--regid={SANDBOX_UID}",
        "--clear-groups",
        "timeout",
        "-s",
        "KILL",
        str(item["seconds"]),
        *harness_command(item["python"], item["entry_point"], guard),
    ]
    result = subprocess.run(
        command, cwd=WORK, capture_output=True, text=True, errors="replace", env={"PATH": "/usr/bin:/bin"}
    )
    verdict = harness_verdict(result.stdout, nonce)
    if not verdict.completed:
        why = verdict.reason + (" (the time limit)" if result.returncode == -9 else "")
        return False, f"{why}; stderr: {result.stderr[-300:]}", body
    if result.returncode != 0:
        return False, f"exit status {result.returncode}", body
    if verdict.records:
        return False, "the runtime guard recorded the answer reaching hidden state: held for review", body
    problem = tests_passed(verdict, item["manifest"])
    return not problem, problem, body


def main() -> int:
    item = json.loads((TESTS / "item.json").read_text(encoding="utf-8"))
    answer_path = Path(item["workspace"]) / item["path"]
    final = answer_path.read_text(encoding="utf-8", errors="surrogateescape") if answer_path.is_file() else None
    passed, why, body = judge(item, final)
    LOGS.mkdir(parents=True, exist_ok=True)
    if body is not None:
        (LOGS / "answer.txt").write_text(body, encoding="utf-8", errors="surrogateescape")
    (LOGS / "verdict.json").write_text(json.dumps({"passed": passed, "detail": why, "item": item["item"]}) + "\n")
    (LOGS / "reward.json").write_text(
        json.dumps({"reward": int(passed), "passed": int(passed), "loc": item["loc"], "weighted": item["loc"] * passed})
    )
    (LOGS / "reward.txt").write_text(f"{int(passed)}\n")
    print(("passed" if passed else "failed") + (f": {why}" if why else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
