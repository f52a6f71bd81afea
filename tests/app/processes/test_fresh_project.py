"""A fresh ``startproject`` made production-like from docs/embedding.md alone: two daphne
workers behind a sub-path (``--root-path /shop``) on channels_redis's standard
``RedisChannelLayer``, PostgreSQL, the headers middleware with a CSP, and the health check.

The ASGI module, the ``CHANNEL_LAYERS`` of the core layer and the health check's include
are taken from the documentation's own code blocks; nothing comes from the example site.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import urllib.request
import uuid
from pathlib import Path

import pytest
import websockets

from tests.app.servers import ARTIFACTS, Client, fresh_database, launch_daphne, server_env
from tests.app.services import REDIS_URL, require_service

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

DOC = Path(__file__).resolve().parents[3] / "docs" / "embedding.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
PREFIX = "/shop"
CSP = "default-src 'self'; connect-src 'self' ws: wss:; frame-ancestors 'none'"

ASSISTANTS = """
from agent_app.assistants import Assistant, register


@register
class Support(Assistant):
    id = "support"
    name = "Support"
    instructions = "You help."
"""


def doc_block(marker: str) -> str:
    (block,) = [block for block in BLOCK.findall(DOC.read_text()) if marker in block]
    return block


def make_project(root: Path, database_url: str, redis_url: str) -> None:
    root.mkdir()
    subprocess.run(
        [sys.executable, "-m", "django", "startproject", "mysite", str(root)],
        check=True,
        timeout=120,
    )
    (root / "helpdesk").mkdir()
    (root / "helpdesk" / "__init__.py").write_text("")
    (root / "helpdesk" / "assistants.py").write_text(ASSISTANTS)
    settings = root / "mysite" / "settings.py"
    text = settings.read_text()
    # As embedding.md says: daphne first, channels, agent_app, the app with assistants.py;
    # the headers middleware after SecurityMiddleware.
    text += """
INSTALLED_APPS = ["daphne", *INSTALLED_APPS, "channels", "agent_app", "helpdesk"]
MIDDLEWARE.insert(1, "agent_app.guard.headers.SecurityHeadersMiddleware")
"""
    # embedding.md's core-layer block uses the ZETT_REDIS_URL its pub/sub block sets.
    channel_layers = doc_block("channels_redis.core.RedisChannelLayer")
    text += f"""
import dj_database_url
DATABASES = {{"default": dj_database_url.parse({database_url!r})}}
ASGI_APPLICATION = "mysite.asgi.application"
ZETT_MODEL = "demo"
ZETT_CONTENT_SECURITY_POLICY = {CSP!r}
ZETT_REDIS_URL = {redis_url!r}
{channel_layers}
"""
    settings.write_text(text)
    (root / "mysite" / "asgi.py").write_text(
        doc_block("websocket_application()").replace("myshop", "mysite")
    )
    health = doc_block("agent_app.health_urls").replace("    # …\n", "")
    (root / "mysite" / "urls.py").write_text(
        "from django.contrib import admin\nfrom django.urls import include, path\n\n"
        + health.replace(
            "urlpatterns = [\n",
            'urlpatterns = [\n    path("chat/", include("agent_app.urls")),\n'
            '    path("admin/", admin.site.urls),\n',
        )
    )


def prepare(root: Path, database_url: str, redis_url: str) -> tuple[dict[str, str], str]:
    """Make the project, check and migrate it: its environment and an API token's secret."""
    make_project(root, database_url, redis_url)
    env = {**server_env(database_url), "DJANGO_SETTINGS_MODULE": "mysite.settings"}
    # The project, and zett from this checkout (test_example_shop installs a wheel).
    env["PYTHONPATH"] = os.pathsep.join([str(root), str(DOC.parents[1])])
    for key in ("DATABASE_URL", "REDIS_URL", "ZETT_MODEL", "DJANGO_DEBUG"):
        env.pop(key, None)
    manage = [sys.executable, str(root / "manage.py")]
    checked = subprocess.run(
        [*manage, "check"], cwd=root, env=env, capture_output=True, text=True, timeout=120
    )
    assert checked.returncode == 0, checked.stderr
    subprocess.run([*manage, "migrate", "-v", "0"], cwd=root, env=env, check=True, timeout=300)
    return env, token(root, env)


