"""`bridge-lake play`: a source served over the Foxglove WebSocket protocol on its own clock.

One asyncio loop runs the server and the pacing (`clock.approach`, `clock.arrive`): a
spinning thread beside the loop would hold the GIL the loop needs, and the measured receive
jitter was best with both on one thread (shared/notes/foxglove-ws.md). The source is read
ahead on a thread in bounded batches (`readahead`), gated out of the last stretch before a
deadline; that thread also builds each message's WebSocket frame (`PlayServer.ready`), so at
a due time the player only writes ready bytes, one write per client for the group due.
The garbage collector is frozen while playing. Every message's send error is measured
(`report`), so every run ends with the comparison table of timed players.
"""

from __future__ import annotations

import asyncio
import fnmatch
import gc
import signal
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from bridge_lake import memory
from bridge_lake.errors import BridgeLakeError
from bridge_lake.formats.ros.readers import Recording, RosChannel, RosMessage
from bridge_lake.play.clock import (
    PlaybackClock,
    Waker,
    approach,
    arrive,
    next_group,
    normal_priority,
    precise_sleeps,
    realtime_priority,
)
from bridge_lake.play.readahead import ReadAhead
from bridge_lake.play.report import PlayReport, TopicStats
from bridge_lake.play.ros1_clock import clock_channel, with_clock
from bridge_lake.play.server import ENDED, PAUSED, PLAYING, PlaybackRequest, PlayServer, Ready

TIME_EVERY_NS = 50_000_000
"""The playback clock goes to clients at most every 50 ms of wall time."""
RSS_EVERY_NS = 100_000_000
SOON_NS = 400_000
"""A group due within this of the previous hand-over is handed over without anything in
between (`Player._settle` waits for a larger gap)..."""
READER_PRIORITY = 5
"""--realtime: the read-ahead thread's SCHED_FIFO priority, below the pacer's (10)."""
LOOP_EVERY_NS = 10_000_000
"""...where the loop runs its pending callbacks when a socket holds unsent bytes or the loop
has not run for 10 ms (client requests)."""
WAIT_AFTER_SUBSCRIBE_S = 1.0
SWITCH_INTERVAL_S = 0.0002
"""While playing, a thread holding the GIL gives it up after 200 µs (default 5 ms) when
another wants it."""
REALTIME_SWITCH_INTERVAL_S = 0.000005
"""The same with --realtime: the reader's Python work between two looks at its gate (one
message) still holds the GIL when the pacer wakes, and at 200 µs that made the send error's
p99 90-100 µs against 65-82 µs at 5 µs (20 s windows side by side, docs/benchmarks.md).
Only under SCHED_FIFO, where the thread handed the GIL runs at once: with ordinary
scheduling on a loaded machine each hand-off waited for the OS and at 5 µs they piled up
(p99 7-34 ms against 1.9-2.9 ms at 200 µs, side by side)."""


class PlayError(BridgeLakeError):
    """Options that cannot be played (rate ≤ 0, a topic glob matching nothing, ...)."""


@dataclass
class PlayOptions:
    topics: list[str] = field(default_factory=list)
    start_ns: int | None = None
    end_ns: int | None = None
    rate: float = 1.0
    max_speed: bool = False
    loop: bool = False
    paused: bool = False
    wait_for_client: bool = False
    host: str = "127.0.0.1"
    port: int = 8765
    faults: list = field(default_factory=list)
    seed: int = 0
    realtime: bool = False
    ros1: bool = False
    """publish into the ROS 1 master at $ROS_MASTER_URI instead of serving Foxglove"""
    clock_hz: float | None = None
    """--clock: publish /clock at this rate of log time (ROS 1 only)"""


class _Stopped(Exception):
    """A ROS node asked the player's node to shut down (`rosnode kill`)."""


