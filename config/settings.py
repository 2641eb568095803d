"""Settings, all read from the environment; the defaults run the embedded platform (SQLite, filesystem broker)."""

import os
from datetime import timedelta
from pathlib import Path

import environ
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent
env = environ.Env()
environ.Env.read_env(BASE_DIR / ".env", overwrite=False)

# Everything the embedded platform writes (SQLite, media, broker queue) lives under one folder.
VAR_DIR = Path(env("VAR_DIR", default=str(BASE_DIR / "var")))

DEBUG = env.bool("DEBUG", default=True)
SECRET_KEY = env("SECRET_KEY", default="insecure-dev-key-change-me" if DEBUG else environ.Env.NOTSET)
# Behind a TLS proxy (production default), which sets X-Forwarded-Proto and appends the client to X-Forwarded-For.
BEHIND_TLS_PROXY = env.bool("BEHIND_TLS_PROXY", default=not DEBUG)
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "testserver"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])
# The site's own address, scheme included: absolute links in what leaves the site (notification e-mails).
SITE_URL = env("SITE_URL", default="http://127.0.0.1:8000").rstrip("/")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "django_htmx",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "axes",
    "operations",
    "benchmarks",
    "submissions",
    "evaluation",
    "agents",
    "leaderboard",
    "humans",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    # The site's 404 and 500 pages under DEBUG too (make run), not Django's debug pages listing every route.
    "config.error_pages.SiteErrorPagesMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # A service's refusal (ApplicationError) on a page: the one place pages catch it (common/pages.py).
    "common.pages.ApplicationErrorMiddleware",
    # Last, as django-axes asks: it turns a locked-out sign-in into the lockout page.
    "axes.middleware.AxesMiddleware",
]

# With DEBUG on (make run), still the site's own 404 and 500 pages; false: Django's debug pages (config/error_pages.py).
SITE_ERROR_PAGES = env.bool("SITE_ERROR_PAGES", default=True)

if not DEBUG:
    # Serves the collected static files in production (gunicorn has none); runserver serves them while debugging.
    MIDDLEWARE.insert(1, "whitenoise.middleware.WhiteNoiseMiddleware")

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "benchmarks.context_processors.roles",
                "evaluation.context_processors.flags_awaiting",
            ],
        },
    },
]

