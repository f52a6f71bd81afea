"""The kit in plain Django test classes: async test methods of ``TestCase`` and
``TransactionTestCase`` chat through ``ChatClient``; ``override_assistant`` decorates the
class. (The assistants are registered by the folder's conftest, as a project's are at
start-up.)"""

from __future__ import annotations

from django.contrib.auth.models import User
from django.test import TestCase, TransactionTestCase

from agent_app.testing import ChatClient, ScriptModel, call, override_assistant, text
from tests.app.kit.assistants import DONE

MODEL = ScriptModel(lambda messages, tools: text(" ".join(sorted(t.name for t in tools))))


@override_assistant("kit-desk", model=MODEL)
class InATransactionTestCase(TransactionTestCase):
    async def test_a_chat_with_the_overridden_assistant(self):
        async with ChatClient(assistant="kit-desk") as chat:
            await chat.send("Hello")
        self.assertEqual(chat.answer_text, "ask_user refund stock whoami")


class InATestCase(TestCase):
    @classmethod
    def setUpTestData(cls):
        cls.alice = User.objects.create_user("alice")

    async def test_a_refund_approved_in_a_test_case(self):
        DONE.clear()
        model = ScriptModel([call("refund", order=3), text("Refunded.")])
        with override_assistant("kit-desk", model=model):
            async with ChatClient(user=self.alice, assistant="kit-desk") as chat:
                await chat.send("Refund 3")
                self.assertEqual(chat.pending[0]["tool"], "refund")
                await chat.approve()
        self.assertEqual(chat.answer_text, "Refunded.")
        self.assertEqual(DONE, ["refund 3 for alice"])
