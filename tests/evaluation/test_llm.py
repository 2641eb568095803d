"""evaluation.llm over real HTTP to a local OpenAI-compatible server: answers, keys, retries, cost, no key leaks."""

from __future__ import annotations

import contextlib
import json
import logging
import re

import pytest

from evaluation.llm import OWN_KEY_PROVIDERS, Completion, ModelCall, ModelCallError, complete, params_problems
from tests.evaluation.openai_server import openai_server

KEY = "rcb-model-secret-7f3a9c2e51"
KNOWN_MODEL = "openai/gpt-4o-mini"
UNKNOWN_MODEL = "openai/rcb-test-model-x"


@pytest.fixture
def server():
    with openai_server(responder=lambda prompt, body: "def f():\n    return 42", timeout_seconds=2) as running:
        yield running


@pytest.fixture
def sleeps() -> list[float]:
    return []


def call_for(server, **overrides) -> ModelCall:
    settings = {
        "model": UNKNOWN_MODEL,
        "api_base": server.base_url,
        "api_key": KEY,
        "params": {},
        "timeout": 0.25,
        "max_retries": 3,
        "private_addresses": True,
    }  # the server is on loopback
    return ModelCall(**(settings | overrides))


def test_completion_returns_the_answer_tokens_and_latency(server, sleeps):
    result = complete(
        call_for(server, params={"temperature": 0.2, "max_tokens": 64}), "write f please", sleep=sleeps.append
    )

    assert isinstance(result, Completion)
    assert result.text == "def f():\n    return 42"
    assert (result.prompt_tokens, result.completion_tokens) == (3, 4)
    assert result.latency > 0
    assert result.attempts == 1
    assert result.model == "rcb-test-model-x"
    assert result.finish_reason == "stop"
    assert sleeps == []
    [request] = server.chat_requests
    assert request.prompt == "write f please"
    assert request.body["messages"] == [{"role": "user", "content": "write f please"}]
    assert request.body["temperature"] == 0.2 and request.body["max_tokens"] == 64


def test_the_per_model_key_is_sent_as_bearer_token(server):
    complete(call_for(server), "hello", sleep=lambda s: None)

    assert server.chat_requests[0].headers["Authorization"] == f"Bearer {KEY}"


def test_a_platform_model_without_a_key_uses_the_provider_key_of_the_environment(server, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "rcb-env-key-42")

    complete(call_for(server, api_key=None, platform_key=True), "hello", sleep=lambda s: None)

    assert server.chat_requests[0].headers["Authorization"] == "Bearer rcb-env-key-42"


def test_a_model_without_a_key_that_is_not_the_platforms_is_never_called(server, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "rcb-env-key-42")

    with pytest.raises(ModelCallError, match="no API key of its own") as raised:
        complete(call_for(server, api_key=None), "hello", sleep=lambda s: None)

    assert not raised.value.retryable and server.requests == []


def test_rate_limits_and_server_errors_are_retried_with_growing_backoff(server, sleeps):
    server.failures.extend([429, 500])

    result = complete(call_for(server), "hello", sleep=sleeps.append)

    assert result.attempts == 3
    assert result.text == "def f():\n    return 42"
    assert [r.failure for r in server.chat_requests] == [429, 500, None]
    assert len(sleeps) == 2
    assert 0.5 <= sleeps[0] <= 1 and 1 <= sleeps[1] <= 2
    assert sleeps[1] > sleeps[0]


def test_retry_after_is_honoured():
    with openai_server(failures=[429], retry_after=7) as server:
        sleeps: list[float] = []
        result = complete(call_for(server), "hello", sleep=sleeps.append)

    assert result.attempts == 2
    assert sleeps == [7]


def test_a_dropped_connection_is_retried(server, sleeps):
    server.failures.append("close")

    result = complete(call_for(server), "hello", sleep=sleeps.append)

    assert result.attempts == 2 and len(sleeps) == 1


@pytest.mark.parametrize("status", [400, 401, 404])
def test_client_errors_are_not_retried(server, sleeps, status):
    server.failures.append(status)

    with pytest.raises(ModelCallError) as raised:
        complete(call_for(server), "hello", sleep=sleeps.append)

    assert raised.value.retryable is False
    assert raised.value.status_code == status
    assert raised.value.attempts == 1
    assert len(server.chat_requests) == 1 and sleeps == []


def test_timeouts_are_retried_until_max_retries_then_fail_retryable(server, sleeps):
    server.failures.extend(["timeout"] * 3)

    with pytest.raises(ModelCallError) as raised:
        complete(call_for(server, max_retries=2, timeout=0.2), "hello", sleep=sleeps.append)

    assert raised.value.retryable is True
    assert raised.value.attempts == 3
    assert len(server.chat_requests) == 3
    assert len(sleeps) == 2


