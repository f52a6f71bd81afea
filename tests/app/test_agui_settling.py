"""A new message's stream joins its thread's live session without reading it again.

The view reads the thread's stored last ``seq`` and whether a dead process left a run
unsettled with the thread's other rows, in its one trip to the database; when nothing
waits to be settled the join reads neither again (``ThreadStream.open``). When something
does, the join settles it first, as a socket's join does, and the new run then starts.
"""

from __future__ import annotations

import uuid

import pytest
from asgiref.sync import sync_to_async

from agent_app.durable.runs import begin_run
from agent_app.models import ChatRun, ChatSession
from tests.app.agui_support import (
    http_fixture,  # noqa: F401 (the ``http`` fixture)
    make_token,
    post_run,
    run_input,
)
from tests.app.asgi_http import SseReader
from tests.app.llm_doubles import say
from zett_agent.testing import ScriptedModel

pytestmark = pytest.mark.django_db(transaction=True)


async def test_a_post_after_a_dead_processs_run_settles_it_then_runs(http, use_model, settings):
    settings.ZETT_RUN_ATTEMPTS = 1  # the dead run is settled, not continued
    use_model(ScriptedModel([say("One."), say("Two.")]))
    _, secret = await make_token("ada")
    thread_id = str(uuid.uuid4())
    first = await SseReader(await post_run(http, secret, run_input(thread_id, "1?"))).rest()
    assert first[-1].type == "RUN_FINISHED"
    await sync_to_async(begin_run)(
        thread_id, "run-of-a-dead-process", content="lost?", worker="dead:1:boot"
    )

    call = await post_run(http, secret, run_input(thread_id, "2?"))
    assert call.status == 200
    events = await SseReader(call).rest()
    assert events[0].type == "RUN_STARTED" and events[-1].type == "RUN_FINISHED"
    text = "".join(e.data["delta"] for e in events if e.type == "TEXT_MESSAGE_CONTENT")
    assert text == "Two."
    dead = await ChatRun.objects.aget(request_id="run-of-a-dead-process")
    assert dead.status == "interrupted"


async def test_back_to_back_posts_show_every_event_after_the_stored_last_seq(http, use_model):
    use_model(ScriptedModel([say("One."), say("Two.")]))
    _, secret = await make_token("ada")
    thread_id = str(uuid.uuid4())
    first = await SseReader(await post_run(http, secret, run_input(thread_id, "1?"))).rest()
    stored = (await ChatSession.objects.aget(pk=thread_id)).last_event_seq
    assert max(e.id for e in first if e.id is not None) == stored

    second = await SseReader(await post_run(http, secret, run_input(thread_id, "2?"))).rest()
    ids = [e.id for e in second if e.id is not None]
    # The second run's events come after the first's, none hidden, none repeated.
    assert ids and min(ids) > stored and ids == sorted(set(ids))
    assert "".join(e.data["delta"] for e in second if e.type == "TEXT_MESSAGE_CONTENT") == "Two."
