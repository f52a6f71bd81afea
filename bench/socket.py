"""The WebSocket path through real daphne on 127.0.0.1, against a bare Channels consumer.

    python -m bench.socket            # full run, a few minutes
    python -m bench.socket --smoke    # a few frames of everything, no targets judged

Every server is ``daphne`` in a subprocess on a free loopback port; the client
(``bench.socket_client``, on ``websockets``) runs in another subprocess, so neither end
shares a core's event loop with the other. The zett site is served with
``ZETT_MODEL=bench.zett_model:socket_model`` (a zero-latency model), a throw-away SQLite
database and the per-socket rate limit lifted; the bare server
(``bench.bare_channels``) replays, for each user message, the frames the site sent for the
same message, recorded at the start of the run.

Measured:
(a) agent events per second through our consumer, 1 and 100 connections, against the bare
    consumer sending the same frames; repetitions alternate the two servers;
(b) an ``external_event`` reply until the tool runs: in process through the runtime
    (``emit_external_event`` to the tool's first line) and over the socket (reply frame
    sent until the ``tool_started`` frame arrives);
(c) server RSS per idle connection and per paused session (above an idle connection) with
    1,000 connections, each server fresh for it.

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
import socket
import statistics
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass

from bench.machine import describe_machine, package_versions

REPO = Path(__file__).resolve().parent.parent
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
SITE_APP = "zett_site.asgi:application"
BARE_APP = "bench.bare_channels:application"
DISTRIBUTIONS = ["daphne", "channels", "Django", "Twisted", "autobahn", "websockets"]
TARGET_THROUGHPUT = 0.80  # our consumer >= 80 % of the bare consumer's events/s
TARGET_REPLY_IN_PROCESS_MS = 1.0
TARGET_REPLY_SOCKET_MS = 5.0
TARGET_PAUSED_KB = 50.0


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


FULL = Plan(
    deltas=500,
    requests_one=20,
    connections_many=100,
    requests_many=2,
    repetitions=3,
    reply_samples=1000,
    held_connections=1000,
)
SMOKE = Plan(
    deltas=20,
    requests_one=2,
    connections_many=5,
    requests_many=1,
    repetitions=1,
    reply_samples=20,
    held_connections=20,
)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def rss_of(pid: int) -> int:
    with open(f"/proc/{pid}/statm") as statm:
        return int(statm.read().split()[1]) * PAGE_SIZE


def base_env(workdir: Path) -> dict[str, str]:
    """Environment of every subprocess: the site's settings for a benchmark server."""
    env = {key: value for key, value in os.environ.items() if key != "REDIS_URL"}
    env.update(
        PYTHONPATH=str(REPO),
        DJANGO_SETTINGS_MODULE="zett_site.settings",
        DJANGO_SECRET_KEY="bench-only-" + os.urandom(16).hex(),
        DJANGO_DEBUG="0",
        DJANGO_ALLOWED_HOSTS="127.0.0.1,localhost",
        DATABASE_URL=f"sqlite:///{workdir / 'bench.sqlite3'}",
        ZETT_MODEL="bench.zett_model:socket_model",
        ZETT_WS_RATE_BURST="1000000000",
        ZETT_WS_RATE_PER_SECOND="1000000000",
    )
    return env


class Server:
    """``daphne`` serving one ASGI app on a free loopback port, stopped on exit."""

    def __init__(self, app: str, env: dict[str, str], workdir: Path, label: str) -> None:
        self.app = app
        self.env = env
        self.port = free_port()
        self.log_path = workdir / f"{label}-{self.port}.log"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def base(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    @property
    def rss(self) -> int:
        assert self.process is not None
        return rss_of(self.process.pid)

    def __enter__(self) -> Server:
        command = [
            sys.executable,
            "-m",
            "daphne",
            "-b",
            "127.0.0.1",
            "-p",
            str(self.port),
            "-v",
            "0",
            self.app,
        ]
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                command, cwd=REPO, env=self.env, stdout=log, stderr=subprocess.STDOUT
            )
        try:
            self._wait_until_listening(deadline=time.monotonic() + 30)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _wait_until_listening(self, deadline: float) -> None:
        assert self.process is not None
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"daphne exited early:\n{self.log_tail()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.05)  # a port of another process offers no event to await
        raise RuntimeError(f"daphne did not listen within 30 s:\n{self.log_tail()}")

    def log_tail(self) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-30:])
        except OSError:
            return "(no log)"

    def __exit__(self, *exc_info: object) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def run_client(base: str, scenario: str, timeout: float, **options: object) -> list[dict]:
    """Run one client scenario to its end; return the JSON lines it printed."""
    command = [sys.executable, "-m", "bench.socket_client", scenario, "--base", base]
    for key, value in options.items():
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


