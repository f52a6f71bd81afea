"""AG-UI, the agent-user interaction wire protocol, spoken over zett's runs.

Pure protocol code, no Django: the HTTP views sit on it.

- ``agent_app.agui.encoder`` — zett's outgoing frames (the ones every socket of a chat
  receives) as AG-UI events, with the SSE ``id:`` of each and re-attachment after a ``seq``;
- ``agent_app.agui.interrupts`` — questions and approvals as AG-UI interrupts, and
  ``resume`` entries back into the replies a socket would send;
- ``agent_app.agui.run_input`` — an AG-UI ``RunAgentInput`` validated into what a run needs;
- ``agent_app.agui.sse`` — Server-Sent Events framing;
- ``agent_app.agui.capabilities`` — the capabilities document;
- ``agent_app.agui.errors`` — the error codes, and ``AguiError``.

The mapping is the contract of ``docs/http-api.md``.
"""
