"""The agent behind a chat: how it is built, its tools and its human-in-the-loop.

- ``llm``: which model answers (``ZETT_MODEL`` to an ``AgentModel``);
- ``current``: ``current_user()`` and ``current_chat()`` inside a run;
- ``factory``: the agent of a chat, built from its assistant and the app's extensions;
- ``approval``: ``ConfirmationExtension``, a tool that runs only once a person approves;
- ``asking``: the app's ``ask_user`` extension.
"""
