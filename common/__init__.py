"""The bottom layer under every app: small helpers with no domain of their own, importing no app and not `config`.

Here rather than in `config` because `config` (settings, URLs, the Celery app) sits above the apps and imports them:
an app importing a helper from it would close a cycle. Here rather than in `operations` because that app is about
background work (the event log, re-dispatch, the watchdog), and these have nothing to do with it: the error base of
every service's refusals (`errors`), the outbound-address rule (`addresses`), the REST API's parsers, error body and
exception handler (`api`), rate limiting (`ratelimit`), spreadsheet-safe CSV (`csv_export`), code highlighting
(`highlight`), the capped subprocess run (`process`), the page-side catch of refusals (`pages`) and text a
database can store (`text`).
`scripts/import_graph.py` checks that it stays below.
"""
