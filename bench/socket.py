"""The WebSocket path through real daphne on 127.0.0.1, against a bare Channels consumer.

    python -m bench.socket            # full run, a few minutes
    python -m bench.socket --smoke    # a few frames of everything, no targets judged

Every server is ``daphne`` in a subprocess on a free loopback port (``bench.serve``); the
client (``bench.socket_client``, on ``websockets``) runs in another subprocess, so neither
end shares a core's event loop with the other. The zett site is served with
``ZETT_MODEL=bench.zett_model:socket_model`` (a zero-latency model), the per-person limits
lifted, and, for one worker, a throw-away SQLite database; a client GETs ``/`` for its
browser's ``sessionid`` cookie first. The bare server (``bench.bare_channels``) replays, for
each user message, the frames the site sent for the same message (``run_started``
included), recorded at the start of the run.

Measured:
(a) agent events per second and server CPU per agent event through our consumer, 1 and 100
    connections, against the bare consumer sending the same frames (repetitions alternate
    the two servers); and the cost model: CPU per event (from runs of two lengths) and per
    run, whatever its length (from one-delta runs, less their few events);
(b) an ``external_event`` reply until the tool runs: in process through the runtime
    (``emit_external_event`` to the tool's first line) and over the socket (reply frame
    sent until the ``tool_started`` frame arrives);
(c) server RSS per idle connection and per paused session (above an idle connection) with
    1,000 connections, each server fresh for it;
(d) two workers on PostgreSQL + Redis, the measured socket on the worker that does not run
    the run: events per second, and (b) through the other worker.

Everything started here is stopped in ``finally`` (terminate, then kill), and every wait
has a deadline.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):
    # Run as a file, this very file would shadow the standard library's ``socket``.
    _BENCH = Path(__file__).resolve().parent
    sys.path[:] = [entry for entry in sys.path if Path(entry or ".").resolve() != _BENCH]
    sys.path.insert(0, str(_BENCH.parent))

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from bench.machine import describe_machine, package_versions
from bench.serve import (
    DEFAULT_POSTGRES,
    DEFAULT_REDIS,
    REPO,
    Server,
    browser_cookie,
    flushed_redis,
    load_average,
    migrate,
    postgres_database,
    scratch_dir,
    site_env,
)
from bench.socket_report import judge, render

BARE_APP = "bench.bare_channels:application"
DISTRIBUTIONS = ["daphne", "channels", "channels-redis", "redis", "Django", "Twisted"]
DISTRIBUTIONS += ["autobahn", "websockets", "psycopg"]
PARTS = ("throughput", "reply", "memory", "cluster")


@dataclass(frozen=True, slots=True)
class Plan:
    """How much of each measurement to do."""

    deltas: int
    requests_one: int
    connections_many: int
    requests_many: int
    repetitions: int
    reply_samples: int
    held_connections: int
    cluster_connections_many: int
    cluster_requests_many: int
    #: The cost model's long runs (per-event cost, against ``deltas``): deltas and runs.
    long_deltas: int
    long_requests: int
    #: The cost model's short runs (per-run cost): deltas and runs.
    short_deltas: int
    short_requests: int


FULL = Plan(
    deltas=500,
    requests_one=40,
    connections_many=100,
    requests_many=2,
    repetitions=5,
    reply_samples=1000,
    held_connections=1000,
    cluster_connections_many=50,
    cluster_requests_many=2,
    long_deltas=2000,
    long_requests=10,
    short_deltas=1,
    short_requests=200,
)
SMOKE = Plan(
    deltas=20,
    requests_one=2,
    connections_many=5,
    requests_many=1,
    repetitions=1,
    reply_samples=20,
    held_connections=20,
    cluster_connections_many=3,
    cluster_requests_many=1,
    long_deltas=40,
    long_requests=1,
    short_deltas=1,
    short_requests=3,
)


def run_client(base: str, scenario: str, timeout: float, **options: object) -> list[dict]:
    """Run one client scenario to its end; return the JSON lines it printed."""
    command = [sys.executable, "-m", "bench.socket_client", scenario, "--base", base]
    for key, value in options.items():
        if value is None or value is False:
            continue
        flag = "--" + key.replace("_", "-")
        command += [flag] if value is True else [flag, str(value)]
    done = subprocess.run(
        command,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"client {scenario} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]


def load() -> str:
    return "/".join(f"{value:.1f}" for value in load_average())


class HoldClient:
    """The ``hold`` scenario, driven stage by stage so the server can be weighed between."""

    def __init__(
        self, base: str, connections: int, idle_only: bool, timeout: float, cookie: str | None
    ) -> None:
        command = [sys.executable, "-m", "bench.socket_client", "hold", "--base", base]
        command += ["--connections", str(connections), "--wait", str(timeout)]
        if cookie:
            command += ["--cookie", cookie]
        if idle_only:
            command.append("--idle-only")
        self.timeout = timeout
        self.process = subprocess.Popen(
            command,
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def stage(self, expected: str) -> dict:
        """Read the next stage line (the client prints it once the stage is reached)."""
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            self.process.wait(timeout=self.timeout)
            assert self.process.stderr is not None
            raise RuntimeError(
                f"hold client ended before {expected}:\n{self.process.stderr.read()[-3000:]}"
            )
        frame = json.loads(line)
        if frame.get("stage") != expected:
            raise RuntimeError(f"hold client: expected stage {expected}, got {frame}")
        return frame

    def go(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write("go\n")
        self.process.stdin.flush()

    def close(self) -> None:
        """Let a finished client exit on its own; kill one that is still holding sockets."""
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)


def settle(server: Server, window: float = 0.2, limit: float = 5.0) -> int:
    """The server's RSS once it has stopped changing for ``window`` seconds.

    The client reports a stage when its last frame arrived, but the server may still be
    finishing work behind that frame (saving messages, closing sockets). Another process's
    memory offers nothing to await, so it is sampled until it holds still.
    """
    deadline = time.monotonic() + limit
    last = server.rss
    while time.monotonic() < deadline:
        time.sleep(window)
        current = server.rss
        if current == last:
            break
        last = current
    return last


@contextlib.contextmanager
def hold_client(
    base: str, connections: int, idle_only: bool, timeout: float, cookie: str | None
) -> Iterator[HoldClient]:
    client = HoldClient(base, connections, idle_only, timeout, cookie)
    try:
        yield client
    finally:
        client.close()


def weigh_connections(server: Server, plan: Plan, idle_only: bool, timeout: float) -> dict:
    """(c): RSS growth for ``held_connections`` idle sockets, then with a paused session each."""
    cookie = None if idle_only else browser_cookie(server.port)
    # Warm the server's code paths so the baseline holds the code, not the sessions.
    warm = 10
    with hold_client(server.base, warm, idle_only, timeout, cookie) as client:
        client.stage("idle")
        client.go()
        if not idle_only:
            client.stage("paused")
            client.go()
            client.stage("released")
        client.stage("closed")
    baseline = settle(server)
    count = plan.held_connections
    result: dict = {"connections": count}
    with hold_client(server.base, count, idle_only, timeout, cookie) as client:
        client.stage("idle")
        idle = settle(server)
        result["idle_per_connection"] = (idle - baseline) / count
        client.go()
        if not idle_only:
            client.stage("paused")
            paused = settle(server)
            result["paused_per_session"] = (paused - idle) / count
            client.go()
            result["released"] = client.stage("released")["completed"]
        client.stage("closed")
    return result


def measure_throughput(site: Server, bare: Server, plan: Plan, timeout: float) -> list[dict]:
    """(a): events/s and server CPU per event, 1 and many connections, alternating servers."""
    rows = []
    shapes = [(1, plan.requests_one), (plan.connections_many, plan.requests_many)]
    labels = ("zett consumer", "bare consumer")
    for connections, requests in shapes:
        samples: dict[str, list[float]] = {label: [] for label in labels}
        cpu_us: dict[str, list[float]] = {label: [] for label in labels}
        client_cpu: dict[str, list[float]] = {label: [] for label in labels}
        loads: list[str] = []
        for repetition in range(plan.repetitions):
            order = [("zett consumer", site), ("bare consumer", bare)]
            if repetition % 2:
                order.reverse()
            for label, server in order:
                cookie = browser_cookie(server.port) if server is site else None
                (line,) = run_client(
                    server.base,
                    "throughput",
                    timeout,
                    connections=connections,
                    requests=requests,
                    deltas=plan.deltas,
                    wait=30,
                    cookie=cookie,
                    server_pids=server.pid,
                )
                samples[label].append(line["events_per_second"])
                cpu_us[label].append(line["server_cpu_us_per_event"])
                client_cpu[label].append(line["client_cpu_share"])
                loads.append(load())
                print(
                    f"  (a) {connections:>3} conn, {label}: {line['events_per_second']:,.0f} "
                    f"events/s, server CPU {line['server_cpu_us_per_event']:.1f} µs/event "
                    f"({line['events']:,} events, client CPU {line['client_cpu_share']:.0%}, "
                    f"load {loads[-1]})",
                    flush=True,
                )
        pairs = zip(samples["zett consumer"], samples["bare consumer"], strict=True)
        cpu_pairs = zip(cpu_us["zett consumer"], cpu_us["bare consumer"], strict=True)
        rows.append(
            {
                "connections": connections,
                "zett_events_per_second": samples["zett consumer"],
                "bare_events_per_second": samples["bare consumer"],
                "ratios": [ours / bare for ours, bare in pairs],
                "zett_cpu_us_per_event": cpu_us["zett consumer"],
                "bare_cpu_us_per_event": cpu_us["bare consumer"],
                "cpu_ratios": [ours / bare for ours, bare in cpu_pairs],
                "client_cpu_share": client_cpu,
                "load": loads,
            }
        )
    return rows


def record_frames(site: Server, plan: Plan, path: Path, timeout: float) -> int:
    """Record the site's frames for ``stream <deltas>`` and the cost model's other runs."""
    cookie = browser_cookie(site.port)
    recordings = {}
    for deltas in (plan.deltas, plan.long_deltas, plan.short_deltas):
        (line,) = run_client(site.base, "record", timeout, deltas=deltas, wait=30, cookie=cookie)
        recordings[f"stream {deltas}"] = line["frames"]
    path.write_text(json.dumps(recordings))
    return len(recordings[f"stream {plan.deltas}"])


def measure_cost_model(
    site: Server, bare: Server, plan: Plan, timeout: float, floor: Server | None = None
) -> dict:
    """Server CPU per run and per event: 1 connection, runs of three lengths, both servers.

    CPU per run = fixed + per_event x events. The per-event term is the slope between the
    ``deltas`` runs and the ``long_deltas`` ones: what each run costs whatever its length
    (storing it, starting it) then stops hiding the frame path. The fixed term is what a
    one-delta run (``short_deltas``: six frames) costs less its events at that slope.

    Not the intercept of the two long lengths' line: a frame does not cost the same in a
    500-delta run as in a 2,000-delta one (how frames batch into writes and reads moves
    with the length), and that line put the bare consumer's fixed cost at several times
    the whole CPU of its one-delta run; a run of a few frames measures it directly, and
    with a twentieth of the spread.

    ``floor``, the bare consumer storing each run as the site must (``BENCH_STORE``), is
    measured alike when given: what the run's two transactions and their hops cost alone.
    """
    found: dict[str, dict[str, list[float]]] = {}
    for repetition in range(plan.repetitions):
        order = [("zett consumer", site), ("bare consumer", bare)]
        if floor is not None:
            order.append(("durable floor", floor))
        if repetition % 2:
            order.reverse()
        for label, server in order:
            per_run = []
            for deltas, requests in (
                (plan.short_deltas, plan.short_requests),
                (plan.deltas, plan.requests_one),
                (plan.long_deltas, plan.long_requests),
            ):
                (line,) = run_client(
                    server.base,
                    "throughput",
                    timeout,
                    connections=1,
                    requests=requests,
                    deltas=deltas,
                    wait=30,
                    cookie=browser_cookie(server.port) if server is site else None,
                    server_pids=server.pid,
                )
                per_run.append((line["server_cpu_seconds"] / requests, line["events"] / requests))
            (short_cpu, short_events), (mid_cpu, mid_events), (long_cpu, long_events) = per_run
            per_event = (long_cpu - mid_cpu) / (long_events - mid_events)
            fixed = short_cpu - per_event * short_events
            row = found.setdefault(
                label, {"per_event_us": [], "per_run_ms": [], "short_run_ms": [], "load": []}
            )
            row["per_event_us"].append(per_event * 1e6)
            row["per_run_ms"].append(fixed * 1e3)
            row["short_run_ms"].append(short_cpu * 1e3)
            row["load"].append(load())
            print(
                f"  (a) cost model, {label}: {per_event * 1e6:.1f} µs per event + "
                f"{fixed * 1e3:.2f} ms per run (load {load()})",
                flush=True,
            )
    site_rows, bare_rows = found["zett consumer"], found["bare consumer"]
    pairs = zip(site_rows["per_event_us"], bare_rows["per_event_us"], strict=True)
    found["per_event_ratios"] = [ours / bare for ours, bare in pairs]  # type: ignore[assignment]
    return found


def measure_reply(server: Server, plan: Plan, timeout: float, **options: object) -> dict:
    cookie = browser_cookie(server.port)
    lines = run_client(
        server.base,
        "reply",
        timeout,
        samples=plan.reply_samples,
        wait=30,
        cookie=cookie,
        all_samples=True,
        **options,
    )
    result = {line["until"]: line for line in lines}
    result["load"] = load()
    return result


def measure_cluster(plan: Plan, timeout: float, workdir: Path, postgres: str, redis: str) -> dict:
    """(d): two workers on PostgreSQL + Redis; the measured socket is not on the run's worker."""
    result: dict = {}
    with postgres_database(postgres) as database_url, flushed_redis(redis) as redis_url:
        env = site_env(database_url, redis_url=redis_url)
        migrate(env)
        with Server(env, workdir, "worker-a") as one, Server(env, workdir, "worker-b") as two:
            pids = f"{one.pid},{two.pid}"
            rows = []
            shapes = [
                (1, plan.requests_one),
                (plan.cluster_connections_many, plan.cluster_requests_many),
            ]
            for connections, requests in shapes:
                events: list[float] = []
                cpu: list[float] = []
                loads: list[str] = []
                for _ in range(plan.repetitions):
                    (line,) = run_client(
                        one.base,
                        "throughput",
                        timeout,
                        follow_base=two.base,
                        connections=connections,
                        requests=requests,
                        deltas=plan.deltas,
                        wait=30,
                        cookie=browser_cookie(one.port),
                        server_pids=pids,
                    )
                    events.append(line["events_per_second"])
                    cpu.append(line["server_cpu_us_per_event"])
                    loads.append(load())
                    print(
                        f"  (d) {connections:>3} sessions over 2 workers: "
                        f"{line['events_per_second']:,.0f} events/s at the other worker, "
                        f"both servers' CPU {line['server_cpu_us_per_event']:.1f} µs/event "
                        f"(client CPU {line['client_cpu_share']:.0%}, load {loads[-1]})",
                        flush=True,
                    )
                rows.append(
                    {
                        "connections": connections,
                        "events_per_second": events,
                        "cpu_us_per_event": cpu,
                        "load": loads,
                    }
                )
            result["throughput"] = rows
            print(f"  (d) reply on the run's worker: {plan.reply_samples} replies", flush=True)
            result["reply_same_worker"] = measure_reply(one, plan, timeout)
            print(f"  (d) reply through the other worker: {plan.reply_samples}", flush=True)
            result["reply_cross_worker"] = measure_reply(one, plan, timeout, follow_base=two.base)
            result["log_problems"] = one.log_problems() + two.log_problems()
    return result


