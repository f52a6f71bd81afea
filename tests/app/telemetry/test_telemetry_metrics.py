"""``GET /metrics``: who may read it, and what a run, a tool call and a wait count.

The counters are process-global (prometheus-client's default registry), so each test
reads the change it caused: a sample before and after.
"""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace

import pytest
from django.test import override_settings
from prometheus_client.parser import text_string_to_metric_families

from tests.app.durable.test_waits import BROWSER, NOTE, leave_a_paused_run
from tests.app.llm_doubles import SteppedModel, call_tool, say
from zett_agent.extensions.external import ExternalEventExpired
from zett_agent.extensions.tracing import tool_outcome
from zett_agent.messages import AssistantMessage, ToolCall
from zett_agent.model import ModelUsage
from zett_agent.testing import ScriptedModel
from zett_agent.tools.base import ToolResult

pytestmark = pytest.mark.django_db(transaction=True)

URL = "/metrics"


def samples(text: str) -> dict[tuple[str, frozenset], float]:
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(text: str, name: str, **labels: str) -> float:
    return samples(text).get((name, frozenset(labels.items())), 0.0)


@pytest.fixture
def staff(django_user_model, client):
    user = django_user_model.objects.create_user("ops", password="pw", is_staff=True)
    client.force_login(user)
    return client


def test_anonymous_visitors_are_refused_with_the_bearer_scheme_named(client):
    response = client.get(URL)
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")


def test_signed_in_users_who_are_not_staff_are_refused(client, django_user_model):
    client.force_login(django_user_model.objects.create_user("someone", password="pw"))
    assert client.get(URL).status_code == 403


def test_staff_users_read_the_prometheus_text(staff):
    response = staff.get(URL)
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    names = {family.name for family in text_string_to_metric_families(response.content.decode())}
    assert {"zett_runs", "zett_tokens", "zett_waits_open", "zett_sockets_open"} <= names


@override_settings(ZETT_METRICS_TOKEN="s3cret-token")
def test_a_scraper_reads_it_with_the_bearer_token_and_a_wrong_token_is_refused(client):
    assert client.get(URL, HTTP_AUTHORIZATION="Bearer s3cret-token").status_code == 200
    assert client.get(URL, HTTP_AUTHORIZATION="Bearer guess").status_code == 403
    assert client.get(URL, HTTP_AUTHORIZATION="Basic czNjcmV0LXRva2Vu").status_code == 403


def test_without_a_configured_token_no_bearer_token_is_accepted(client):
    assert client.get(URL, HTTP_AUTHORIZATION="Bearer ").status_code == 403


def test_only_get_is_served(staff):
    assert staff.post(URL).status_code == 405