DATABASES = {"default": env.db("DATABASE_URL", default=f"sqlite:///{VAR_DIR / 'db.sqlite3'}")}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    Path(DATABASES["default"]["NAME"]).parent.mkdir(parents=True, exist_ok=True)
    # Web process and worker write concurrently; wait for the lock instead of failing.
    DATABASES["default"].setdefault("OPTIONS", {}).update({"timeout": 20, "transaction_mode": "IMMEDIATE"})
    # A file, not memory, so Celery workers started by the tests can share the test database.
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / f"test-db-{os.getpid()}.sqlite3")}
# A persistent connection (conn_max_age in DATABASE_URL) is checked before reuse, so one broken by a database
# restart is replaced instead of failing the next request or task.
DATABASES["default"].setdefault("CONN_HEALTH_CHECKS", True)
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # Kept across requests and tasks: each connection is a server process forked for it, and a worker connected anew
    # for every item (config/celery.py checks a kept connection before each task, as Django does per request).
    DATABASES["default"].setdefault("CONN_MAX_AGE", 600)
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
AUTHENTICATION_BACKENDS = ["config.auth.LoginLimitBackend", "django.contrib.auth.backends.ModelBackend"]
# Sign-in lockout (django-axes, attempts in the database): failures per account and, separately, per client address
# before signing in is refused, even with the right password, for LOGIN_LOCKOUT_MINUTES.
AXES_FAILURE_LIMIT = env.int("LOGIN_FAILURE_LIMIT", default=10)
AXES_COOLOFF_TIME = timedelta(minutes=env.int("LOGIN_LOCKOUT_MINUTES", default=15))
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]
AXES_RESET_ON_SUCCESS = True
AXES_VERBOSE = False  # no banner on every command; lockouts are still logged as warnings
AXES_LOCKOUT_CALLABLE = "config.auth.lockout_response"
AXES_CLIENT_IP_CALLABLE = RATELIMIT_IP_META_KEY = "config.auth.client_ip"
# Sign-ups and password-reset mails per client address and per account (e-mail), e.g. "10/h" (counted in the cache).
SIGNUP_RATE = env("SIGNUP_RATE", default="10/h")
PASSWORD_RESET_RATE = env("PASSWORD_RESET_RATE", default="5/h")
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "home"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(env("STATIC_ROOT", default=str(VAR_DIR / "staticfiles")))
MEDIA_URL = "media/"
MEDIA_ROOT = Path(env("MEDIA_ROOT", default=str(VAR_DIR / "media")))
# Task files, uploads and release downloads: a folder (shared between hosts, or one host's) or an S3 bucket.
STORAGE_BACKEND = env("STORAGE_BACKEND", default="filesystem")
if STORAGE_BACKEND == "s3":
    import botocore.config

    _default_storage = {
        "BACKEND": "storages.backends.s3.S3Storage",
        "OPTIONS": {
            "bucket_name": env("S3_BUCKET"),
            "endpoint_url": env("S3_ENDPOINT_URL", default="") or None,
            "region_name": env("S3_REGION", default="") or None,
            "access_key": env("S3_ACCESS_KEY_ID", default="") or None,
            "secret_key": env("S3_SECRET_ACCESS_KEY", default="") or None,
            "location": env("S3_PREFIX", default=""),
            # Fail within seconds when the endpoint hangs, so /healthz and workers notice (boto waits minutes).
            "client_config": botocore.config.Config(
                connect_timeout=5, read_timeout=30, retries={"max_attempts": 3, "mode": "standard"}
            ),
            # Objects are private; the platform streams them, so no signed URLs leave the server.
            "default_acl": None,
            "querystring_auth": True,
        },
    }
elif STORAGE_BACKEND == "filesystem":
    _default_storage = {"BACKEND": "django.core.files.storage.FileSystemStorage"}
else:
    raise ImproperlyConfigured(f"STORAGE_BACKEND must be 'filesystem' or 's3', not {STORAGE_BACKEND!r}")
STORAGES = {
    "default": _default_storage,
    # The images use whitenoise's compressed, hashed storage (collectstatic at build time).
    "staticfiles": {
        "BACKEND": env("STATICFILES_BACKEND", default="django.contrib.staticfiles.storage.StaticFilesStorage")
    },
}

# Celery: Redis when configured, else kombu's filesystem transport so `make run` needs no server.
CELERY_BROKER_URL = env("CELERY_BROKER_URL", default=env("REDIS_URL", default="filesystem://"))
if CELERY_BROKER_URL.startswith("filesystem://"):
    _broker_dir = VAR_DIR / "broker"
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_broker_dir / "queue"),
        "data_folder_out": str(_broker_dir / "queue"),
        "processed_folder": str(_broker_dir / "processed"),
        "control_folder": str(_broker_dir / "control"),
        "store_processed": False,
        # An idle worker looks at its queues this often: at kombu's 1 s each task of an item's chain waited up to a
        # second to be taken (a run's 33 answers a half-minute); a look is one listing of a small folder.
        "polling_interval": 0.1,
    }
    # The filesystem transport expects its folders to exist.
    for _folder in ("queue", "processed", "control"):
        (_broker_dir / _folder).mkdir(parents=True, exist_ok=True)