def run(plan: Plan, timeout: float, parts: set[str], postgres: str, redis: str) -> dict:
    from bench.external_wait import measure_reply_latency

    results: dict = {
        "machine": describe_machine(),
        "versions": package_versions(DISTRIBUTIONS),
        "plan": asdict(plan),
        "load_at_start": load(),
    }
    if "reply" in parts:
        print(f"(b) in process: {plan.reply_samples} replies through emit_external_event")
        latency = asyncio.run(measure_reply_latency(plan.reply_samples))
        results["reply_in_process"] = {
            "samples": latency.samples,
            "p50_ms": latency.p50_us / 1000,
            "p99_ms": latency.p99_us / 1000,
            "max_ms": latency.max_us / 1000,
        }
    with tempfile.TemporaryDirectory(prefix="zett-bench-", dir=scratch_dir()) as tmp:
        workdir = Path(tmp)
        env = site_env(f"sqlite:///{workdir / 'bench.sqlite3'}")
        migrate(env)
        frames_path = workdir / "frames.json"
        bare_env = {**env, "BENCH_FRAMES": str(frames_path)}
        if parts & {"throughput", "reply", "memory"}:
            with Server(env, workdir, "site") as site:
                count = record_frames(site, plan, frames_path, timeout)
                print(f"recorded {count} frames for 'stream {plan.deltas}'", flush=True)
                if "throughput" in parts:
                    floor_env = {**bare_env, "BENCH_STORE": str(workdir / "floor.sqlite3")}
                    with (
                        Server(bare_env, workdir, "bare", app=BARE_APP) as bare,
                        Server(floor_env, workdir, "floor", app=BARE_APP) as floor,
                    ):
                        results["throughput"] = measure_throughput(site, bare, plan, timeout)
                        results["cost_model"] = measure_cost_model(site, bare, plan, timeout, floor)
                if "reply" in parts:
                    print(f"(b) over the socket: {plan.reply_samples} replies", flush=True)
                    results["reply_socket"] = measure_reply(site, plan, timeout)
        if "memory" in parts:
            print(f"(c) {plan.held_connections} connections held", flush=True)
            with Server(env, workdir, "site-held") as site:
                results["held_site"] = weigh_connections(site, plan, False, timeout=60)
            with Server(bare_env, workdir, "bare-held", app=BARE_APP) as bare:
                results["held_bare"] = weigh_connections(bare, plan, True, timeout=60)
        if "cluster" in parts:
            print("(d) two workers on PostgreSQL and Redis", flush=True)
            results["cluster"] = measure_cluster(plan, timeout, workdir, postgres, redis)
    results["load_at_end"] = load()
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="a few frames of everything, for CI")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per client run")
    parser.add_argument(
        "--parts", default=",".join(PARTS), help=f"comma-separated subset of {','.join(PARTS)}"
    )
    parser.add_argument("--postgres", default=DEFAULT_POSTGRES, help="server for (d)")
    parser.add_argument("--redis", default=DEFAULT_REDIS, help="Redis database for (d)")
    parser.add_argument(
        "--server-cpus",
        metavar="CPUS",
        help="pin every server's threads to these CPUs (e.g. 0), to see what thread wake-ups "
        "across cores cost; run the bench itself under taskset on the others",
    )
    args = parser.parse_args(argv)
    if args.server_cpus:
        os.environ["ZETT_BENCH_SERVER_CPUS"] = args.server_cpus
    parts = {part.strip() for part in args.parts.split(",") if part.strip()}
    if parts - set(PARTS):
        parser.error(f"unknown parts: {sorted(parts - set(PARTS))}")
    plan = SMOKE if args.smoke else FULL
    started = time.perf_counter()
    results = run(plan, args.timeout, parts, args.postgres, args.redis)
    machine = results["machine"]
    print()
    print(f"Machine: {machine['cpu']}, {machine['cores']} cores, Python {machine['python']}")
    print("Versions: " + ", ".join(f"{k} {v}" for k, v in results["versions"].items()))
    print(
        f"Load average (1/5/15 min): {results['load_at_start']} at the start, "
        f"{results['load_at_end']} at the end"
    )
    print()
    print(render(results))
    results["targets"] = judge(results)
    if not args.smoke:
        print()
        print("\n".join(results["targets"]))
    problems = results.get("cluster", {}).get("log_problems")
    if problems:
        print("\nserver log problems:\n" + "\n".join(problems[:20]))
    print(f"\nTotal time: {time.perf_counter() - started:.0f} s")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