def test_cost_of_a_model_in_litellm_tables_is_computed_from_tokens(server):
    import litellm

    result = complete(call_for(server, model=KNOWN_MODEL), "one two three four five", sleep=lambda s: None)

    prices = litellm.model_cost["gpt-4o-mini"]
    expected = 5 * prices["input_cost_per_token"] + 4 * prices["output_cost_per_token"]
    assert isinstance(result.cost, float) and result.cost > 0
    assert result.cost == pytest.approx(expected)


def test_cost_of_a_model_unknown_to_litellm_is_none_not_zero(server):
    result = complete(call_for(server, model=UNKNOWN_MODEL), "hello", sleep=lambda s: None)

    assert result.cost is None


def test_the_key_never_shows_in_repr_errors_or_logs(server, caplog):
    caplog.set_level(logging.DEBUG)
    caplog.set_level(logging.DEBUG, logger="LiteLLM")
    server.failures.extend([500, 401])  # the 401 quotes the key back, as OpenAI does
    call = call_for(server)

    with pytest.raises(ModelCallError) as raised:
        complete(call, "hello", sleep=lambda s: None)

    assert KEY in server.chat_requests[-1].headers["Authorization"]
    assert KEY not in repr(call)
    assert KEY not in str(raised.value) and KEY not in repr(raised.value)
    assert raised.value.__cause__ is None and raised.value.__suppress_context__
    assert "401" in str(raised.value)
    assert caplog.records, "attempts should be logged"
    assert all(KEY not in record.getMessage() for record in caplog.records)
    assert KEY not in caplog.text


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"api_key": "x"}, "params: unknown generation parameter 'api_key'; allowed: temperature, top_p"),
        ({"api_base": "http://127.0.0.1"}, "unknown generation parameter 'api_base'"),
        ({"extra_headers": {"X": "1"}}, "unknown generation parameter 'extra_headers'"),
        ({"temperature": "hot"}, "params.temperature must be a number from 0 to 2 (got 'hot')"),
        ({"max_tokens": 0}, "params.max_tokens must be an integer from 1 to 1000000 (got 0)"),
        ({"stop": ["a"] * 5}, "params.stop must be a string or a list of at most 4 strings"),
        ({"reasoning_effort": "maximal"}, "params.reasoning_effort must be one of none, minimal, low, medium, high"),
    ],
)
def test_only_allowed_generation_params_with_sane_values_are_accepted(params, message):
    assert message in "; ".join(params_problems(params))
    with pytest.raises(ValueError, match=re.escape(message)):
        ModelCall(model=KNOWN_MODEL, api_key=KEY, params=params)


def test_allowed_generation_params_reach_the_provider(server):
    params = {"temperature": 0, "top_p": 0.9, "max_tokens": 50, "seed": 7, "stop": ["END"], "presence_penalty": 0.5}
    assert params_problems(params) == []
    complete(call_for(server, params=params), "hello", sleep=lambda s: None)
    assert {k: server.chat_requests[0].body[k] for k in params} == params


# --- a model's own key and nothing else ---------------------------------------------------------------

# Fake platform credentials of many providers: none may ever reach a model's endpoint.
PLATFORM_SECRETS = {
    "OPENAI_API_KEY": "platform-openai-k1",
    "ANTHROPIC_API_KEY": "platform-anthropic-k2",
    "GEMINI_API_KEY": "platform-gemini-k3",
    "GROQ_API_KEY": "platform-groq-k4",
    "MISTRAL_API_KEY": "platform-mistral-k5",
    "DEEPSEEK_API_KEY": "platform-deepseek-k6",
    "TOGETHERAI_API_KEY": "platform-together-k7",
    "TOGETHER_AI_API_KEY": "platform-together-k8",
    "FIREWORKS_AI_API_KEY": "platform-fireworks-k9",
    "OPENROUTER_API_KEY": "platform-openrouter-k10",
    "XAI_API_KEY": "platform-xai-k11",
    "COHERE_API_KEY": "platform-cohere-k12",
    "PERPLEXITYAI_API_KEY": "platform-perplexity-k13",
    "DEEPINFRA_API_KEY": "platform-deepinfra-k14",
    "CEREBRAS_API_KEY": "platform-cerebras-k15",
    "HOSTED_VLLM_API_KEY": "platform-vllm-k16",
    "NVIDIA_NIM_API_KEY": "platform-nim-k17",
    "SAMBANOVA_API_KEY": "platform-sambanova-k18",
    "MOONSHOT_API_KEY": "platform-moonshot-k19",
    "DASHSCOPE_API_KEY": "platform-dashscope-k20",
    "CODESTRAL_API_KEY": "platform-codestral-k21",
    "AZURE_API_KEY": "platform-azure-k22",
    "AWS_ACCESS_KEY_ID": "platform-aws-k23",
    "AWS_SECRET_ACCESS_KEY": "platform-aws-k24",
    "LITELLM_API_KEY": "platform-litellm-k25",
    "OPENAI_ORGANIZATION": "platform-org-k26",
    "OPENAI_ORG_ID": "platform-org-k27",
    "OPENAI_PROJECT_ID": "platform-project-k28",
}