CELERY_RESULT_BACKEND = env("CELERY_RESULT_BACKEND", default="") or None
CELERY_TASK_ACKS_LATE = True
# Celery closes the database connection after every task unless told to reuse it (see CONN_MAX_AGE above).
CELERY_DB_REUSE_MAX = 100
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_DEFAULT_QUEUE = "default"
CELERY_TASK_ROUTES = (
    "evaluation.routing.item_route",
    {
        "evaluation.tasks.item_generate": {"queue": "llm"},
        "evaluation.tasks.item_evaluate": {"queue": "sandbox"},
        "evaluation.agents.tasks.item_agent": {"queue": "sandbox"},  # an agent item's tools and scoring
        "evaluation.agents.tasks.agent_turn": {"queue": "llm"},  # an agent item's model turns
        "submissions.tasks.revision_validate": {"queue": "sandbox"},
        "submissions.tasks.revision_mutants": {"queue": "sandbox"},  # one snippet's mutants of a revision
        "submissions.tasks.set_paper_validate": {"queue": "sandbox"},
        "submissions.tasks.tried_answer_judge": {"queue": "sandbox"},
        "evaluation.tasks.environments_prune": {"queue": "sandbox"},
        "evaluation.tasks.task_prepare": {"queue": "sandbox"},
        "evaluation.tasks.run_dispatch": {"queue": "default"},
        "benchmarks.tasks.release_downloads_prepare": {"queue": "default"},
        "evaluation.tasks.harbor_dataset_prepare": {"queue": "sandbox"},  # runs the sandbox base image
    },
)
# The Celery app the operations app asks about queues and workers (operations/broker.py).
OPERATIONS_CELERY_APP = "config.celery.app"
# For `celery -A config beat`: the daily clean-up (or run `manage.py cleanup` from cron on every worker host).
CELERY_BEAT_SCHEDULE = {
    "drafts-prune": {"task": "submissions.tasks.drafts_prune", "schedule": 24 * 3600},
    "environments-prune": {"task": "evaluation.tasks.environments_prune", "schedule": 24 * 3600},
}
if CELERY_BROKER_URL.startswith(("redis://", "rediss://")):
    # An unacknowledged task (its worker died) is redelivered after this many seconds.
    CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": env.int("CELERY_VISIBILITY_TIMEOUT", default=3600)}

# A worker never gives up on the broker: it reconnects until the broker is back (a task it is running goes on).
CELERY_BROKER_CONNECTION_MAX_RETRIES = None
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = False