class HoldClient:
    """The ``hold`` scenario, driven stage by stage so the server can be weighed between."""

    def __init__(self, base: str, connections: int, idle_only: bool, timeout: float) -> None:
        command = [
            sys.executable,
            "-m",
            "bench.socket_client",
            "hold",
            "--base",
            base,
            "--connections",
            str(connections),
            "--wait",
            str(timeout),
        ]
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


def prepare_database(env: dict[str, str]) -> None:
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
        cwd=REPO,
        env=env,
        check=True,
        timeout=120,
    )


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
    base: str, connections: int, idle_only: bool, timeout: float
) -> Iterator[HoldClient]:
    client = HoldClient(base, connections, idle_only, timeout)
    try:
        yield client
    finally:
        client.close()


def weigh_connections(server: Server, plan: Plan, idle_only: bool, timeout: float) -> dict:
    """(c): RSS growth for ``held_connections`` idle sockets, then with a paused session each."""
    # Warm the server's code paths so the baseline holds the code, not the sessions.
    warm = 10
    with hold_client(server.base, warm, idle_only, timeout) as client:
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
    with hold_client(server.base, count, idle_only, timeout) as client:
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
    """(a): events/s for 1 and many connections, alternating the two servers."""
    rows = []
    shapes = [(1, plan.requests_one), (plan.connections_many, plan.requests_many)]
    for connections, requests in shapes:
        samples: dict[str, list[float]] = {"zett consumer": [], "bare consumer": []}
        cpu: dict[str, list[float]] = {"zett consumer": [], "bare consumer": []}
        for repetition in range(plan.repetitions):
            order = [("zett consumer", site), ("bare consumer", bare)]
            if repetition % 2:
                order.reverse()
            for label, server in order:
                (line,) = run_client(
                    server.base,
                    "throughput",
                    timeout,
                    connections=connections,
                    requests=requests,
                    deltas=plan.deltas,
                    wait=30,
                )
                samples[label].append(line["events_per_second"])
                cpu[label].append(line["client_cpu_share"])
                print(
                    f"  (a) {connections:>3} conn, {label}: {line['events_per_second']:,.0f} "
                    f"events/s ({line['events']:,} events, client CPU "
                    f"{line['client_cpu_share']:.0%})",
                    flush=True,
                )
        ratios = [
            ours / bare
            for ours, bare in zip(samples["zett consumer"], samples["bare consumer"], strict=True)
        ]
        rows.append(
            {
                "connections": connections,
                "zett_events_per_second": samples["zett consumer"],
                "bare_events_per_second": samples["bare consumer"],
                "ratios": ratios,
                "client_cpu_share": cpu,
            }
        )
    return rows


def record_frames(site: Server, plan: Plan, path: Path, timeout: float) -> int:
    (line,) = run_client(site.base, "record", timeout, deltas=plan.deltas, wait=30)
    frames = line["frames"]
    path.write_text(json.dumps(frames))
    return len(frames)


def run(plan: Plan, timeout: float) -> dict:
    from bench.external_wait import measure_reply_latency

    results: dict = {
        "machine": describe_machine(),
        "versions": package_versions(DISTRIBUTIONS),
        "plan": asdict(plan),
    }
    print(f"(b) in process: {plan.reply_samples} replies through emit_external_event", flush=True)
    latency = asyncio.run(measure_reply_latency(plan.reply_samples))
    results["reply_in_process"] = {
        "samples": latency.samples,
        "p50_ms": latency.p50_us / 1000,
        "p99_ms": latency.p99_us / 1000,
        "max_ms": latency.max_us / 1000,
    }
    # Memory-backed when the machine has /dev/shm: the throw-away database's fsyncs on a
    # shared disk would otherwise set the pace of every run end, not the consumer.
    shm = Path("/dev/shm")
    scratch = str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None
    with tempfile.TemporaryDirectory(prefix="zett-bench-", dir=scratch) as tmp:
        workdir = Path(tmp)
        env = base_env(workdir)
        prepare_database(env)
        frames_path = workdir / "frames.json"
        bare_env = {**env, "BENCH_FRAMES": str(frames_path)}
        with Server(SITE_APP, env, workdir, "site") as site:
            count = record_frames(site, plan, frames_path, timeout)
            print(f"recorded {count} frames for 'stream {plan.deltas}'", flush=True)
            with Server(BARE_APP, bare_env, workdir, "bare") as bare:
                results["throughput"] = measure_throughput(site, bare, plan, timeout)
            print(f"(b) over the socket: {plan.reply_samples} replies", flush=True)
            lines = run_client(site.base, "reply", timeout, samples=plan.reply_samples, wait=30)
            results["reply_socket"] = {line["until"]: line for line in lines}
        print(f"(c) {plan.held_connections} connections held", flush=True)
        with Server(SITE_APP, env, workdir, "site-held") as site:
            results["held_site"] = weigh_connections(site, plan, idle_only=False, timeout=60)
        with Server(BARE_APP, bare_env, workdir, "bare-held") as bare:
            results["held_bare"] = weigh_connections(bare, plan, idle_only=True, timeout=60)
    return results


