"""The shared retry policy and the helpers every adapter uses."""

from __future__ import annotations

import email.utils
import time

import pytest

from zett_agent.providers.base import (
    ProviderAuthError,
    ProviderError,
    ProviderResponseError,
    RetryPolicy,
    is_retryable_status,
    parse_retry_after,
    parse_tool_arguments,
    status_error,
)


def test_backoff_doubles_from_the_initial_delay_up_to_the_cap() -> None:
    policy = RetryPolicy(max_retries=5, initial_delay=0.5, max_delay=2.0, jitter=0.0)

    assert [policy.delay(retry) for retry in range(5)] == [0.5, 1.0, 2.0, 2.0, 2.0]


def test_jitter_removes_a_random_share_of_the_backoff() -> None:
    policy = RetryPolicy(initial_delay=1.0, jitter=0.25, random=lambda: 0.5)

    assert policy.delay(0) == 0.875


def test_no_delay_is_offered_once_the_retries_are_spent() -> None:
    policy = RetryPolicy(max_retries=2)

    assert policy.delay(2) is None
    assert RetryPolicy(max_retries=0).delay(0, retry_after=0.0) is None


def test_a_retry_after_replaces_the_backoff_unless_it_is_too_long() -> None:
    policy = RetryPolicy(max_retry_after=60.0)

    assert policy.delay(0, retry_after=12.0) == 12.0
    assert policy.delay(0, retry_after=61.0) is None


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("max_retries", -1, "max_retries must be >= 0, got -1"),
        ("initial_delay", -0.5, "initial_delay must be >= 0, got -0.5"),
        ("jitter", 1.5, "jitter must be between 0 and 1, got 1.5"),
    ],
)
def test_an_invalid_policy_is_rejected_with_the_rule_and_the_value(
    field: str, value: float, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        RetryPolicy(**{field: value})


@pytest.mark.parametrize(
    ("status", "retryable"),
    [(408, True), (409, True), (429, True), (500, True), (529, True), (400, False), (404, False)],
)
def test_timeouts_conflicts_rate_limits_and_server_errors_are_retryable(
    status: int, retryable: bool
) -> None:
    assert is_retryable_status(status) is retryable


def test_retry_after_is_read_in_milliseconds_seconds_or_as_a_date() -> None:
    in_a_minute = email.utils.formatdate(time.time() + 60, usegmt=True)

    assert parse_retry_after({"retry-after-ms": "1500", "Retry-After": "9"}) == 1.5
    assert parse_retry_after({"Retry-After": "3"}) == 3.0
    assert 0 < parse_retry_after({"Retry-After": in_a_minute}) <= 60
    assert parse_retry_after({"Retry-After": "soon"}) is None
    assert parse_retry_after({}) is None


def test_auth_statuses_become_auth_errors_naming_the_variable() -> None:
    for status in (401, 403):
        error = status_error(
            provider="openai", label="OpenAI", status=status, detail="no", key_variable="KEY_VAR"
        )
        assert isinstance(error, ProviderAuthError)
        assert "Set KEY_VAR" in str(error)
        assert not error.retryable


def test_other_statuses_keep_their_status_and_retry_after() -> None:
    error = status_error(
        provider="openai",
        label="OpenAI",
        status=503,
        detail="busy",
        key_variable="KEY_VAR",
        retry_after=2.0,
    )

    assert type(error) is ProviderError
    assert (error.status_code, error.retryable, error.retry_after) == (503, True, 2.0)
    assert str(error) == "OpenAI request failed (HTTP 503): busy"


def test_tool_arguments_must_be_a_json_object() -> None:
    assert parse_tool_arguments("", provider="p", name="t", call_id="c") == {}
    assert parse_tool_arguments('{"a": 1}', provider="p", name="t", call_id="c") == {"a": 1}
    with pytest.raises(ProviderResponseError, match=r"not a JSON object: '\[1, 2\]'"):
        parse_tool_arguments("[1, 2]", provider="p", name="t", call_id="c")
    with pytest.raises(ProviderResponseError, match="malformed JSON arguments for tool call 't'"):
        parse_tool_arguments('{"a": ', provider="p", name="t", call_id="c")