# A running run with no new result for this long is flagged as stalled on the operations page.
RUN_STALL_SECONDS = env.int("RUN_STALL_SECONDS", default=900)
# Runs one user (not a maintainer) may have queued or running at once, started or uploaded.
RUNS_ACTIVE_PER_USER = env.int("RUNS_ACTIVE_PER_USER", default=3)
# The human baseline (humans/): an item attempted by fewer people is marked thin; a body pasted whole within this
# many seconds of opening is marked a fast paste.
HUMAN_THIN_PEOPLE = env.int("HUMAN_THIN_PEOPLE", default=3)
HUMAN_FAST_PASTE_SECONDS = env.float("HUMAN_FAST_PASTE_SECONDS", default=60.0)
# The Humans row's 95% intervals resample attempted items: under this many items none is given (one item gives a
# degenerate [100, 100] or [0, 0]) and the row says so.
HUMAN_INTERVAL_MIN_ITEMS = env.int("HUMAN_INTERVAL_MIN_ITEMS", default=10)
# A run whose model calls fail this many times in a row, the same way (a bad key, a wrong model name), pauses
# itself instead of spending the workers on answers that cannot come; its owner fixes the model and resumes.
RUN_PAUSE_AFTER_FAILURES = env.int("RUN_PAUSE_AFTER_FAILURES", default=5)
# Every worker looks this often (seconds; 0: never) for runs and validations that made no progress for
# RUN_REDISPATCH_SECONDS while no task of theirs is queued or held by a worker, and queues their missing work again.
# On Redis the broker's queues are read per run (they hold only the feeder's shares), so a run none of whose tasks
# is queued or held by a worker is lost after RUN_LOST_SECONDS without progress, not RUN_REDISPATCH_SECONDS.
RUN_WATCH_SECONDS = env.int("RUN_WATCH_SECONDS", default=5)
RUN_REDISPATCH_SECONDS = env.int("RUN_REDISPATCH_SECONDS", default=300)
RUN_LOST_SECONDS = env.int("RUN_LOST_SECONDS", default=20)
# A validation (a submission's, or one paper of a set) lost again after this many re-dispatches is given up: its
# unfinished checks become errors of the platform, so it ends and can be run again instead of blocking for ever.
VALIDATION_REDISPATCH_MAX = env.int("VALIDATION_REDISPATCH_MAX", default=3)
# The feeder (services.run_feed, a chore of operations/watchdog.py): a run keeps at most RUN_ITEMS_IN_FLIGHT items
# (x (1 + priority)) queued or running; the runs tested straight away (uploads, calibration) keep together only what
# the live sandbox workers' slots run (their watchdogs say how many), given out by owner, then run, shortest
# remaining first (services.shares_plan), so a small run never waits behind other runs' backlogs; one user's
# model-calling runs keep USER_ITEMS_IN_FLIGHT together;
# every worker tops the running runs up every RUN_FEED_SECONDS (and a run whenever one of its items ends).
RUN_ITEMS_IN_FLIGHT = env.int("RUN_ITEMS_IN_FLIGHT", default=8)
USER_ITEMS_IN_FLIGHT = env.int("USER_ITEMS_IN_FLIGHT", default=16)
# An agent run's share instead: its items wait on the model between tool calls, so a worker's llm slots, not its
# cores, bound how many make progress at once. A user's runs still stay within USER_ITEMS_IN_FLIGHT together.
AGENT_ITEMS_IN_FLIGHT = env.int("AGENT_ITEMS_IN_FLIGHT", default=32)
# A run that got no slot and made no progress for this long (seconds) gets one slot before the shortest-first rule
# shares the rest, so a stream of small runs never starves a big one (services.shares_plan).
RUN_STARVED_SECONDS = env.int("RUN_STARVED_SECONDS", default=120)
RUN_FEED_SECONDS = env.int("RUN_FEED_SECONDS", default=5)
# A release's downloads are built by a worker after publishing; a failed build is tried again after this many seconds
# (three times) before the release's page says it failed.
RELEASE_DOWNLOADS_RETRY_SECONDS = env.int("RELEASE_DOWNLOADS_RETRY_SECONDS", default=30)
# A release's import, validation and publish have the workers make its tasks' test manifests and recordings, so its
# first run does not (evaluation/preparation.py); off, runs make them on their first items (the test suite).
RELEASE_PREPARE = env.bool("RELEASE_PREPARE", default=True)
# Build each published release's public split as a Harbor dataset download (a sandbox worker, which runs the sandbox
# base image on the Docker engine, builds it after publishing; evaluation/harbor/dataset.py).
HARBOR_DATASET_DOWNLOAD = env.bool("HARBOR_DATASET_DOWNLOAD", default=True)
# Publishing a release starts its calibration runs (the reference and placeholder lines its leaderboard needs).
RELEASE_CALIBRATE_ON_PUBLISH = env.bool("RELEASE_CALIBRATE_ON_PUBLISH", default=True)
# A task that loses its database connection waits this long for the database, then runs again in place.
DATABASE_OUTAGE_WAIT_SECONDS = env.int("DATABASE_OUTAGE_WAIT_SECONDS", default=600)

# Calls per minute per provider (the prefix of the litellm model string), e.g. "openai=500,anthropic=50".
LLM_RATE_LIMITS = env.dict("LLM_RATE_LIMITS", default={})
# Hosts users' models may reach although their addresses are private (an in-house inference server; tests).
MODEL_API_ALLOWED_HOSTS = env.list("MODEL_API_ALLOWED_HOSTS", default=[])
# Providers whose models may receive held-out prompts even when a non-maintainer registered the model (at the
# provider's own address, sampling parameters only); models registered by maintainers are trusted anyway.
HELD_OUT_PROVIDERS = frozenset(env.list("HELD_OUT_PROVIDERS", default=[]))

_redis_cache = env("REDIS_URL", default="")
CACHES = {
    # Redis, or this process's memory while Redis is down (config/caches.py): the site answers through an outage.
    "default": {
        "BACKEND": "config.caches.RedisCacheWithLocalFallback",
        "LOCATION": _redis_cache,
        "OPTIONS": {"socket_connect_timeout": 1, "socket_timeout": 2},
    }
    if _redis_cache
    else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
}