def _span(values: list[float], digits: int = 0) -> str:
    return f"{min(values):,.{digits}f}-{max(values):,.{digits}f}"


def render(results: dict) -> str:
    lines = [
        "| connections | zett consumer events/s median (min-max) | bare consumer events/s "
        "median (min-max) | zett/bare median (min-max) |",
        "|---:|---:|---:|---:|",
    ]
    for row in results["throughput"]:
        ours, bare, ratios = (
            row["zett_events_per_second"],
            row["bare_events_per_second"],
            row["ratios"],
        )
        lines.append(
            f"| {row['connections']} | {statistics.median(ours):,.0f} ({_span(ours)}) "
            f"| {statistics.median(bare):,.0f} ({_span(bare)}) "
            f"| {statistics.median(ratios):.0%} ({_span([r * 100 for r in ratios])} %) |"
        )
    inproc, sock = results["reply_in_process"], results["reply_socket"]
    lines += [
        "",
        "| external_event reply until the tool runs | samples | p50 | p99 | max |",
        "|---|---:|---:|---:|---:|",
        f"| in process (emit_external_event → tool body) | {inproc['samples']} "
        f"| {inproc['p50_ms']:.3f} ms | {inproc['p99_ms']:.3f} ms | {inproc['max_ms']:.3f} ms |",
    ]
    for until, line in sock.items():
        lines.append(
            f"| over the socket (reply frame → `{until}` frame) | {line['samples']} "
            f"| {line['p50_ms']:.3f} ms | {line['p99_ms']:.3f} ms | {line['max_ms']:.3f} ms |"
        )
    site, bare = results["held_site"], results["held_bare"]
    lines += [
        "",
        "| server RSS, 1 socket each | connections | per idle connection | per paused session "
        "(above idle) |",
        "|---|---:|---:|---:|",
        f"| zett site | {site['connections']:,} | {site['idle_per_connection'] / 1024:,.1f} KiB "
        f"| {site['paused_per_session'] / 1024:,.1f} KiB |",
        f"| bare consumer | {bare['connections']:,} "
        f"| {bare['idle_per_connection'] / 1024:,.1f} KiB | - |",
    ]
    return "\n".join(lines)


def judge(results: dict) -> list[str]:
    verdicts = []
    for row in results["throughput"]:
        ratio = statistics.median(row["ratios"])
        met = "met" if ratio >= TARGET_THROUGHPUT else "MISSED"
        verdicts.append(
            f"(a) {row['connections']} conn: zett/bare = {ratio:.0%} (target ≥ 80 %: {met})"
        )
    p99 = results["reply_in_process"]["p99_ms"]
    met = "met" if p99 < TARGET_REPLY_IN_PROCESS_MS else "MISSED"
    verdicts.append(f"(b) in process p99 {p99:.3f} ms (target < 1 ms: {met})")
    p99 = results["reply_socket"]["tool_started"]["p99_ms"]
    met = "met" if p99 < TARGET_REPLY_SOCKET_MS else "MISSED"
    verdicts.append(f"(b) socket p99 {p99:.3f} ms (target < 5 ms: {met})")
    paused = results["held_site"]["paused_per_session"] / 1000
    met = "met" if paused <= TARGET_PAUSED_KB else "MISSED"
    verdicts.append(f"(c) {paused:.1f} KB per paused session (target ≤ 50 KB: {met})")
    return verdicts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="a few frames of everything, for CI")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per client run")
    args = parser.parse_args(argv)
    plan = SMOKE if args.smoke else FULL
    started = time.perf_counter()
    results = run(plan, args.timeout)
    machine = results["machine"]
    print()
    print(f"Machine: {machine['cpu']}, {machine['cores']} cores, Python {machine['python']}")
    print("Versions: " + ", ".join(f"{k} {v}" for k, v in results["versions"].items()))
    print()
    print(render(results))
    results["targets"] = judge(results)
    if not args.smoke:
        print()
        print("\n".join(results["targets"]))
    print(f"\nTotal time: {time.perf_counter() - started:.0f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
