"""The agent behind a chat: how it is built, its tools and its human-in-the-loop.

- ``factory``: the agent of a session, built from the settings (the model, the
  extensions);
- ``tools``: the demo tools;
- ``approval``: ``ConfirmationExtension``, a tool that runs only once a person approves;
- ``asking``: the app's ``ask_user`` extension.
"""
