#!/bin/bash
# The demo release (or RELEASE) exported as Harbor tasks, linted, and run by Harbor itself on the local Docker
# engine with its oracle and no-op agents: the oracle must score every task 1 and the no-op agent every task 0.
#
#   scripts/harbor_roundtrip.sh OUT [HARBOR]    (HARBOR: the harbor executable, default /work/harbor-venv/bin/harbor;
#                                                DATABASE_URL names the platform's database, as for manage.py)
set -euo pipefail
out="${1:?usage: $0 OUT [HARBOR]}"
harbor="${2:-/work/harbor-venv/bin/harbor}"
release="${RELEASE:-demo-1.0.0}"
here="$(cd "$(dirname "$0")/.." && pwd)"
python="${PYTHON:-$here/.venv/bin/python}"

start=$SECONDS
"$python" "$here/manage.py" export_harbor "$out/tasks" --version "$release"
echo "export: $((SECONDS - start)) s"
start=$SECONDS
"$harbor" lint "$out"/tasks/*/
echo "lint: no finding ($((SECONDS - start)) s)"
for agent in oracle nop; do
    start=$SECONDS
    "$harbor" run -p "$out/tasks" -a "$agent" -e docker -n "${CONCURRENCY:-2}" -o "$out/jobs" --job-name "$agent" -y -q
    echo "$agent: $((SECONDS - start)) s"
done
"$python" - "$out/jobs" <<'PYEOF'
import json, sys
from pathlib import Path

expected = {"oracle": 1, "nop": 0}
bad = []
for agent, want in expected.items():
    trials = [p for p in (Path(sys.argv[1]) / agent).iterdir() if (p / "result.json").is_file()]
    rewards = {}
    for trial in trials:
        result = json.loads((trial / "result.json").read_text())
        reward = ((result.get("verifier_result") or {}).get("rewards") or {}).get("reward")
        rewards[result["task_name"]] = reward
        if reward != want:
            bad.append(f"{agent}: {result['task_name']} scored {reward!r}, not {want}")
    print(f"{agent}: {sum(r == want for r in rewards.values())}/{len(rewards)} scored {want}")
sys.exit("\n".join(bad) if bad else 0)
PYEOF
