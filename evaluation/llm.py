"""The one place the platform calls models: a litellm completion with retries, token, latency and cost accounting.

Whose key pays, and where a call may go, is decided here for every call. A call with a key of its own
(`ModelCall.api_key`) sends that key and nothing else: its provider must be one whose only credential is that
key (OWN_KEY_PROVIDERS; litellm reads AWS, Google or Azure credentials from the environment for others), and
litellm's own key resolution is asked first, since for some api_base values it replaces the given key by a
provider key of the environment. A call without a key of its own uses the platform's provider keys from the
environment and must say so (`platform_key=True`: maintainers' models). Unless told otherwise
(`private_addresses=True`, maintainers' models and local servers in tests), every connection of the call goes
to public addresses only, checked at the resolution it connects with (common.addresses).
"""

from __future__ import annotations

import contextlib
import functools
import ipaddress
import logging
import os
import random
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from common.addresses import Refusals, public_connections_only

# Use the cost tables shipped with the pinned litellm: no fetch at import (workers may be offline) and
# costs that do not change under a run. Offline mode also stops litellm fetching tokenizers and catalogs.
os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
os.environ["LITELLM_OFFLINE_MODE"] = "true"

if TYPE_CHECKING:
    import litellm

_ACCOUNT_VARIABLES = ("OPENAI_ORGANIZATION", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID", "OPENAI_PROJECT")
_platform_organization: str | None = None


def _account_ids_hide() -> None:
    """OpenAI's client sends the environment's organization and project with whatever key it has, to whatever
    api_base: keep them out of the environment; the platform's own calls get the organization back."""
    global _platform_organization
    for name in _ACCOUNT_VARIABLES:
        value = os.environ.pop(name, None)
        if value and "ORG" in name:
            _platform_organization = value


_account_ids_hide()


@functools.cache
def _litellm():
    """litellm, imported and set up on first use: its import takes seconds (up to 15 on a busy two-core machine),
    which every `manage.py` command, the web server and the worker paid at start though few of them call a model."""
    import litellm  # noqa: PLC0415  (must follow the environment above; lazy, see the docstring)

    litellm.suppress_debug_info = True  # no "Give Feedback / Get Help" banners on stdout for every error
    litellm.set_verbose = False
    litellm.turn_off_message_logging = True  # prompts and answers never reach litellm's logging callbacks
    litellm.success_callback = []
    litellm.failure_callback = []
    litellm.callbacks = []
    return litellm


def litellm_load() -> None:
    """Import litellm now, in a web process's start (config/wsgi.py): registering a model checks its provider with
    litellm, and the first such request would otherwise wait for the import (over 30 s seen on a busy machine)."""
    _litellm()


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
REQUEST_TOO_LARGE = 413

# Providers whose one credential is the API key litellm is given (sent as a header): a model's own key can
# stand alone there. Others (bedrock, vertex_ai, azure, sagemaker, watsonx, ...) also read credentials of the
# environment, so only the platform's own models use them.
OWN_KEY_PROVIDERS = frozenset(
    {
        "openai",
        "text-completion-openai",
        "anthropic",
        "gemini",
        "mistral",
        "codestral",
        "groq",
        "deepseek",
        "together_ai",
        "fireworks_ai",
        "openrouter",
        "xai",
        "cohere",
        "cohere_chat",
        "perplexity",
        "deepinfra",
        "cerebras",
        "hosted_vllm",
        "nvidia_nim",
        "sambanova",
        "moonshot",
        "dashscope",
    }
)
REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high")


def _number(low: float, high: float) -> Callable[[object], bool]:
    return lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and low <= v <= high


def _integer(low: int, high: int) -> Callable[[object], bool]:
    return lambda v: isinstance(v, int) and not isinstance(v, bool) and low <= v <= high


def _stop(value: object) -> bool:
    if isinstance(value, str):
        return 0 < len(value) <= 100
    return (
        isinstance(value, list) and 0 < len(value) <= 4 and all(isinstance(v, str) and 0 < len(v) <= 100 for v in value)
    )


# The generation parameters a model or run may set, each with what it accepts; anything else is refused.
GENERATION_PARAMS: dict[str, tuple[Callable[[object], bool], str]] = {
    "temperature": (_number(0, 2), "a number from 0 to 2"),
    "top_p": (_number(0, 1), "a number from 0 to 1"),
    "top_k": (_integer(1, 1000), "an integer from 1 to 1000"),
    "max_tokens": (_integer(1, 1_000_000), "an integer from 1 to 1000000"),
    "max_completion_tokens": (_integer(1, 1_000_000), "an integer from 1 to 1000000"),
    "seed": (_integer(-(2**63), 2**63 - 1), "an integer"),
    "stop": (_stop, "a string or a list of at most 4 strings (each 1 to 100 characters)"),
    "presence_penalty": (_number(-2, 2), "a number from -2 to 2"),
    "frequency_penalty": (_number(-2, 2), "a number from -2 to 2"),
    "reasoning_effort": (lambda v: v in REASONING_EFFORTS, f"one of {', '.join(REASONING_EFFORTS)}"),
}


def params_problems(params: object, *, where: str = "params") -> list[str]:
    """What is wrong with a set of generation parameters, one message per parameter (empty: none)."""
    if not isinstance(params, Mapping):
        return [f'{where} must be an object of generation parameters, e.g. {{"temperature": 0}}']
    problems = []
    for name, value in params.items():
        if name not in GENERATION_PARAMS:
            problems.append(f"{where}: unknown generation parameter {name!r}; allowed: {', '.join(GENERATION_PARAMS)}")
        elif not GENERATION_PARAMS[name][0](value):
            problems.append(f"{where}.{name} must be {GENERATION_PARAMS[name][1]} (got {value!r})")
    return problems


def _provider(model: str, api_base: str | None, api_key: str | None) -> tuple[str, str | None] | None:
    """The provider litellm places `model` with and the key it would use, or None when it cannot place it."""
    try:
        _, provider, resolved_key, _ = _litellm().get_llm_provider(model=model, api_base=api_base, api_key=api_key)
    except Exception:  # noqa: BLE001  (litellm raises several types for a model string it cannot place)
        return None
    return provider, resolved_key


def provider_problem(*, model: str, api_base: str | None) -> str | None:
    """Why litellm cannot place `model` with a provider, or None."""
    if _provider(model, api_base, None) is None:
        return f"litellm does not know the provider of {model!r}; write it as provider/model, e.g. openai/gpt-4o-mini"
    return None


def own_key_problem(*, model: str, api_base: str | None, api_key: str) -> str | None:
    """Why litellm could send something other than `api_key` for this model and api_base, or None.

    Reads the environment as litellm will: run it where the call happens.
    """
    placed = _provider(model, api_base, api_key)
    if placed is None:
        return provider_problem(model=model, api_base=api_base)
    provider, resolved_key = placed
    if provider not in OWN_KEY_PROVIDERS:
        return (
            f"provider {provider!r} takes credentials from the platform's environment besides a key; a model "
            f"with its own key must use one of {', '.join(sorted(OWN_KEY_PROVIDERS))}"
        )
    if resolved_key not in (None, api_key):
        return (
            f"for api_base {api_base} litellm would send the platform's {provider} key instead of the model's "
            f"own; name the provider in the model string (e.g. {provider}/...)"
        )
    return None


def api_base_problem(api_base: str) -> str | None:
    """Why an api_base cannot be a user's endpoint (https, a host, no credentials in it), or None."""
    parts = urlsplit(api_base)
    if parts.scheme != "https":
        return f"api_base must use https:// (got {parts.scheme or 'no scheme'}://)"
    if not parts.hostname:
        return "api_base has no host"
    try:
        parts.port  # noqa: B018  (raises for a port out of range)
    except ValueError:
        return f"api_base has an invalid port ({parts.netloc})"
    if parts.username is not None or parts.password is not None:
        return "api_base must not contain credentials (user:password@); the key goes in api_key"
    return None


@dataclass(frozen=True)
class ModelCall:
    """How to call one model: a litellm model string, where, with which key, and sampling params."""

    model: str  # e.g. "openai/gpt-4o-mini"
    api_base: str | None = None
    api_key: str | None = field(default=None, repr=False)  # the model's own key: the only one sent
    params: Mapping[str, object] = field(default_factory=dict)  # GENERATION_PARAMS only
    timeout: float = 300
    max_retries: int = 5
    platform_key: bool = False  # without api_key, litellm may use the platform's provider keys (maintainers only)
    private_addresses: bool = False  # may connect to loopback and private addresses (maintainers only)
    exempt_hosts: tuple[str, ...] = ()  # hosts exempt from the public-address rule (MODEL_API_ALLOWED_HOSTS)

    def __post_init__(self) -> None:
        if problems := params_problems(self.params):
            raise ValueError("; ".join(problems))
        if self.max_retries < 0 or self.timeout <= 0:
            raise ValueError("max_retries must be >= 0 and timeout > 0")

    def refusal(self) -> str | None:
        """Why this call may not be made at all, or None: checked before any connection."""
        if not self.api_key:
            if self.platform_key:
                return None
            return "the model has no API key of its own, and only maintainers' models use the platform's keys"
        if self.api_base and not self.private_addresses and (problem := api_base_problem(self.api_base)):
            return problem
        return own_key_problem(model=self.model, api_base=self.api_base, api_key=self.api_key)

    def connections(self) -> contextlib.AbstractContextManager[Refusals]:
        """Where the call may connect: anywhere for maintainers' models, else public addresses only."""
        if self.private_addresses:
            return contextlib.nullcontext(Refusals())
        return public_connections_only(what="model endpoint host", allowed_hosts=self.exempt_hosts)


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

    def __init__(
        self,
        message: str,
        *,
        retryable: bool,
        status_code: int | None = None,
        attempts: int = 1,
        deadline_passed: bool = False,
        request_caused: bool = False,
        timed_out: bool = False,
        first_prompt_answered: bool = False,
    ):
        super().__init__(message)
        self.retryable = retryable
        # The request itself was refused (`request_caused`), not the provider failing: the same messages fail again.
        self.request_caused = request_caused
        self.deadline_passed = deadline_passed  # gave up because the caller's deadline came (converse's `deadline`)
        self.status_code = status_code
        self.attempts = attempts
        self.timed_out = timed_out  # every attempt timed out (agents.policies tells a slow conversation from an outage)
        # The provider answered the item's first prompt alone after this call failed (agents.policies)
        self.first_prompt_answered = first_prompt_answered


def complete(call: ModelCall, prompt: str, *, sleep: Callable[[float], None] = time.sleep) -> Completion:
    """Send `prompt` as one user message; retry rate limits, 5xx, timeouts and connection errors with backoff."""
    response, latency, attempts = _response(call, [{"role": "user", "content": prompt}], sleep=sleep)
    return _completion(response, latency=latency, attempts=attempts)


@dataclass(frozen=True)
class ToolTurn:
    """One turn of a conversation with tools: the assistant's message as it goes back into the history, and usage."""

    message: dict  # {"role": "assistant", "content": ..., "tool_calls": [{id, type, function: {name, arguments}}]}
    prompt_tokens: int | None
    completion_tokens: int | None
    latency: float
    cost: float | None
    attempts: int


def tools_supported(*, model: str, api_base: str | None) -> bool:
    """Whether the model can call tools: litellm's tables say so, or it is an OpenAI-compatible server of its own
    (an `openai/` model at an api_base, whose tables litellm does not have)."""
    if api_base and model.startswith(("openai/", "hosted_vllm/")):
        return True
    try:
        return bool(_litellm().supports_function_calling(model=model))
    except Exception:  # noqa: BLE001  (litellm raises for a model missing from its tables)
        return False


def converse(
    call: ModelCall,
    messages: list[dict],
    *,
    tools: list[dict],
    timeout: float | None = None,
    deadline: float | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> ToolTurn:
    """One turn of a conversation with tools (litellm tool calling), with the retries and accounting of `complete`;
    with a deadline (time.monotonic), no attempt runs and no back-off sleeps past it."""
    response, latency, attempts = _response(
        call,
        messages,
        sleep=sleep,
        tools=tools,
        deadline=deadline,
        timeout=min(call.timeout, timeout) if timeout else call.timeout,
    )
    message = response.choices[0].message
    usage = getattr(response, "usage", None)
    calls = [
        {
            "id": c.id,
            "type": "function",
            "function": {"name": c.function.name, "arguments": c.function.arguments or "{}"},
        }
        for c in (getattr(message, "tool_calls", None) or [])
    ]
    return ToolTurn(
        message={"role": "assistant", "content": message.content or "", **({"tool_calls": calls} if calls else {})},
        prompt_tokens=getattr(usage, "prompt_tokens", None),
        completion_tokens=getattr(usage, "completion_tokens", None),
        latency=latency,
        cost=_cost(response),
        attempts=attempts,
    )


ENDPOINT_SAID = "the model's endpoint"
# An IPv4 or IPv6 literal (with an IPv6 zone), perhaps ending a sentence; `_address_said` checks it is one.
_ADDRESS_RE = re.compile(
    r"(?<![\w.:])(?:\d{1,3}(?:\.\d{1,3}){3}|[0-9a-f]*:[0-9a-f:.]*:[0-9a-f.]*(?:%\w+)?)(?!\w|\.\w)", re.I
)


def endpoint_hidden(text: str, *, api_base: str | None) -> str:
    """A failed call's error without the endpoint it was made at: the api_base, its host and any address (what a
    host resolved to) become words. The error is stored as the item's outcome, the run's pause reason and an agent's
    transcript, shown to anyone who may see the run, while an owner's endpoint is its owner's and maintainers' to see
    (benchmarks.visibility.endpoint_visible). What failed and how (a refused kind of address, an HTTP status, a
    timeout) stays."""
    # The connection guard's own words first ("model endpoint host HOST", common.addresses; without an api_base,
    # a host of the platform's environment), then any address (an IP literal host's too), then the host elsewhere.
    text = re.sub(r"model endpoint host \S+(?= (?:is|resolves) )", f"{ENDPOINT_SAID} host", text)
    if api_base:
        # The api_base, with its closing "/" unless a path follows (a request's URL: "the model's endpoint/chat/").
        text = re.sub(rf"{re.escape(api_base.rstrip('/'))}(?:/(?![\w%.~-]))?", ENDPOINT_SAID, text)
    text = _ADDRESS_RE.sub(_address_said, text).replace(" address (an address)", " address")
    if host := api_base and urlsplit(api_base).hostname:
        named = rf"(?<![\w.-])\[?{re.escape(host)}\]?(?::\d+)?(?![\w-])"
        text = re.sub(named, f"{ENDPOINT_SAID} host", text, flags=re.I)
    return text


def _address_said(match: re.Match) -> str:
    found = match.group()
    address = found.rstrip(".")
    try:
        ipaddress.ip_address(address.split("%")[0])
    except ValueError:
        return found
    return "an address" + found[len(address) :]


def _response(
    call: ModelCall,
    messages: list[dict],
    *,
    sleep: Callable[[float], None],
    timeout: float | None = None,
    deadline: float | None = None,
    **extra,
) -> tuple[litellm.ModelResponse, float, int]:
    """The model's response to `messages`, its latency and the attempts it took (ModelCallError when none, its text
    without the endpoint: `endpoint_hidden`)."""
    try:
        return _response_attempts(call, messages, sleep=sleep, timeout=timeout, deadline=deadline, **extra)
    except ModelCallError as exc:
        exc.args = (endpoint_hidden(str(exc), api_base=call.api_base),)
        raise


def _response_attempts(
    call: ModelCall,
    messages: list[dict],
    *,
    sleep: Callable[[float], None],
    timeout: float | None = None,
    deadline: float | None = None,
    **extra,
) -> tuple[litellm.ModelResponse, float, int]:
    _account_ids_hide()
    if refusal := call.refusal():
        raise ModelCallError(f"{call.model}: not called: {refusal}", retryable=False, attempts=0)
    attempt = 0
    timeouts = 0
    while True:
        attempt += 1
        attempt_timeout = timeout or call.timeout
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ModelCallError(
                    f"{call.model}: not called: its deadline has passed",
                    retryable=False,
                    attempts=attempt - 1,
                    deadline_passed=True,
                )
            attempt_timeout = min(attempt_timeout, left)
        started = time.perf_counter()
        refusals = Refusals()
        try:
            with _key_scrubber.scrubbing(call.api_key), call.connections() as refusals:
                response = _litellm().completion(
                    model=call.model,
                    messages=messages,
                    api_base=call.api_base,
                    api_key=call.api_key,
                    timeout=attempt_timeout,
                    num_retries=0,  # retries are ours, so they are counted, logged and backed off in one place
                    **(
                        {"organization": _platform_organization} if call.platform_key and _platform_organization else {}
                    ),
                    **call.params,
                    **extra,
                )
        except Exception as exc:  # noqa: BLE001  (every failure becomes a ModelCallError without the key)
            latency = time.perf_counter() - started
            if refusals.refused:
                logger.warning("model %s attempt %d refused: %s", call.model, attempt, refusals.refused)
                raise ModelCallError(
                    f"{call.model}: not called: {refusals.refused}", retryable=False, attempts=attempt
                ) from None
            status = _status_code(exc)
            reason = _scrub(f"{type(exc).__name__}: {exc}", call.api_key)
            retryable = _retryable(exc, status)
            timeouts += isinstance(exc, _litellm().Timeout)
            if not retryable:
                logger.warning("model %s attempt %d failed, not retried: %s", call.model, attempt, reason)
                raise ModelCallError(
                    f"{call.model}: {reason}",
                    retryable=False,
                    status_code=status,
                    attempts=attempt,
                    request_caused=caused_by_request(exc, status),
                ) from None
            if attempt > call.max_retries:
                logger.warning("model %s attempt %d failed, retries exhausted: %s", call.model, attempt, reason)
                raise ModelCallError(
                    f"{call.model}: gave up after {attempt} attempts: {reason}",
                    retryable=True,
                    status_code=status,
                    attempts=attempt,
                    timed_out=timeouts == attempt,
                ) from None
            delay = _backoff(attempt, _retry_after(exc))
            if deadline is not None and time.monotonic() + delay >= deadline:
                logger.warning(
                    "model %s attempt %d failed, no retry before the deadline: %s", call.model, attempt, reason
                )
                raise ModelCallError(
                    f"{call.model}: gave up after {attempt} attempts (the next, in {delay:.1f} s, would pass the "
                    f"deadline): {reason}",
                    retryable=True,
                    status_code=status,
                    attempts=attempt,
                    deadline_passed=True,
                ) from None
            logger.info(
                "model %s attempt %d failed after %.2fs (%s); retrying in %.2fs",
                call.model,
                attempt,
                latency,
                reason,
                delay,
            )
            sleep(delay)
            continue
        latency = time.perf_counter() - started
        logger.debug("model %s attempt %d answered in %.2fs", call.model, attempt, latency)
        return response, latency, attempt


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
        return float(_litellm().completion_cost(completion_response=response))
    except Exception as exc:  # noqa: BLE001  (litellm raises several types for a model missing from its tables)
        logger.debug("no cost for model %s: %s", response.model, type(exc).__name__)
        return None


def _status_code(exc: Exception) -> int | None:
    status = getattr(exc, "status_code", None)
    return status if isinstance(status, int) else None


def _retryable(exc: Exception, status: int | None) -> bool:
    litellm = _litellm()
    if isinstance(exc, (litellm.Timeout, litellm.APIConnectionError, litellm.RateLimitError)):
        return True
    return status is not None and (status in RETRYABLE_STATUS or status >= 500)


def caused_by_request(exc: Exception, status: int | None) -> bool:
    """Whether the provider refused the request for what it holds, not for its own failure: its messages exceed the
    model's context window (litellm's ContextWindowExceededError, from OpenAI's `context_length_exceeded` and each
    provider's wording), its body exceeds the provider's size limit (HTTP 413), or its content breaks the provider's
    policy. An agent's conversation holds what its turns and tool calls added, so such a refusal is the agent's doing
    (agents.loop.turn_take); an outage (connection, timeout, rate limit, 5xx) or a refused key is not."""
    litellm = _litellm()
    refused = (litellm.ContextWindowExceededError, litellm.ContentPolicyViolationError)
    return isinstance(exc, refused) or status == REQUEST_TOO_LARGE


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
    """Exponential backoff with jitter (half fixed, half random, so delays grow), at least Retry-After, at most the
    cap."""
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
