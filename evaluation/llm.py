"""The one place the platform calls models: a litellm completion with retries, token, latency and cost accounting."""

from __future__ import annotations

import contextlib
import logging
import os
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime

# Use the cost tables shipped with the pinned litellm: no fetch at import (workers may be offline) and
# costs that do not change under a run. Offline mode also stops litellm fetching tokenizers and catalogs.
os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
os.environ["LITELLM_OFFLINE_MODE"] = "true"

import litellm  # noqa: E402  (must follow the environment above)

litellm.suppress_debug_info = True  # no "Give Feedback / Get Help" banners on stdout for every error
litellm.set_verbose = False
litellm.turn_off_message_logging = True  # prompts and answers never reach litellm's logging callbacks
litellm.success_callback = []
litellm.failure_callback = []
litellm.callbacks = []


class _KeyScrubber(logging.Filter):
    """Removes the keys of calls in flight from litellm's log records: at DEBUG it logs providers' error bodies,
    and some providers quote the key they were given."""

    def __init__(self) -> None:
        super().__init__()
        self._keys: Counter[str] = Counter()
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def scrubbing(self, key: str | None) -> Iterator[None]:
        if not key:
            yield
            return
        with self._lock:
            self._keys[key] += 1
        try:
            yield
        finally:
            with self._lock:
                self._keys[key] -= 1
                if not self._keys[key]:
                    del self._keys[key]

    def filter(self, record: logging.LogRecord) -> bool:
        with self._lock:
            keys = list(self._keys)
        if keys:
            message = record.getMessage()
            scrubbed = _scrub(message, *keys)
            if scrubbed != message:
                record.msg, record.args = scrubbed, None
            if record.exc_info and not record.exc_text:
                record.exc_text = _scrub(logging.Formatter().formatException(record.exc_info), *keys)
        return True


_key_scrubber = _KeyScrubber()
for _name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy"):
    logging.getLogger(_name).addFilter(_key_scrubber)
    if logging.getLogger(_name).level == logging.NOTSET:  # leave a level set by the deployment's LOGGING alone
        logging.getLogger(_name).setLevel(logging.WARNING)

logger = logging.getLogger(__name__)

BACKOFF_BASE = 1.0
BACKOFF_FACTOR = 2.0
BACKOFF_CAP = 60.0
RETRYABLE_STATUS = frozenset({408, 429})  # and every 5xx
# Arguments complete() sets itself; a model's params may not override them.
RESERVED_PARAMS = frozenset({"model", "messages", "api_base", "base_url", "api_key", "timeout", "num_retries", "stream"})


@dataclass(frozen=True)
class ModelCall:
    """How to call one model: a litellm model string, where, with which key, and sampling params."""

    model: str  # e.g. "openai/gpt-4o-mini"
    api_base: str | None = None
    api_key: str | None = field(default=None, repr=False)  # None: litellm reads the provider's key from the environment
    params: Mapping[str, object] = field(default_factory=dict)  # temperature, max_tokens, top_p...
    timeout: float = 300
    max_retries: int = 5

    def __post_init__(self) -> None:
        reserved = RESERVED_PARAMS.intersection(self.params)
        if reserved:
            raise ValueError(f"params may not set {', '.join(sorted(reserved))}")
        if self.max_retries < 0 or self.timeout <= 0:
            raise ValueError("max_retries must be >= 0 and timeout > 0")


@dataclass(frozen=True)
class Completion:
    text: str
    prompt_tokens: int | None
    completion_tokens: int | None
    latency: float  # seconds of the successful attempt
    cost: float | None  # USD from litellm's cost tables; None when the model is not in them
    attempts: int
    model: str  # as the response reports it
    finish_reason: str | None


class ModelCallError(Exception):
    """A model call that failed; `retryable` says whether trying again later may help (the key is never in it)."""

    def __init__(self, message: str, *, retryable: bool, status_code: int | None = None, attempts: int = 1):
        super().__init__(message)
        self.retryable = retryable
        self.status_code = status_code
        self.attempts = attempts