async def test_a_run_with_an_approved_tool_counts_tokens_the_run_the_tool_and_the_wait(
    sockets, use_model, async_client, django_user_model
):
    from asgiref.sync import sync_to_async

    user = await sync_to_async(django_user_model.objects.create_user)(
        "ops", password="pw", is_staff=True
    )
    await sync_to_async(async_client.force_login)(user)

    async def scrape() -> str:
        response = await async_client.get(URL)
        assert response.status_code == 200
        return response.content.decode()

    before = await scrape()
    use_model(
        ScriptedModel(
            [call_tool("save_note", "note-1", title="Milk", text="Buy milk"), say("Saved.")],
            usage=ModelUsage(input_tokens=7, output_tokens=3),
        )
    )
    socket = await sockets()
    await socket.send({"type": "user_message", "content": "Note: buy milk"})
    await socket.until_event("custom", "approval_requested")
    during = await scrape()
    assert value(during, "zett_waits_open", kind="approval") == 1
    assert value(during, "zett_sockets_open") == value(before, "zett_sockets_open") + 1
    payload = {"tool_call_id": "note-1", "approved": True}
    await socket.send({"type": "external_event", "name": "approval_response", "payload": payload})
    await socket.expect("external_event_result")
    await socket.run_to_completion()
    await socket.close()
    after = await scrape()

    def grew(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    model = "ScriptedModel"
    assert grew("zett_tokens_total", assistant="demo", model=model, kind="input") == 14
    assert grew("zett_tokens_total", assistant="demo", model=model, kind="output") == 6
    assert grew("zett_runs_total", assistant="demo", outcome="completed") == 1
    assert grew("zett_run_duration_seconds_count", assistant="demo", outcome="completed") == 1
    assert grew("zett_time_to_first_token_seconds_count", assistant="demo") == 1
    assert grew("zett_tool_calls_total", assistant="demo", tool="save_note", outcome="completed")
    assert grew("zett_waits_total", kind="approval", outcome="approved") == 1
    assert grew("zett_wait_duration_seconds_count", kind="approval", outcome="approved") == 1
    assert value(after, "zett_waits_open", kind="approval") == 0
    assert value(after, "zett_sockets_open") == value(before, "zett_sockets_open")
    for key in samples(after):
        assert not {"user", "chat", "session", "session_id", "request_id"} & {
            label for label, _ in key[1]
        }


async def test_a_refused_frame_counts_as_a_rate_limit_refusal(sockets, use_model):
    from agent_app.telemetry import metrics

    refusals = metrics.RATE_LIMITED.labels("frames")
    before = refusals._value.get()
    use_model(ScriptedModel([say("Hello.")]))
    with override_settings(ZETT_WS_RATE_LIMIT={"burst": 1, "per_second": 0.001}):
        socket = await sockets()
        await socket.send({"type": "cancel"})
        await socket.expect_error("not_running")  # the one frame of the budget
        await socket.send({"type": "cancel"})
        await socket.expect_error("rate_limited")
    assert refusals._value.get() == before + 1


def test_an_sse_stream_is_counted_open_while_its_body_runs_even_when_it_fails():
    from agent_app.telemetry import metrics

    before = metrics.SSE_STREAMS._value.get()
    with pytest.raises(ConnectionResetError), metrics.sse_stream():
        assert metrics.SSE_STREAMS._value.get() == before + 1
        raise ConnectionResetError
    assert metrics.SSE_STREAMS._value.get() == before


def counted(counter, *labels: str) -> float:
    metric = counter.labels(*labels) if labels else counter
    return metric._value.get()


async def test_a_late_page_counts_the_frames_replayed_to_it(sockets, use_model):
    from agent_app.telemetry import metrics

    model = use_model(SteppedModel(["a ", "b ", "c ", "d "]))
    first = await sockets()
    await first.send({"type": "user_message", "content": "Count"})
    model.step(2)
    seen = await first.until(lambda frame: (frame.get("event") or {}).get("delta") == "b ")
    before = counted(metrics.REPLAYED)
    late = await sockets(first.session_id)
    replayed = await late.until(lambda frame: frame.get("seq") == seen[-1]["seq"])
    assert counted(metrics.REPLAYED) - before == len([f for f in replayed if "seq" in f])
    model.finish()
    await first.run_to_completion()
    await late.run_to_completion()


async def test_settling_a_dead_workers_run_counts_a_takeover_and_its_expired_wait(
    sockets, use_model
):
    from agent_app.models import ReplyWait
    from agent_app.telemetry import metrics

    use_model(ScriptedModel())
    takeovers = counted(metrics.TAKEOVERS)
    expired = counted(metrics.WAITS, "approval", "expired")
    session_id, _ = await leave_a_paused_run([NOTE], {"note-1": "approval"})
    await ReplyWait.objects.aupdate(expires_at="2020-01-01T00:00:00Z")
    socket = await sockets(session_id, cookie=BROWSER["cookie"])
    assert [run["status"] for run in socket.session_frame["runs"]] == ["expired"]
    assert counted(metrics.TAKEOVERS) == takeovers + 1
    assert counted(metrics.WAITS, "approval", "expired") == expired + 1


EXPIRED_AT = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("result", "error", "outcome"),
    [
        (ToolResult("saved"), None, "completed"),
        (
            ToolResult("no", success=False, attributes={"reply": {"approved": False}}),
            None,
            "denied",
        ),
        (
            ToolResult("late", success=False, attributes={"reply": {"expired": True}}),
            None,
            "expired",
        ),
        (
            ToolResult("late", success=False),
            ExternalEventExpired("late", correlation_id="c1", expires_at=EXPIRED_AT),
            "expired",
        ),
        (ToolResult("boom", success=False), RuntimeError("boom"), "failed"),
    ],
)
async def test_a_tool_call_counts_under_the_outcome_its_span_has(result, error, outcome):
    from agent_app.telemetry import metrics

    extension = metrics.MetricsExtension("outcomes")
    before = counted(metrics.TOOL_CALLS, "outcomes", "save_note", outcome)
    context = SimpleNamespace(tools={"save_note": object()})
    await extension.after_tool(context, ToolCall("c1", "save_note", {}), result, error)
    assert counted(metrics.TOOL_CALLS, "outcomes", "save_note", outcome) == before + 1
    assert tool_outcome(result, error) == outcome


async def test_a_model_inventing_a_thousand_tool_names_adds_at_most_one_series(
    sockets, use_model, async_client, django_user_model
):
    """Tool names, message text and ids come from the model or the person: none of them
    may become a label value (each would be a new series, without limit)."""
    from asgiref.sync import sync_to_async

    user = await sync_to_async(django_user_model.objects.create_user)(
        "ops", password="pw", is_staff=True
    )
    await sync_to_async(async_client.force_login)(user)

    async def scrape() -> set[tuple[str, frozenset]]:
        response = await async_client.get(URL)
        assert response.status_code == 200
        return set(samples(response.content.decode()))

    invented = [f"hallucinated_tool_{index:04x}" for index in range(1000)]
    calls = tuple(ToolCall(f"call-{index}", name, {}) for index, name in enumerate(invented))
    use_model(ScriptedModel([AssistantMessage(tool_calls=calls), say("Done.")]))
    from agent_app.telemetry import metrics

    others = counted(metrics.TOOL_CALLS, "demo", "other", "failed")
    before = await scrape()
    socket = await sockets()
    secret = "user-42-secret-name"
    await socket.send({"type": "user_message", "content": secret})
    await socket.run_to_completion()
    await socket.close()
    added = {key for key in await scrape() - before if key[0] == "zett_tool_calls_total"}
    assert added <= {
        (
            "zett_tool_calls_total",
            frozenset({("assistant", "demo"), ("tool", "other"), ("outcome", "failed")}),
        )
    }
    assert counted(metrics.TOOL_CALLS, "demo", "other", "failed") == others + 1000
    values = {value for _, labels in await scrape() for _, value in labels}
    assert not {secret, *invented, socket.session_id} & values
