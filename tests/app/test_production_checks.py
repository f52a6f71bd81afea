"""Checks of a host project's production settings: the channel layer and the headers."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured

from agent_app.checks import raise_on_invalid_settings
from agent_app.production_checks import check_channel_layer, check_security_headers_middleware

CORE = "channels_redis.core.RedisChannelLayer"
PUBSUB = "channels_redis.pubsub.RedisPubSubChannelLayer"


def ids(messages) -> list[str]:
    return [message.id for message in messages]


@pytest.mark.parametrize(
    "hosts",
    [
        ["redis://127.0.0.1:6379/0"],
        [{"address": "redis://127.0.0.1:6379/0"}],
        [{"address": "redis://127.0.0.1:6379/0", "socket_timeout": 5}],
        [{"address": "redis://127.0.0.1:6379/0?socket_timeout=3"}],
        None,  # channels_redis's default host
    ],
)
def test_the_core_layer_without_a_longer_read_timeout_is_an_error(settings, hosts):
    config = {} if hosts is None else {"hosts": hosts}
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": CORE, "CONFIG": config}}
    [error] = check_channel_layer()
    assert error.id == "zett.E060"
    assert "CHANNEL_LAYERS['default']['CONFIG']['hosts'][0]" in error.msg
    assert '"socket_timeout": 15' in error.hint
    # daphne's start runs it too: the worker does not start and fail every socket later.
    with pytest.raises(ImproperlyConfigured, match="socket_timeout"):
        raise_on_invalid_settings()


@pytest.mark.parametrize(
    "hosts",
    [
        [{"address": "redis://127.0.0.1:6379/0", "socket_timeout": 15}],
        [{"address": "redis://127.0.0.1:6379/0", "socket_timeout": None}],
        ["redis://127.0.0.1:6379/0?socket_timeout=10"],
    ],
)
def test_the_core_layer_with_a_longer_read_timeout_passes(settings, hosts):
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": CORE, "CONFIG": {"hosts": hosts}}}
    assert check_channel_layer() == []


def test_the_pubsub_layer_needs_no_read_timeout(settings):
    hosts = ["redis://127.0.0.1:6379/0"]
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": PUBSUB, "CONFIG": {"hosts": hosts}}}
    settings.ZETT_REDIS_URL = "redis://127.0.0.1:6379/0"
    assert check_channel_layer() == []


def test_a_redis_url_with_a_process_local_layer_is_a_warning(settings):
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    settings.ZETT_REDIS_URL = "redis://127.0.0.1:6379/0"
    [warning] = check_channel_layer()
    assert warning.id == "zett.W060" and "InMemoryChannelLayer" in warning.msg
    settings.ZETT_REDIS_URL = None
    assert check_channel_layer() == []


def test_a_policy_without_the_headers_middleware_is_a_warning(settings):
    middleware = "agent_app.guard.headers.SecurityHeadersMiddleware"
    settings.ZETT_CONTENT_SECURITY_POLICY = "default-src 'self'"
    settings.MIDDLEWARE = [m for m in settings.MIDDLEWARE if m != middleware]
    [warning] = check_security_headers_middleware()
    assert warning.id == "zett.W061" and middleware in warning.hint
    settings.MIDDLEWARE = [*settings.MIDDLEWARE, middleware]
    assert check_security_headers_middleware() == []
    settings.ZETT_CONTENT_SECURITY_POLICY = None
    settings.MIDDLEWARE = [m for m in settings.MIDDLEWARE if m != middleware]
    assert check_security_headers_middleware() == []


def test_the_middleware_under_its_earlier_path_is_the_same_and_counts(settings):
    """Host projects name ``agent_app.headers.SecurityHeadersMiddleware`` (it moved into
    ``guard``): the path still imports the middleware, and the check accepts it."""
    from agent_app import headers
    from agent_app.guard import headers as guard_headers

    assert headers.SecurityHeadersMiddleware is guard_headers.SecurityHeadersMiddleware
    middleware = "agent_app.guard.headers.SecurityHeadersMiddleware"
    settings.ZETT_CONTENT_SECURITY_POLICY = "default-src 'self'"
    settings.MIDDLEWARE = [
        *(m for m in settings.MIDDLEWARE if m != middleware),
        "agent_app.headers.SecurityHeadersMiddleware",
    ]
    assert check_security_headers_middleware() == []


@pytest.mark.parametrize("brand", ["", "   ", None, 3])
def test_a_brand_that_is_not_a_name_is_an_error(settings, brand):
    from agent_app.production_checks import check_brand

    settings.ZETT_BRAND = brand
    [error] = check_brand()
    assert error.id == "zett.E061"
    settings.ZETT_BRAND = "MyShop help"
    assert check_brand() == []
