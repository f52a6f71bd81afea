"""The Python client docs/protocol.md shows ("Programs"), run as written against a real
daphne server with an API token: what the documentation promises works."""

from __future__ import annotations

import re
import subprocess
import sys

from tests.app.servers import ROOT, DaphneProcess, fresh_database, migrate, server_env

ISSUE_TOKEN = (
    "from django.contrib.auth.models import User; from agent_app.guard.tokens import issue; "
    "print(issue(User.objects.create_user('robot'), name='docs')[1])"
)


def _documented_client() -> str:
    text = (ROOT / "docs" / "protocol.md").read_text()
    programs = text[text.index("## Programs") :]
    (code,) = re.findall(r"```python\n(.*?)```", programs, re.S)[:1]
    assert len(code.splitlines()) <= 40, "the documented client stays short"
    return code


def test_the_documented_client_asks_and_prints_the_answer(tmp_path):
    (tmp_path / "client.py").write_text(_documented_client())
    with fresh_database("sqlite", tmp_path) as url:
        env = server_env(url, ZETT_MODEL="demo", ZETT_DEMO_PACE="0")
        migrate(env)
        issued = subprocess.run(
            [sys.executable, "manage.py", "shell", "-c", ISSUE_TOKEN],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        )
        token = issued.stdout.strip().splitlines()[-1]
        server = DaphneProcess("docs-client", env, migrate=False).start()
        try:
            asked = subprocess.run(
                [
                    sys.executable,
                    "-c",
                    "import asyncio, sys, client; "
                    "asyncio.run(client.ask(sys.argv[1], sys.argv[2], 'what is 17 * 23?'))",
                    f"ws://127.0.0.1:{server.port}",
                    token,
                ],
                cwd=tmp_path,
                capture_output=True,
                text=True,
                timeout=120,
            )
        finally:
            server.stop()
    assert asked.returncode == 0, asked.stderr
    assert "391" in asked.stdout
