"""evaluation.llm over real HTTP to a local OpenAI-compatible server: answers, keys, retries, cost, no key leaks."""

from __future__ import annotations

import logging

import pytest

from evaluation.llm import Completion, ModelCall, ModelCallError, complete
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
    settings = {"model": UNKNOWN_MODEL, "api_base": server.base_url, "api_key": KEY, "params": {},
                "timeout": 0.25, "max_retries": 3}
    return ModelCall(**(settings | overrides))


def test_completion_returns_the_answer_tokens_and_latency(server, sleeps):
    result = complete(call_for(server, params={"temperature": 0.2, "max_tokens": 64}), "write f please", sleep=sleeps.append)

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


def test_without_a_model_key_the_provider_key_comes_from_the_environment(server, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "rcb-env-key-42")

    complete(call_for(server, api_key=None), "hello", sleep=lambda s: None)

    assert server.chat_requests[0].headers["Authorization"] == "Bearer rcb-env-key-42"


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


def test_params_may_not_override_the_call_itself():
    with pytest.raises(ValueError, match="api_key"):
        ModelCall(model=KNOWN_MODEL, api_base=None, api_key=None, params={"api_key": "x"})