def token(root: Path, env: dict[str, str]) -> str:
    """A user of the project and an API token of theirs (``zett_token create``)."""
    manage = [sys.executable, str(root / "manage.py")]
    create = "from django.contrib.auth.models import User; User.objects.create_user('ada')"
    subprocess.run([*manage, "shell", "-c", create], cwd=root, env=env, check=True, timeout=120)
    done = subprocess.run(
        [*manage, "zett_token", "create", "ada"],
        cwd=root,
        env=env,
        check=True,
        timeout=120,
        capture_output=True,
        text=True,
    )
    return done.stdout.strip()


def get(url: str) -> tuple[int, dict[str, str], str, str]:
    """``(status, headers, body, the cookies it set as a Cookie header)``."""
    with urllib.request.urlopen(url, timeout=60) as response:
        cookies = "; ".join(
            value.split(";")[0] for value in response.headers.get_all("Set-Cookie") or ()
        )
        return response.status, dict(response.headers), response.read().decode(), cookies


async def socket(port: int, session_id: str, headers: dict[str, str]) -> Client:
    connection = await websockets.connect(
        f"ws://127.0.0.1:{port}{PREFIX}/ws/sessions/{session_id}/", additional_headers=headers
    )
    client = Client(connection)
    client.session_frame = await client.expect("session")
    return client


async def test_two_workers_of_a_fresh_project_behind_a_sub_path(tmp_path):
    import redis

    redis_url = require_service("Redis", REDIS_URL)
    store = redis.Redis.from_url(redis_url)
    store.flushdb()
    root = tmp_path / "project"
    workers = []
    try:
        with fresh_database("postgres", tmp_path) as database_url:
            env, secret = await asyncio.to_thread(prepare, root, database_url, redis_url)
            for name in ("fresh-one", "fresh-two"):
                workers.append(
                    launch_daphne(
                        env,
                        ARTIFACTS / f"{name}.log",
                        "--app",
                        "mysite.asgi:application",
                        "--root-path",
                        PREFIX,
                        name=name,
                    )
                )
            one, two = (f"http://127.0.0.1:{worker.port}" for worker in workers)
            status, _, _, _ = await asyncio.to_thread(get, f"{two}{PREFIX}/healthz")
            assert status == 200

            status, _, body, _ = await asyncio.to_thread(get, f"{one}{PREFIX}/healthz")
            assert status == 200 and json.loads(body) == {
                "status": "ok", "database": True, "redis": True, "accepting": True
            }  # fmt: skip
            session_id = str(uuid.uuid4())
            page_url = f"{one}{PREFIX}/chat/s/{session_id}/"
            status, headers, page, cookie = await asyncio.to_thread(get, page_url)
            assert status == 200 and headers["Content-Security-Policy"] == CSP
            assert f'"socketPath": "{PREFIX}/ws/sessions/{session_id}/"' in page
            assert "sessionid=" in cookie  # the anonymous browser both sockets belong to

            # A browser's socket on one worker, and a program's (a signed-in user, whose
            # socket reads the layer too) on a chat of theirs across both.
            browser = {"Cookie": cookie, "Origin": one}
            await (await socket(workers[0].port, session_id, browser)).close()
            program = {"Authorization": f"Bearer {secret}"}
            first = await socket(workers[0].port, session_id := str(uuid.uuid4()), program)
            second = await socket(workers[1].port, session_id, program)
            await first.send({"type": "user_message", "content": "hello"})

            def done(frame: dict) -> bool:
                return (frame.get("event") or {}).get("type") == "run_completed"

            seen_one = await first.until(done)
            seen_two = await second.until(done)
            numbered = [[f for f in frames if "seq" in f] for frames in (seen_one, seen_two)]
            assert numbered[0] == numbered[1] and numbered[0]
            await first.close()
            await second.close()
    finally:
        for worker in workers:
            worker.stop()
        store.flushdb()
        store.close()
