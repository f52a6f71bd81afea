"""The agent behind a chat: how it is built, its tools and its human-in-the-loop.

- ``factory``: the agent of a chat, built from its assistant and the app's extensions;
- ``approval``: ``ConfirmationExtension``, a tool that runs only once a person approves;
- ``asking``: the app's ``ask_user`` extension.

Which model answers and who is chatting inside a run belong to the assistants
(``agent_app.assistants.llm``, ``agent_app.assistants.current``): an assistant's default
model and its ``enter_run`` need them, and the agent is built from an assistant.
"""