def select_channels(source: Recording, patterns: list[str]) -> set[int]:
    """Channel ids whose topic matches a glob; a glob matching nothing lists the topics."""
    if not patterns:
        return set(source.channels)
    chosen: set[int] = set()
    for p in patterns:
        hit = {c.id for c in source.channels.values() if fnmatch.fnmatchcase(c.topic, p)}
        if not hit:
            topics = ", ".join(sorted(c.topic for c in source.channels.values()))
            raise PlayError(f"--topics {p!r} matches no topic of {source.path}; topics: {topics}")
        chosen |= hit
    return chosen


class Player:
    def __init__(self, source: Recording, options: PlayOptions, report: PlayReport) -> None:
        if not options.max_speed and not options.rate > 0:
            raise PlayError(f"--rate must be > 0, not {options.rate:g}")
        self.source, self.o, self.report = source, options, report
        self.chosen = select_channels(source, options.topics)
        self.first_ns = max(source.start_ns, options.start_ns or source.start_ns)
        self.last_ns = min(
            source.end_ns, options.end_ns if options.end_ns is not None else source.end_ns
        )
        if self.last_ns < self.first_ns:
            raise PlayError(
                f"the window selects nothing: {source.path} runs from {source.start_ns} to "
                f"{source.end_ns} ns"
            )
        self.faults = None
        if options.faults:
            from bridge_lake.play.faults import LiveFaults

            self.faults = LiveFaults(source, options.faults, options.seed)
            report.faults_planned = len(self.faults.result.faults)
            if options.end_ns is None:  # a delay may move the last messages past the end
                self.last_ns = max(self.last_ns, self.faults.end_ns)
        self.clock = PlaybackClock(self.first_ns, 1.0 if options.max_speed else options.rate)
        self.interrupted = Waker()
        self.gate = threading.Event()
        self.gate.set()
        self._pending: list[PlaybackRequest] = []
        self._ids: dict[int, int] = {}
        self._stats: dict[int, TopicStats] = {}
        """by the server's channel id"""
        self._topics: dict[int, str] = {}
        self.server: PlayServer | None = None
        self._reader: ReadAhead | None = None
        self._last_time_sent = 0
        self._resume: asyncio.Future | None = None
        self._last_yield = 0
        self._last_rss = 0
        self.stop_reason: str | None = None
        self._clock_channel: RosChannel | None = None
        if options.clock_hz is not None:
            if not options.ros1:
                raise PlayError("--clock publishes a ROS 1 /clock: it needs --ros1")
            if not options.clock_hz > 0:
                raise PlayError(f"--hz must be > 0, not {options.clock_hz:g}")
            self._clock_channel = clock_channel()

    # --- reading ---------------------------------------------------------------------------

    def _messages(self, start_ns: int) -> Iterator[RosMessage]:
        it = self.source.messages_in_time_order(
            start_ns if start_ns > self.source.start_ns else None
        )
        if self.faults is not None:
            it = self.faults.stream(it, start_ns if start_ns > self.source.start_ns else None)
        it = self._window(it, start_ns)
        if self._clock_channel is not None:
            it = with_clock(it, self._clock_channel, start_ns, self.o.clock_hz or 0)
        return it

    def _window(self, it: Iterator[RosMessage], start_ns: int) -> Iterator[RosMessage]:
        for m in it:
            if m.log_time < start_ns or m.channel.id not in self.chosen:
                continue
            if m.log_time > self.last_ns:
                if self.faults is None:  # in time order: nothing later is in the window
                    return
                continue
            yield m

    def _ready(self, start_ns: int) -> Iterator[Ready]:
        assert self.server is not None
        ready, ids = self.server.ready, self._ids
        for m in self._messages(start_ns):
            yield ready(ids[m.channel.id], m.log_time, m.data)

    def _open_reader(self, start_ns: int) -> None:
        if self._reader is not None:
            self._reader.stop()
        self.gate.set()
        self._reader = ReadAhead(
            lambda: self._ready(start_ns),
            lambda r: len(r.frame),
            self.gate,
            READER_PRIORITY if self.o.realtime and not self.o.max_speed else 0,
            key=lambda r: r.log_time,
        )

    async def _next_batch(self) -> list[Ready] | None:
        assert self._reader is not None
        got = self._reader.get_nowait()
        while got is False:
            self.gate.set()
            got = await asyncio.to_thread(self._reader.get, 0.05)
            if self.interrupted.is_set():
                return []
        return got  # type: ignore[return-value]

    # --- control ---------------------------------------------------------------------------

    def _on_playback(self, request: PlaybackRequest) -> None:
        self._pending.append(request)
        self.interrupted.wake()
        if self._resume is not None and not self._resume.done():
            self._resume.set_result(None)

    async def _apply_controls(self) -> bool:
        """Apply queued requests; True when a seek restarted the reader."""
        assert self.server is not None
        seeked = False
        while self._pending:
            r = self._pending.pop(0)
            if r.speed > 0 and r.speed != self.clock.rate and not self.o.max_speed:
                self.clock.set_rate(r.speed)
            if r.seek_ns is not None:
                target = min(max(r.seek_ns, self.first_ns), self.last_ns)
                self.clock.anchor(target)
                self._open_reader(target)
                self.report.seeks += 1
                seeked = True
            if r.play:
                self.clock.resume()
            else:
                self.clock.pause()
            await self.server.broadcast_state(
                PAUSED if self.clock.paused else PLAYING,
                self.clock.position(),
                self.clock.rate,
                r.seek_ns is not None,
                r.request_id,
            )
            if r.seek_ns is not None:
                await self.server.resend_latched()
        self.interrupted.clear()
        return seeked

    def _prelude(self) -> None:
        """Latched messages logged before `--start` (a /tf_static at the file's start): kept
        by the server for every subscriber, though the window leaves them out."""
        assert self.server is not None
        channels = self.source.channels
        latched = {c for c in self.chosen if c in channels and channels[c].latched}
        if not latched or self.first_ns <= self.source.start_ns:
            return
        seen: set[int] = set()
        for m in self.source.messages_in_time_order():
            if m.log_time >= self.first_ns or seen == latched:
                break
            if m.channel.id in latched:
                self.server.latch(self._ids[m.channel.id], m.log_time, m.data)
                seen.add(m.channel.id)

    # --- the run ---------------------------------------------------------------------------

    async def run(self, started: asyncio.Event | None = None) -> None:
        o = self.o
        channels = [ch for cid, ch in self.source.channels.items() if cid in self.chosen]
        if self._clock_channel is not None:
            self.chosen.add(self._clock_channel.id)
            channels.append(self._clock_channel)
        if o.ros1:
            from bridge_lake.formats.ros.ros1_form import ros1_form
            from bridge_lake.play.ros1_output import Ros1Output

            for ch in channels:  # every topic checked before any is registered
                ros1_form(ch)
            self.server = Ros1Output(on_shutdown=self._on_shutdown)  # type: ignore[assignment]
        else:
            self.server = PlayServer(
                o.host, o.port, data_range=(self.first_ns, self.last_ns),
                on_playback=self._on_playback,
            )  # fmt: skip
        await self.server.start()
        try:
            for ch in channels:
                self._ids[ch.id] = await self.server.add_channel(ch)
                self._topics[self._ids[ch.id]] = ch.topic
            await asyncio.to_thread(self._prelude)
            if o.ros1:
                await self.server.connected()  # type: ignore[attr-defined]
            if started is not None:
                started.set()
            if o.ros1:
                node = self.server.node  # type: ignore[attr-defined]
                print(f"publishing {self.source.path} into ROS 1 at {node.master_uri} as "
                      f"{node.caller_id}", flush=True)  # fmt: skip
            else:
                print(f"serving {self.source.path} on {self.server.url}", flush=True)
            if o.wait_for_client:
                await self.server.subscribed.wait()
                await asyncio.sleep(WAIT_AFTER_SUBSCRIBE_S)
            if o.paused:
                self.clock.pause()
            await self._play()
        finally:
            if self._reader is not None:
                self._reader.stop()
            if self.faults is not None:
                self.report.faults = self.faults.applied
            if o.ros1:
                self.report.dropped = self.server.dropped()  # type: ignore[attr-defined]
            await self.server.stop()

    async def _play(self) -> None:
        assert self.server is not None
        server, clock, report = self.server, self.clock, self.report
        self._open_reader(self.first_ns)
        assert self._reader is not None
        if not self.o.max_speed:  # RSS follows the read-ahead, not the heap's holes; at max
            memory.release_large_frees()  # speed it halves throughput (docs/benchmarks.md)
        first = await asyncio.to_thread(self._reader.peek, 30.0)  # anchor once data is there
        precise_sleeps()
        switch = SWITCH_INTERVAL_S
        if self.o.realtime:
            refused = realtime_priority()
            if refused:
                print(
                    f"bridge-lake: --realtime refused ({refused}); normal priority", file=sys.stderr
                )
            elif not self.o.max_speed:
                switch = REALTIME_SWITCH_INTERVAL_S
        old_switch = sys.getswitchinterval()
        sys.setswitchinterval(switch)
        gc.collect()
        gc.freeze()
        gc.disable()
        report.started()
        clock.anchor(self.first_ns if first is None else max(self.first_ns, first.log_time))
        try:
            while True:
                if self.stop_reason is not None:
                    return
                batch = await self._next_batch()
                if batch is None:
                    await server.broadcast_state(ENDED, self.last_ns, clock.rate, False)
                    if not self.o.loop:
                        return
                    report.loops += 1
                    clock.anchor(self.first_ns)
                    self._open_reader(self.first_ns)
                    continue
                if not batch:  # a control request came while waiting for data
                    await self._wait_controls()
                    continue
                await self._send_batch(batch)
        finally:
            report.finished()
            gc.enable()
            gc.unfreeze()
            sys.setswitchinterval(old_switch)
            normal_priority()

    async def _send_batch(self, batch: list[Ready]) -> bool:
        """Send a batch on schedule; True when a control request cut it short.

        A group due within SOON_NS of the previous hand-over goes straight to `arrive`: the
        counting, the clients' backlog, the clock broadcast and the loop's turn (`_settle`)
        wait for the first gap of more than SOON_NS, so they never make a group late."""
        server, clock = self.server, self.clock
        assert server is not None and self._reader is not None
        i, n = 0, len(batch)
        max_speed = self.o.max_speed
        deadlines = [clock.deadline(r.log_time) for r in batch]
        handed_groups: list[tuple[list[Ready], int]] = []
        try:
            while i < n:
                if self.interrupted.is_set() or clock.paused:
                    await self._settle(handed_groups)
                    if await self._wait_controls():
                        return True
                    deadlines = [clock.deadline(r.log_time) for r in batch]  # re-anchored
                    continue
                deadline = deadlines[i]
                if max_speed or deadline - time.perf_counter_ns() > SOON_NS:
                    await self._settle(handed_groups)
                    if not max_speed and not await approach(
                        deadline,
                        self.interrupted,
                        open_gate=self.gate.set,
                        close_gate=self.gate.clear,
                        idle=self._idle,
                    ):
                        continue
                else:
                    self.gate.clear()
                j, at = next_group(deadlines, i)
                group = batch[i:j]
                writes = server.gather(group)  # no await from here to the hand-over
                if not max_speed:
                    arrive(at, self.gate if self._reader.wants() else None)
                handed = time.perf_counter_ns()
                server.hand_over(group, writes)
                handed_groups.append((group, handed))
                i = j
        finally:
            self._count_handed(handed_groups)  # also when cut short (Ctrl-C)
        return False

    async def _settle(self, handed_groups: list[tuple[list[Ready], int]]) -> None:
        """What a hand-over leaves to do, in a gap: count the groups handed over, wait for a
        client whose socket holds WRITE_LIMIT, give the loop a turn (it writes what sockets
        left and reads requests), broadcast the clock, sample memory at max speed."""
        server = self.server
        assert server is not None
        if not handed_groups:
            return
        last = handed_groups[-1][0][-1].log_time
        self._count_handed(handed_groups)
        if server.backlogged():
            await server.drain()
        now = time.perf_counter_ns()
        if not self.o.max_speed and (
            server.pending_writes() or now - self._last_yield > LOOP_EVERY_NS
        ):
            self._last_yield = now
            await asyncio.sleep(0)
        if now - self._last_time_sent >= TIME_EVERY_NS:
            self._last_time_sent = now
            await server.broadcast_time(last)
        if self.o.max_speed and now - self._last_rss >= RSS_EVERY_NS:
            self._idle()

    def _count_handed(self, handed_groups: list[tuple[list[Ready], int]]) -> None:
        """Per topic: messages, bytes and (at a rate) send errors, handed minus due."""
        timed = not self.o.max_speed
        for group, handed in handed_groups:
            self._count(group, handed, timed)
        handed_groups.clear()

    def _count(self, group: list[Ready], handed: int, timed: bool) -> None:
        for r in group:
            t = self._stats.get(r.channel)
            if t is None:
                t = self._stats[r.channel] = self.report.topic(self._topics[r.channel])
            t.messages += 1
            t.bytes += r.size
            if timed:
                t.errors.append(handed - self.clock.deadline(r.log_time))

    def _on_shutdown(self, reason: str) -> None:
        """A ROS node asked ours to shut down: the playback ends (`rosnode kill`)."""
        self.stop_reason = reason
        self.report.outcome = "stopped"
        self.report.error = reason
        self.interrupted.wake()
        if self._resume is not None and not self._resume.done():
            self._resume.set_result(None)

    async def _wait_controls(self) -> bool:
        """Paused or interrupted: apply requests, wait while paused; True after a seek or
        when a ROS node stopped the player (the batch is cut short)."""
        seeked = await self._apply_controls()
        while self.clock.paused and not seeked and self.stop_reason is None:
            self.gate.set()
            if not self._pending:
                self._resume = asyncio.get_running_loop().create_future()
                await self._resume
                self._resume = None
            seeked = await self._apply_controls()
        return seeked or self.stop_reason is not None

    def _idle(self) -> None:
        now = time.perf_counter_ns()
        if now - self._last_rss >= RSS_EVERY_NS:
            self._last_rss = now
            self.report.sample_rss()