SANDBOX_BACKEND = env("SANDBOX_BACKEND", default="auto")
# Environments (venvs, image build logs) and fetched task files are cached here, per worker host.
SANDBOX_CACHE_DIR = Path(env("SANDBOX_CACHE_DIR", default=str(VAR_DIR / "sandbox")))
# Hard limits of one test run in the sandbox.
SANDBOX_WALL_SECONDS = env.float("SANDBOX_WALL_SECONDS", default=300.0)
SANDBOX_MEMORY_MB = env.int("SANDBOX_MEMORY_MB", default=4096)
SANDBOX_PROCESSES = env.int("SANDBOX_PROCESSES", default=256)
SANDBOX_CPUS = env.float("SANDBOX_CPUS", default=1.0)
# bwrap and docker: each item forks from a warm zygote per worker and environment that has the heavy modules imported
# (false: a fresh interpreter per item). An environment whose preloads are not fork-safe falls back to cold starts by
# itself.
SANDBOX_FORKSERVER = env.bool("SANDBOX_FORKSERVER", default=True)
# This worker host has a GPU (and the docker backend with NVIDIA's runtime): it may take the `gpu` queue's items.
SANDBOX_GPU = env.bool("SANDBOX_GPU", default=False)
SANDBOX_OUTPUT_KB = env.int("SANDBOX_OUTPUT_KB", default=1024)
SANDBOX_DISK_MB = env.int("SANDBOX_DISK_MB", default=1024)
# Agent runs (the agents app): the per-item budget maximums of a release that sets none, a run's default; a
# tool command's own time limit and output cap; where workspaces live on a worker's disk between turns.
AGENT_BUDGET_MAXIMUMS = {
    "turns": env.int("AGENT_MAX_TURNS", default=50),
    "tokens": env.int("AGENT_MAX_TOKENS", default=1_000_000),
    "seconds": env.float("AGENT_MAX_SECONDS", default=1800.0),
    "cost": env.float("AGENT_MAX_COST", default=5.0),
}
AGENT_COMMAND_SECONDS = env.float("AGENT_COMMAND_SECONDS", default=60.0)
AGENT_OUTPUT_BYTES = env.int("AGENT_OUTPUT_BYTES", default=16 * 1024)
AGENT_LIST_ENTRIES = env.int("AGENT_LIST_ENTRIES", default=1000)  # files list_files names at most
AGENT_TOOL_CALLS_PER_TURN = env.int("AGENT_TOOL_CALLS_PER_TURN", default=16)  # more in one turn are not run
AGENT_WORKSPACE_FILES = env.int("AGENT_WORKSPACE_FILES", default=100_000)  # files and folders; over: item ends
AGENT_TRAJECTORY_BYTES = env.int("AGENT_TRAJECTORY_BYTES", default=8 * 1024 * 1024)  # stored steps; over: item ends
AGENT_WORKSPACE_DIR = Path(env("AGENT_WORKSPACE_DIR", default=str(SANDBOX_CACHE_DIR / "agent-workspaces")))
SANDBOX_DOCKER_BASE_IMAGE = env("SANDBOX_DOCKER_BASE_IMAGE", default="rcb-sandbox-base:bookworm")
# Building one environment (every round of fetching outside and installing in the network-less sandbox) may take
# this long, and fetch at most this many MB of distributions from the package index.
SANDBOX_BUILD_SECONDS = env.int("SANDBOX_BUILD_SECONDS", default=1800)
SANDBOX_FETCH_MB = env.int("SANDBOX_FETCH_MB", default=4096)
# Projects whose distributions come from one index of the operator's choosing alone, e.g. a framework's CPU-only
# wheel index (`torch=<its CPU index URL>`), so `torch>=2.1` in a task's requirements builds the CPU build for CPU
# tests. Applied by the environment builder, never written by an author; empty: every project from the host's pip.
SANDBOX_CPU_WHEEL_INDEXES = env.dict("SANDBOX_CPU_WHEEL_INDEXES", default={})

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "config.api_auth.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticatedOrReadOnly"],
    "DEFAULT_PARSER_CLASSES": ["common.api.JSONParser", "common.api.FormParser", "common.api.MultiPartParser"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_PAGINATION_CLASS": "common.api.PageNumberPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_THROTTLE_CLASSES": [
        "rest_framework.throttling.UserRateThrottle",
        "rest_framework.throttling.AnonRateThrottle",
    ],
    "DEFAULT_THROTTLE_RATES": {
        "user": env("API_THROTTLE_USER", default="1000/hour"),
        "anon": env("API_THROTTLE_ANON", default="100/hour"),
    },
    "EXCEPTION_HANDLER": "common.api.exception_handler",
    # Money is a number in JSON like every other quantity (a string read as text sorts "10" before "9").
    "COERCE_DECIMAL_TO_STRING": False,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Research-code benchmark API",
    "VERSION": "1",
    # The docs page works offline: Swagger UI is served from the drf-spectacular-sidecar package, not a CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # Several models have a "status"; each choice set gets a stable name instead of a numbered collision name.
    "ENUM_NAME_OVERRIDES": {
        "RunStatusEnum": "evaluation.models.EvaluationRun.Status",
        "RunModeEnum": "evaluation.models.RUN_MODES",
        "RunRecordModeEnum": "evaluation.models.RUN_RECORD_MODES",
    },
}

