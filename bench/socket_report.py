"""The socket benchmark's report: its tables (``render``) and its targets (``judge``).

Both read the results dict ``bench.socket.run`` returns (what ``--json`` writes), so how the
path is measured and how the numbers are reported can change apart.
"""

from __future__ import annotations

import statistics

__all__ = ["fixed_above", "judge", "render"]

TARGET_THROUGHPUT = 0.80  # our consumer >= 80 % of the bare consumer's events/s
#: Server CPU per event, zett / bare: the frame path alone (the cost model's per-event
#: term) and all in (500-delta runs, every per-run cost included).
TARGET_FRAME_PATH = 1.05
TARGET_ALL_IN = 1.2
#: A run's fixed server CPU (the cost model's per-run term: a one-delta run less its events)
#: at most this above bare's.
TARGET_FIXED_ABOVE_BARE_MS = 1.0
TARGET_REPLY_IN_PROCESS_MS = 1.0
TARGET_REPLY_SOCKET_MS = 5.0
TARGET_REPLY_CROSS_WORKER_MS = 10.0
TARGET_PAUSED_KB = 50.0
#: Last round's one-worker figures (docs/benchmarks.md), which this round must not regress.
LAST_ROUND = {"events_per_second": {1: 24_360, 100: 30_570}, "reply_socket_p99_ms": 4.02}


def _span(values: list[float], digits: int = 0) -> str:
    return f"{min(values):,.{digits}f}-{max(values):,.{digits}f}"


def _med(values: list[float], digits: int = 0) -> str:
    return f"{statistics.median(values):,.{digits}f} ({_span(values, digits)})"


def _latency_row(label: str, line: dict) -> str:
    return (
        f"| {label} | {line['samples']} | {line['p50_ms']:.3f} ms | {line['p99_ms']:.3f} ms "
        f"| {line['max_ms']:.3f} ms |"
    )


def render(results: dict) -> str:
    """The results as Markdown tables, one per measurement present."""
    lines: list[str] = []
    if "throughput" in results:
        lines += [
            "| connections | zett events/s median (min-max) | bare events/s median (min-max) "
            "| zett/bare events/s | zett CPU µs/event | bare CPU µs/event | zett/bare CPU "
            "per event | load (1/5/15 min) |",
            "|---:|---:|---:|---:|---:|---:|---:|---|",
        ]
        for row in results["throughput"]:
            ratios = [r * 100 for r in row["ratios"]]
            lines.append(
                f"| {row['connections']} | {_med(row['zett_events_per_second'])} "
                f"| {_med(row['bare_events_per_second'])} | {_med(ratios)} % "
                f"| {_med(row['zett_cpu_us_per_event'], 1)} "
                f"| {_med(row['bare_cpu_us_per_event'], 1)} "
                f"| {_med(row['cpu_ratios'], 2)}x | {', '.join(row['load'])} |"
            )
    model = results.get("cost_model")
    if model:
        site, bare = model["zett consumer"], model["bare consumer"]
        lines += [
            "",
            "| 1 connection, server CPU | per agent event median (min-max) | per run, whatever "
            "its length | a one-delta run, all in | load |",
            "|---|---:|---:|---:|---|",
            f"| zett consumer | {_med(site['per_event_us'], 1)} µs "
            f"| {_med(site['per_run_ms'], 2)} ms | {_med(site['short_run_ms'], 2)} ms "
            f"| {', '.join(site['load'])} |",
            f"| bare consumer | {_med(bare['per_event_us'], 1)} µs "
            f"| {_med(bare['per_run_ms'], 2)} ms | {_med(bare['short_run_ms'], 2)} ms "
            f"| {', '.join(bare['load'])} |",
            f"| zett/bare | {_med(model['per_event_ratios'], 2)}x | "
            f"{_med(fixed_above(model), 2)} ms above | | |",
        ]
        floor = model.get("durable floor")
        if floor:
            lines += [
                f"| durable floor (bare, storing each run) | {_med(floor['per_event_us'], 1)} µs "
                f"| {_med(floor['per_run_ms'], 2)} ms | {_med(floor['short_run_ms'], 2)} ms "
                f"| {', '.join(floor['load'])} |",
                f"| durable floor above bare / zett above it | | "
                f"{_med(fixed_above(model, 'durable floor', 'bare consumer'), 2)} / "
                f"{_med(fixed_above(model, 'zett consumer', 'durable floor'), 2)} ms | | |",
            ]
    latency_rows = []
    if "reply_in_process" in results:
        latency_rows.append(
            _latency_row(
                "in process (emit_external_event → tool body)", results["reply_in_process"]
            )
        )
    if "reply_socket" in results:
        for until in ("tool_started", "tool_completed"):
            latency_rows.append(
                _latency_row(
                    f"one worker, over the socket (reply → `{until}`)",
                    results["reply_socket"][until],
                )
            )
    cluster = results.get("cluster")
    if cluster:
        for key, label in (
            ("reply_same_worker", "two workers, socket on the run's worker"),
            ("reply_cross_worker", "two workers, socket on the other worker"),
        ):
            for until in ("external_event_result", "reply_accepted", "tool_started"):
                if until in cluster[key]:
                    latency_rows.append(
                        _latency_row(f"{label} (reply → `{until}`)", cluster[key][until])
                    )
    if latency_rows:
        lines += [
            "",
            "| external_event reply until the tool runs | samples | p50 | p99 | max |",
            "|---|---:|---:|---:|---:|",
            *latency_rows,
        ]
    if cluster:
        lines += [
            "",
            "| two workers: sessions | events/s at the other worker median (min-max) "
            "| CPU µs/event, both servers | load |",
            "|---:|---:|---:|---|",
        ]
        for row in cluster["throughput"]:
            lines.append(
                f"| {row['connections']} | {_med(row['events_per_second'])} "
                f"| {_med(row['cpu_us_per_event'], 1)} | {', '.join(row['load'])} |"
            )
    if "held_site" in results:
        site, bare = results["held_site"], results["held_bare"]
        lines += [
            "",
            "| server RSS, 1 socket each | connections | per idle connection | per paused "
            "session (above idle) |",
            "|---|---:|---:|---:|",
            f"| zett site | {site['connections']:,} | {site['idle_per_connection'] / 1024:,.1f}"
            f" KiB | {site['paused_per_session'] / 1024:,.1f} KiB |",
            f"| bare consumer | {bare['connections']:,} "
            f"| {bare['idle_per_connection'] / 1024:,.1f} KiB | - |",
        ]
    return "\n".join(lines)