def play(source: Recording, options: PlayOptions, report: PlayReport) -> None:
    """Run the player until the source ends (or Ctrl-C); the report is filled either way."""
    player = Player(source, options, report)
    try:
        asyncio.run(_stopped_by_sigint(player))
        if player.stop_reason is None:
            report.outcome = "ended"
    except KeyboardInterrupt:
        report.outcome = "interrupted"
        report.finished()


async def _stopped_by_sigint(player: Player) -> None:
    """`player.run()`, cancelled by Ctrl-C from inside the loop (`add_signal_handler`), then
    KeyboardInterrupt. asyncio.run's own SIGINT handler cancels the task from a Python signal
    handler, at any bytecode: landing between a thread's result and the future taking it, it
    printed an InvalidStateError traceback (CI, `play --loop`). A second Ctrl-C raises
    KeyboardInterrupt as soon as the loop runs its callbacks."""
    if threading.current_thread() is not threading.main_thread():
        await player.run()
        return
    loop, task = asyncio.get_running_loop(), asyncio.current_task()
    asked: list[bool] = []

    def on_sigint() -> None:
        if asked:
            raise KeyboardInterrupt
        asked.append(True)
        assert task is not None
        task.cancel()

    loop.add_signal_handler(signal.SIGINT, on_sigint)
    try:
        await player.run()
    except asyncio.CancelledError:
        if asked:
            raise KeyboardInterrupt from None
        raise
    finally:
        loop.remove_signal_handler(signal.SIGINT)