MAINTAINERS_GROUP = "maintainers"
# Validation of submissions: reference runs in a row, and the time limit of one test run.
SUBMISSION_REFERENCE_RUNS = env.int("SUBMISSION_REFERENCE_RUNS", default=3)
SUBMISSION_TEST_SECONDS = env.float("SUBMISSION_TEST_SECONDS", default=300.0)
# A set validation judges each reference as an answer this many times (a submission's validation: twice). Once by
# default: a second judging doubled a whole set's validation (2.75x one warm run of the set against 1.7x), while the
# reference's own runs (SUBMISSION_REFERENCE_RUNS) and the release's calibration runs still run it again.
SET_VALIDATION_JUDGED_RUNS = env.int("SET_VALIDATION_JUDGED_RUNS", default=1)
# Mutation score (issue 24): mutants of each reference body a submission's validation runs (0: none), the seed that
# chooses them, the score below which validation warns (a release may state its own), and a mutant's time limit as
# a multiple of the reference's slowest run (at least MUTATION_MIN_SECONDS; a mutant that times out is killed).
SUBMISSION_MUTANTS = env.int("SUBMISSION_MUTANTS", default=10)
MUTATION_SEED = env.int("MUTATION_SEED", default=24)
MUTATION_SCORE_MIN = env.float("MUTATION_SCORE_MIN", default=0.6)
MUTATION_TIME_FACTOR = env.float("MUTATION_TIME_FACTOR", default=3.0)
MUTATION_MIN_SECONDS = env.float("MUTATION_MIN_SECONDS", default=10.0)
# Limits on what authors upload or point to (bytes, files, seconds).
SUBMISSION_MAX_ARCHIVE_BYTES = env.int("SUBMISSION_MAX_ARCHIVE_BYTES", default=50 * 1000 * 1000)
SUBMISSION_MAX_UNPACKED_BYTES = env.int("SUBMISSION_MAX_UNPACKED_BYTES", default=200 * 1000 * 1000)
SUBMISSION_MAX_FILES = env.int("SUBMISSION_MAX_FILES", default=5000)
SUBMISSION_MAX_FILE_BYTES = env.int("SUBMISSION_MAX_FILE_BYTES", default=50 * 1000 * 1000)
SUBMISSION_CLONE_TIMEOUT = env.int("SUBMISSION_CLONE_TIMEOUT", default=120)
SUBMISSION_MAX_REPO_BYTES = env.int("SUBMISSION_MAX_REPO_BYTES", default=200 * 1000 * 1000)
# Per author (maintainers exempt): bytes of files their submissions keep, and distinct environments (requirement
# sets) their revisions of the last SANDBOX_ENVIRONMENT_UNUSED_DAYS need.
SUBMISSION_USER_MAX_BYTES = env.int("SUBMISSION_USER_MAX_BYTES", default=1000 * 1000 * 1000)
SUBMISSION_USER_MAX_ENVIRONMENTS = env.int("SUBMISSION_USER_MAX_ENVIRONMENTS", default=10)
# Clean-up (`manage.py cleanup`, or the Celery tasks of CELERY_BEAT_SCHEDULE): drafts never submitted that hold no
# files, untouched this many days, are deleted; environments no run used this many days are removed from the host.
SUBMISSION_DRAFT_ABANDONED_DAYS = env.int("SUBMISSION_DRAFT_ABANDONED_DAYS", default=30)
SANDBOX_ENVIRONMENT_UNUSED_DAYS = env.int("SANDBOX_ENVIRONMENT_UNUSED_DAYS", default=30)
# Hosts exempt from the private-network refusal of git URLs (tests, or an internal forge).
SUBMISSION_GIT_ALLOWED_HOSTS = env.list("SUBMISSION_GIT_ALLOWED_HOSTS", default=[])
# A pasted paper text can run to a few MB.
DATA_UPLOAD_MAX_MEMORY_SIZE = 10 * 1024 * 1024
# Encrypts per-model API keys at rest: required in production; while debugging it defaults to SECRET_KEY.
FIELD_ENCRYPTION_KEY = env("FIELD_ENCRYPTION_KEY", default="")
# Earlier keys that still decrypt (for a key change; `manage.py model_keys_reencrypt` moves keys to the new one).
FIELD_ENCRYPTION_KEY_FALLBACKS = env.list("FIELD_ENCRYPTION_KEY_FALLBACKS", default=[])

