"""``daphne`` as the benchmark servers run it: as in production, without click.

The benchmark virtualenv holds the peer frameworks, and one of them (openai-agents, via
mcp and uvicorn) installs click. Autobahn styles the arguments of a debug log line with
click on every frame it sends whenever click can be imported, logged or not: about 9 µs
of server CPU per frame on the benchmark machine. The app's own requirements do not
install click, so a deployed worker never pays that; this entry point turns the styling
off so the servers measured are the ones deployed. Same arguments as ``python -m daphne``.
"""

from __future__ import annotations

import autobahn.util
from daphne.cli import CommandLineInterface

autobahn.util._HAS_CLICK = False  # what autobahn decides itself when click is absent

if __name__ == "__main__":
    CommandLineInterface.entrypoint()
