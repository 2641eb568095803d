"""Latency of a running site's pages, against a static file served by the same process as the baseline.

    .venv/bin/python scripts/bench_http.py [--url http://127.0.0.1:8000] [--repeat 50] [--proxy-https]

--proxy-https sends X-Forwarded-Proto: https, as the TLS proxy in front of the compose stack does.
"""

from __future__ import annotations

import argparse
import statistics
import time

import requests

BASELINE = "/static/vendor/htmx-2.0.11.min.js"
# One API path: anonymous clients may make API_THROTTLE_ANON (100/hour) calls.
PATHS = ("/healthz", "/", "/versions/demo-1.0.0/leaderboard/", "/api/v1/releases/demo-1.0.0/leaderboard/")


def timings(session: requests.Session, url: str, repeat: int) -> list[float]:
    session.get(url).raise_for_status()  # warm: connection, caches
    seconds = []
    for _ in range(repeat):
        start = time.perf_counter()
        session.get(url).raise_for_status()
        seconds.append(time.perf_counter() - start)
    return sorted(seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--repeat", type=int, default=50)
    parser.add_argument("--host", default="localhost", help="Host header (one of ALLOWED_HOSTS)")
    parser.add_argument("--proxy-https", action="store_true")
    args = parser.parse_args()
    session = requests.Session()
    session.headers["Host"] = args.host
    if args.proxy_https:
        session.headers["X-Forwarded-Proto"] = "https"
    base = statistics.median(timings(session, args.url + BASELINE, args.repeat))
    print(f"{'path':<45} {'median ms':>10} {'p95 ms':>8} {'vs static':>10}")
    print(f"{BASELINE + ' (baseline)':<45} {base * 1000:>10.1f} {'':>8} {1:>9.2f}x")
    for path in PATHS:
        seconds = timings(session, args.url + path, args.repeat)
        median, p95 = statistics.median(seconds), seconds[int(len(seconds) * 0.95) - 1]
        print(f"{path:<45} {median * 1000:>10.1f} {p95 * 1000:>8.1f} {median / base:>9.2f}x")


if __name__ == "__main__":
    main()