def complete(call: ModelCall, prompt: str, *, sleep: Callable[[float], None] = time.sleep) -> Completion:
    """Send `prompt` as one user message; retry rate limits, 5xx, timeouts and connection errors with backoff."""
    attempt = 0
    while True:
        attempt += 1
        started = time.perf_counter()
        try:
            with _key_scrubber.scrubbing(call.api_key):
                response = litellm.completion(
                    model=call.model,
                    messages=[{"role": "user", "content": prompt}],
                    api_base=call.api_base,
                    api_key=call.api_key,
                    timeout=call.timeout,
                    num_retries=0,  # retries are ours, so they are counted, logged and backed off in one place
                    **call.params,
                )
        except Exception as exc:  # noqa: BLE001  (every failure becomes a ModelCallError without the key)
            latency = time.perf_counter() - started
            status = _status_code(exc)
            reason = _scrub(f"{type(exc).__name__}: {exc}", call.api_key)
            retryable = _retryable(exc, status)
            if not retryable:
                logger.warning("model %s attempt %d failed, not retried: %s", call.model, attempt, reason)
                raise ModelCallError(
                    f"{call.model}: {reason}", retryable=False, status_code=status, attempts=attempt,
                ) from None
            if attempt > call.max_retries:
                logger.warning("model %s attempt %d failed, retries exhausted: %s", call.model, attempt, reason)
                raise ModelCallError(
                    f"{call.model}: gave up after {attempt} attempts: {reason}",
                    retryable=True, status_code=status, attempts=attempt,
                ) from None
            delay = _backoff(attempt, _retry_after(exc))
            logger.info(
                "model %s attempt %d failed after %.2fs (%s); retrying in %.2fs",
                call.model, attempt, latency, reason, delay,
            )
            sleep(delay)
            continue
        latency = time.perf_counter() - started
        logger.debug("model %s attempt %d answered in %.2fs", call.model, attempt, latency)
        return _completion(response, latency=latency, attempts=attempt)


def _completion(response: litellm.ModelResponse, *, latency: float, attempts: int) -> Completion:
    choice = response.choices[0]
    usage = getattr(response, "usage", None)
    return Completion(
        text=choice.message.content or "",
        prompt_tokens=getattr(usage, "prompt_tokens", None),
        completion_tokens=getattr(usage, "completion_tokens", None),
        latency=latency,
        cost=_cost(response),
        attempts=attempts,
        model=response.model or "",
        finish_reason=choice.finish_reason,
    )


def _cost(response: litellm.ModelResponse) -> float | None:
    """Cost from litellm's tables; an unknown model is None, not 0, so sums can tell 'free' from 'unpriced'."""
    try:
        return float(litellm.completion_cost(completion_response=response))
    except Exception as exc:  # noqa: BLE001  (litellm raises several types for a model missing from its tables)
        logger.debug("no cost for model %s: %s", response.model, type(exc).__name__)
        return None


def _status_code(exc: Exception) -> int | None:
    status = getattr(exc, "status_code", None)
    return status if isinstance(status, int) else None


def _retryable(exc: Exception, status: int | None) -> bool:
    if isinstance(exc, (litellm.Timeout, litellm.APIConnectionError, litellm.RateLimitError)):
        return True
    return status is not None and (status in RETRYABLE_STATUS or status >= 500)


def _retry_after(exc: Exception) -> float | None:
    """Seconds the provider asked us to wait (Retry-After or retry-after-ms), if it said."""
    headers = getattr(getattr(exc, "response", None), "headers", None) or getattr(exc, "headers", None)
    if not headers:
        return None
    try:
        if headers.get("retry-after-ms"):
            return float(headers["retry-after-ms"]) / 1000
        value = headers.get("retry-after")
        if not value:
            return None
        try:
            return float(value)
        except ValueError:
            return parsedate_to_datetime(value).timestamp() - time.time()
    except (TypeError, ValueError):
        return None


def _backoff(attempt: int, retry_after: float | None) -> float:
    """Exponential backoff with jitter (half fixed, half random, so delays grow), at least Retry-After, at most the cap."""
    ceiling = min(BACKOFF_CAP, BACKOFF_BASE * BACKOFF_FACTOR ** (attempt - 1))
    delay = ceiling / 2 + random.uniform(0, ceiling / 2)
    if retry_after is not None and retry_after > delay:
        delay = retry_after
    return min(delay, BACKOFF_CAP)


def _scrub(text: str, *secrets: str | None) -> str:
    for secret in secrets:
        if secret:
            text = text.replace(secret, "[redacted]")
    return text