def fixed_above(
    model: dict, ours: str = "zett consumer", theirs: str = "bare consumer"
) -> list[float]:
    """A run's fixed CPU, ``ours`` minus ``theirs`` (zett minus bare unless told), per
    repetition (ms): both are measured in the same repetition, so what the machine did then
    weighs on both."""
    above, below = model[ours]["per_run_ms"], model[theirs]["per_run_ms"]
    return [mine - other for mine, other in zip(above, below, strict=True)]


def _met(ok: bool) -> str:
    return "met" if ok else "MISSED"


def judge(results: dict) -> list[str]:
    """One line per target: what was measured, the target, met or MISSED."""
    verdicts = []
    for row in results.get("throughput", ()):
        connections = row["connections"]
        ratio = statistics.median(row["ratios"])
        verdicts.append(
            f"(a) {connections} conn: zett/bare = {ratio:.0%} "
            f"(target ≥ 80 %: {_met(ratio >= TARGET_THROUGHPUT)})"
        )
        cpu = statistics.median(row["cpu_ratios"])
        verdicts.append(
            f"(a) {connections} conn: all in, server CPU per event zett/bare = {cpu:.2f}x "
            f"(target ≤ {TARGET_ALL_IN}x: {_met(cpu <= TARGET_ALL_IN)})"
        )
        before = LAST_ROUND["events_per_second"].get(connections)
        if before:
            now = statistics.median(row["zett_events_per_second"])
            verdicts.append(
                f"(a) {connections} conn: {now:,.0f} events/s against {before:,} last round "
                f"({now / before:.0%}; wall time, load-sensitive)"
            )
    model = results.get("cost_model")
    if model:
        ratio = statistics.median(model["per_event_ratios"])
        verdicts.append(
            f"(a) frame path alone (CPU per event, per-run costs taken out): zett/bare = "
            f"{ratio:.2f}x (target ≤ {TARGET_FRAME_PATH}x: {_met(ratio <= TARGET_FRAME_PATH)})"
        )
        above = statistics.median(fixed_above(model))
        verdicts.append(
            f"(a) a run's fixed CPU: zett "
            f"{statistics.median(model['zett consumer']['per_run_ms']):.2f} ms, bare "
            f"{statistics.median(model['bare consumer']['per_run_ms']):.2f} ms, "
            f"{above:.2f} ms above (target ≤ {TARGET_FIXED_ABOVE_BARE_MS} ms above: "
            f"{_met(above <= TARGET_FIXED_ABOVE_BARE_MS)})"
        )
        if model.get("durable floor"):
            storing = statistics.median(fixed_above(model, "durable floor", "bare consumer"))
            beyond = statistics.median(fixed_above(model, "zett consumer", "durable floor"))
            verdicts.append(
                f"(a) of it, storing a run alone (the durable floor: the bare consumer with the "
                f"run's two transactions): {storing:.2f} ms above bare; zett {beyond:.2f} ms "
                f"above the durable floor"
            )
    if "reply_in_process" in results:
        p99 = results["reply_in_process"]["p99_ms"]
        met = "met" if p99 < TARGET_REPLY_IN_PROCESS_MS else "MISSED"
        verdicts.append(f"(b) in process p99 {p99:.3f} ms (target < 1 ms: {met})")
    if "reply_socket" in results:
        p99 = results["reply_socket"]["tool_started"]["p99_ms"]
        met = "met" if p99 < TARGET_REPLY_SOCKET_MS else "MISSED"
        verdicts.append(
            f"(b) one worker, socket p99 {p99:.3f} ms (target < 5 ms: {met}; last round "
            f"{LAST_ROUND['reply_socket_p99_ms']} ms)"
        )
    if "held_site" in results:
        paused = results["held_site"]["paused_per_session"] / 1000
        met = "met" if paused <= TARGET_PAUSED_KB else "MISSED"
        verdicts.append(f"(c) {paused:.1f} KB per paused session (target ≤ 50 KB: {met})")
    if results.get("cluster"):
        p99 = results["cluster"]["reply_cross_worker"]["tool_started"]["p99_ms"]
        met = "met" if p99 < TARGET_REPLY_CROSS_WORKER_MS else "MISSED"
        verdicts.append(f"(d) cross-worker reply p99 {p99:.3f} ms (target < 10 ms: {met})")
    return verdicts
