"""Short chat titles: the rule (``agent_app.durable.titles``), and a new chat named by it on every
socket (``run_started``'s ``title``), never over a title a person gave."""

from __future__ import annotations

import pytest

from agent_app.durable.titles import AUTO_TITLE_LENGTH, short_title
from agent_app.models import ChatSession
from tests.app.llm_doubles import say
from zett_agent.testing import ScriptedModel


@pytest.mark.parametrize(
    ("message", "title"),
    [
        ("What time is it in Tokyo? I fly there tomorrow.", "What time is it in Tokyo"),
        ("  hello  ", "hello"),
        ("Explain monads.\nI know Haskell a bit.", "Explain monads"),
        ("## Plan a trip\n\n- Lisbon\n- Porto", "Plan a trip"),
        (
            "Write a short story about a lighthouse keeper, a storm and a lost dog",
            "Write a short story about a lighthouse keeper",
        ),
        (
            "Please summarise the attached quarterly report for the board meeting next week",
            "Please summarise the attached quarterly report",
        ),
        ("Is 3.5 more than 3.14?", "Is 3.5 more than 3.14"),
        ("e.g. ...", "e.g"),
        ("???", "???"),
        ("https://example.com/" + "a" * 80, ("https://example.com/" + "a" * 80)[:48]),
        ("", ""),
        ([{"type": "text", "text": "Describe this photo, please"}], "Describe this photo, please"),
    ],
)
def test_the_rule_keeps_the_first_sentence_or_clause_short_and_unpunctuated(message, title):
    made = short_title(message)
    assert made == title
    assert len(made) <= AUTO_TITLE_LENGTH


@pytest.mark.django_db(transaction=True)
async def test_a_new_chat_is_named_on_every_socket_and_keeps_a_persons_title(sockets, use_model):
    use_model(ScriptedModel([say("It is 9 in Tokyo."), say("Sure.")]))
    first = await sockets()
    other = await sockets(first.session_id)
    await first.send({"type": "user_message", "content": "What time is it in Tokyo? Quick."})
    started = await first.expect("run_started")
    assert started["title"] == "What time is it in Tokyo"
    assert (await other.expect("run_started"))["title"] == "What time is it in Tokyo"
    await first.run_to_completion()
    await other.run_to_completion()
    session = await ChatSession.objects.aget(pk=first.session_id)
    assert session.title == "What time is it in Tokyo"

    await ChatSession.objects.filter(pk=session.pk).aupdate(title="Japan trip")
    await first.send({"type": "user_message", "content": "And in Osaka?"})
    assert (await first.expect("run_started"))["title"] == "Japan trip"
    await first.run_to_completion()
    assert (await ChatSession.objects.aget(pk=session.pk)).title == "Japan trip"
    await first.close()
    again = await sockets(first.session_id)
    assert again.session_frame["title"] == "Japan trip"
