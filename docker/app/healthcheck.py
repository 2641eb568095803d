"""The web container's health check: GET /healthz on the local gunicorn, as the first allowed host."""

import os
import sys
import urllib.request

host = os.environ.get("ALLOWED_HOSTS", "localhost").split(",")[0].strip().lstrip(".") or "localhost"
host = "localhost" if host == "*" else host
request = urllib.request.Request("http://127.0.0.1:8000/healthz", headers={"Host": host})
try:
    with urllib.request.urlopen(request, timeout=8) as response:
        sys.exit(0 if response.status == 200 else 1)
except Exception as exc:  # any failure is unhealthy; say why in the container's health log
    print(f"healthz: {exc}", file=sys.stderr)
    sys.exit(1)
