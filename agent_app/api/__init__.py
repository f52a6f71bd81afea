"""The HTTP API: AG-UI runs as Server-Sent Events (``agui``, ``stream``) and a small JSON
API for programs (``rest``), with one way to tell who calls (``auth``, ``common``).
Its contract is docs/http-api.md."""