@pytest.fixture
def platform_secrets(monkeypatch) -> dict[str, str]:
    for name, value in PLATFORM_SECRETS.items():
        monkeypatch.setenv(name, value)
    return PLATFORM_SECRETS


def _everything_sent(server) -> str:
    return "\n".join(f"{r.method} {r.path}\n{r.headers}\n{json.dumps(r.body)}" for r in server.requests)


@pytest.mark.parametrize("provider", sorted(OWN_KEY_PROVIDERS))
def test_each_own_key_provider_sends_the_models_key_and_no_platform_secret(provider, server, platform_secrets):
    call = call_for(server, model=f"{provider}/rcb-test-model", max_retries=0, timeout=5)
    with contextlib.suppress(ModelCallError):  # providers other than OpenAI's format get a 404 from the server
        complete(call, "hello", sleep=lambda s: None)

    assert server.requests, f"{provider}: nothing reached the endpoint"
    sent = _everything_sent(server)
    assert KEY in sent
    assert [name for name, value in platform_secrets.items() if value in sent] == []


@pytest.mark.parametrize(
    "model",
    [
        "bedrock/anthropic.claude-3",
        "vertex_ai/gemini-pro",
        "azure/gpt-4o",
        "sagemaker/endpoint",
        "ollama/llama3",
        "rcb-unknown/model",
    ],
)
def test_providers_that_read_other_credentials_are_refused_for_a_models_own_key(model, server, platform_secrets):
    with pytest.raises(ModelCallError, match="not called: ") as raised:
        complete(call_for(server, model=model), "hello", sleep=lambda s: None)
    assert not raised.value.retryable and server.requests == []


def test_an_api_base_for_which_litellm_would_swap_in_a_platform_key_is_refused(platform_secrets):
    """litellm maps some api_base values to a provider and then prefers that provider's environment key."""
    call = ModelCall(model="gpt-4o", api_base="https://api.groq.com/openai/v1", api_key=KEY)
    with pytest.raises(ModelCallError, match="litellm would send the platform's groq key instead of the model's own"):
        complete(call, "hello", sleep=lambda s: None)


@pytest.mark.parametrize(
    ("api_base", "message"),
    [
        ("http://api.example.org/v1", "api_base must use https:// (got http://)"),
        ("https://user:pw@api.example.org/v1", "api_base must not contain credentials"),
        ("https://api.example.org:99999/v1", "api_base has an invalid port (the model's endpoint host)"),
    ],
)
def test_a_users_api_base_must_be_https_without_credentials(api_base, message):
    with pytest.raises(ModelCallError, match=re.escape(message)):
        complete(ModelCall(model=KNOWN_MODEL, api_base=api_base, api_key=KEY), "hello", sleep=lambda s: None)


def test_a_users_model_never_connects_to_a_loopback_endpoint(server, sleeps):
    for host in ("127.0.0.1", "localhost"):
        api_base = server.base_url.replace("http://127.0.0.1", f"https://{host}")
        with pytest.raises(
            ModelCallError,
            match=r"not called: the model's endpoint host resolves to a loopback address; refused$",
        ) as raised:
            complete(call_for(server, api_base=api_base, private_addresses=False), "hi", sleep=sleeps.append)
        assert not raised.value.retryable and raised.value.attempts == 1
    assert server.requests == [] and sleeps == []


@pytest.mark.parametrize("provider", sorted(OWN_KEY_PROVIDERS))
def test_each_own_key_provider_resolves_under_the_guard(provider, server):
    """Every provider's client resolves the endpoint in the calling thread, where the guard checks it."""
    api_base = server.base_url.replace("http://127.0.0.1", "https://localhost")
    call = call_for(
        server, model=f"{provider}/rcb-test-model", api_base=api_base, private_addresses=False, max_retries=0, timeout=5
    )
    with pytest.raises(ModelCallError, match="not called: the model's endpoint host resolves to a loopback"):
        complete(call, "hello", sleep=lambda s: None)
    assert server.requests == []


def test_a_users_model_without_an_api_base_cannot_reach_a_private_endpoint_of_the_environment(server, monkeypatch):
    """litellm sends a model without api_base to OPENAI_BASE_URL when the platform sets it (an internal proxy)."""
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("OPENAI_API_BASE", server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "platform-key")
    with pytest.raises(ModelCallError, match="not called: the model's endpoint host resolves to a loopback"):
        complete(ModelCall(model="openai/x", api_key=KEY, max_retries=0), "hi", sleep=lambda s: None)
    assert server.requests == []
    complete(
        ModelCall(model="openai/x", platform_key=True, private_addresses=True, max_retries=0),
        "hi",
        sleep=lambda s: None,
    )
    assert [r.headers["Authorization"] for r in server.chat_requests] == [
        "Bearer platform-key"
    ]  # the platform's own model does go there