EMAIL_BACKEND = env("EMAIL_BACKEND", default="django.core.mail.backends.console.EmailBackend")
EMAIL_HOST = env("EMAIL_HOST", default="localhost")
EMAIL_PORT = env.int("EMAIL_PORT", default=25)
EMAIL_HOST_USER = env("EMAIL_HOST_USER", default="")
EMAIL_HOST_PASSWORD = env("EMAIL_HOST_PASSWORD", default="")
EMAIL_USE_TLS = env.bool("EMAIL_USE_TLS", default=False)
DEFAULT_FROM_EMAIL = env("DEFAULT_FROM_EMAIL", default="benchmark@localhost")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"json": {"()": "config.logs.JsonFormatter"}},
    # One JSON object per line in production (LOG_FORMAT=json), plain lines while developing.
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            **({"formatter": "json"} if env("LOG_FORMAT", default="plain") == "json" else {}),
        }
    },
    "root": {"handlers": ["console"], "level": env("LOG_LEVEL", default="INFO")},
}

# Production: no placeholder secrets, cookies only over https, HSTS, and the proxy's scheme header trusted.
if not DEBUG:
    from config.production import production_secrets_check

    production_secrets_check(
        secrets={
            name: env(name, default="")
            for name in (
                "SECRET_KEY",
                "FIELD_ENCRYPTION_KEY",
                "MAINTAINER_PASSWORD",
                "POSTGRES_PASSWORD",
                "REDIS_PASSWORD",
                "EMAIL_HOST_PASSWORD",
                "S3_SECRET_ACCESS_KEY",
            )
        },
        urls={name: env(name, default="") for name in ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL")},
        secret_key=SECRET_KEY,
        field_key=FIELD_ENCRYPTION_KEY,
    )
    SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = True
    SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=True)
    SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=31536000)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", default=True)
    SECURE_HSTS_PRELOAD = env.bool("SECURE_HSTS_PRELOAD", default=True)
    if BEHIND_TLS_PROXY:
        SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    # /healthz answers the load balancer over plain http inside the private network.
    SECURE_REDIRECT_EXEMPT = [r"^healthz$"]
