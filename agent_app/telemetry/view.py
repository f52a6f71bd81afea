"""``GET /metrics``: the Prometheus text of every worker, for staff and scrapers only.

Who may read it: a signed-in staff user, or a request with ``Authorization: Bearer
<ZETT_METRICS_TOKEN>`` when that setting is set (compared in constant time). Anyone else
gets 401 (no credential: the response names the Bearer scheme) or 403 (a wrong token, or
a user who is not staff). Without prometheus-client installed the URL answers 404.

With ``PROMETHEUS_MULTIPROC_DIR`` set the response sums every worker's samples
(``agent_app.telemetry.metrics``); ``zett_waits_open`` is counted in the database at each
scrape, so whichever worker answers reports the same number.
"""

from __future__ import annotations

import hmac
import os
from pathlib import Path
from typing import Any

from django.db.models import Count
from django.http import Http404, HttpRequest, HttpResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from agent_app import conf
from agent_app.telemetry import metrics

__all__ = ["metrics_view"]


def _authorized(request: HttpRequest) -> int | None:
    """None when the request may read the metrics, else the status to refuse it with."""
    header = request.headers.get("Authorization", "")
    token = str(conf.ZETT_METRICS_TOKEN or "")
    if header:
        scheme, _, given = header.partition(" ")
        if (
            token
            and scheme.lower() == "bearer"
            and hmac.compare_digest(given.strip().encode(), token.encode())
        ):
            return None
        return 403
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated:
        return None if user.is_active and user.is_staff else 403
    return 401


class _OpenWaits:
    """``zett_waits_open{kind}``: open questions and approvals, counted in the database."""

    def collect(self) -> Any:
        from prometheus_client.core import GaugeMetricFamily

        from agent_app.models import ReplyWait, WaitKind, WaitStatus

        family = GaugeMetricFamily(
            "zett_waits_open", "Questions and approvals waiting for a person", labels=["kind"]
        )
        counts = dict.fromkeys(WaitKind.values, 0)
        rows = (
            ReplyWait.objects.filter(status=WaitStatus.OPEN)
            .values_list("kind")
            .order_by()
            .annotate(n=Count("pk"))
        )
        for kind, n in rows:
            counts[kind] = n
        for kind, n in counts.items():
            family.add_metric([kind], n)
        yield family


def _exposition() -> tuple[bytes, str]:
    from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest

    directory = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if directory:
        from prometheus_client import multiprocess

        _forget_dead_workers(directory, multiprocess.mark_process_dead)
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        text = generate_latest(registry)
    else:
        text = generate_latest(REGISTRY)
    waits = CollectorRegistry()
    waits.register(_OpenWaits())
    return text + generate_latest(waits), CONTENT_TYPE_LATEST


def _forget_dead_workers(directory: str, mark_dead: Any) -> None:
    """Drop the live gauges (open sockets, streams) of worker processes that are gone.

    A worker killed outright never says so; its counters and histograms must stay (they
    are part of the sums), but what it had open is not open any more. The directory is
    one host's, so a process id that does not exist here is a dead worker.
    """
    for path in Path(directory).glob("gauge_live*_*.db"):
        pid = path.stem.rpartition("_")[2]
        if not pid.isdigit():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            mark_dead(int(pid), directory)
        except PermissionError:
            pass  # alive, another user's


@never_cache
@require_GET
def metrics_view(request: HttpRequest) -> HttpResponse:
    """The Prometheus text exposition of zett's metrics (see the module docstring)."""
    if not metrics.ENABLED:
        raise Http404("Metrics need prometheus-client")
    refusal = _authorized(request)
    if refusal == 401:
        response = HttpResponse("Authentication required\n", status=401, content_type="text/plain")
        response["WWW-Authenticate"] = 'Bearer realm="zett metrics"'
        return response
    if refusal is not None:
        return HttpResponse("Forbidden\n", status=403, content_type="text/plain")
    body, content_type = _exposition()
    return HttpResponse(body, content_type=content_type)
