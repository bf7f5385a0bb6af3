"""`bridge-lake live`: follow an ADTF recording while it is written and publish it.

One asyncio loop polls the recording (`formats.adtf.follow`) every `poll_s`; each poll's
new samples go through the offline pipeline's own steps: the ADTF normalizer's stream jobs
(the lake's rows, `live.sink`), then the export mapping and builders (ROS messages,
`live.topics`). The messages of a poll are merged by time and handed to the live MCAP
(flushed per poll: whole chunks on disk) and the Foxglove WebSocket server.

PATH is a file or a drive folder. In a folder the parts of a split recording are followed
one after the other (a part that appears while the current one is still open waits until
that one is closed or idle); streams are matched by name across parts, so a split
recording is one live stream per stream. Without `--catalog-from`, a part after one that
closed takes its stream names from that part's final catalog (same recorder, same
configuration), so only the first part is published under provisional names.

The recording ends when the file is closed (its header lists its extensions), or has not
grown for `idle_s`, or, in a folder, when the last part ended and no next part started
within `idle_s`. A path that never appears ends with `LiveTimeoutError` after `appear_s`.
"""

from __future__ import annotations

import asyncio
import gc
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from bridge_lake import memory
from bridge_lake.errors import BridgeLakeError
from bridge_lake.export.kinds import GENERATED
from bridge_lake.export.mapping import Mapping as TopicMapping
from bridge_lake.export.messages import Serialized
from bridge_lake.formats.adtf import RECORDING_SUFFIXES, Sample, Stream
from bridge_lake.formats.adtf.follow import AdtfFollower, Catalog, Poll
from bridge_lake.live.outputs import SUBSCRIBE_WAIT_S, LiveMcap, Server, channel_for
from bridge_lake.live.rig import drive_rig
from bridge_lake.live.sink import LiveSink
from bridge_lake.live.summary import LiveSummary
from bridge_lake.live.topics import LiveTopics, Produced
from bridge_lake.normalize.adtf import stream_job
from bridge_lake.normalize.adtf_clock import EPOCH_FLOOR_NS, RecordingClock
from bridge_lake.normalize.adtf_jobs import Job, Substreams
from bridge_lake.normalize.adtf_mapping import Mapping as StreamMapping

POLL_S = 0.005
"""Seconds between two looks at the file: bounds the wait before new bytes are seen."""


class LiveTimeoutError(BridgeLakeError):
    """The path to follow never appeared."""


@dataclass
class LiveConfig:
    path: Path
    stream_mapping: StreamMapping
    topic_mapping: TopicMapping
    catalog: Catalog | None = None
    idle_s: float = 10.0
    appear_s: float = 30.0
    poll_s: float = POLL_S


@dataclass
class _Recording:
    """The jobs of the recording being followed (streams matched by name across parts)."""

    jobs: dict[str, Job | Substreams] = field(default_factory=dict)
    by_id: dict[int, Job | Substreams] = field(default_factory=dict)
    clock: RecordingClock | None = None


class LiveBridge:
    """Runs one live session (see module); `run()` returns its summary."""

    def __init__(
        self,
        config: LiveConfig,
        *,
        server: Server | None = None,
        mcap: Path | None = None,
        on_message: Callable[[str, int, memoryview], None] | None = None,
    ) -> None:
        self.config = config
        self.server = server
        self.sink = LiveSink()
        self.topics = LiveTopics(config.topic_mapping)
        self.mcap = LiveMcap(mcap, self.topics.types) if mcap is not None else None
        self.on_message = on_message
        self.summary = LiveSummary(str(config.path))
        self._channels: dict[str, int] = {}
        self._recording = _Recording()
        self._closed_part: Catalog | None = None
        """the catalog of the last part that closed: names the streams of the next one"""
        self._stop = asyncio.Event()
        self._warm = False

    def stop(self) -> None:
        """End the session after the current poll (Ctrl-C, a signal)."""
        self._stop.set()

    # -- the session ----------------------------------------------------------------------

    async def run(self) -> LiveSummary:
        if self.server is not None:
            await self.server.start()
        self.warm_up()
        try:
            first = await self._wait_for_first_part()
            part: Path | None = first
            while part is not None and not self._stop.is_set():
                self.summary.parts.append(str(part))
                reason = await self._follow(part)
                part = await self._next_part(part, reason)
            self._finish_jobs()
        finally:
            if self.mcap is not None:
                self.mcap.close(self.summary.metadata())
            if self.server is not None:
                await self.server.stop()
        self.summary.topics_offline_only = dict(self.topics.offline_only)
        self.summary.unpublished = dict(self.topics.unpublished)
        self.summary.warnings += self.topics.warnings
        self.summary.account(self.sink)
        return self.summary

    def warm_up(self) -> None:
        """Done by `run()` before its first poll, once; callable earlier (the bridge is
        started before the recording). What the first poll would otherwise pay (200 ms
        measured): the message definitions of the mapping's fixed types, the MCAP's first
        flush; freed memory kept for the next poll (`memory.reuse_large_frees`: each poll's
        arrays of megabytes were mapped and unmapped, ~75,000 page faults and a fifth of the CPU
        on a 115 MB drive). Then every object alive
        goes to the collector's permanent generation: a full collection walked them all (the
        imported libraries), a pause of up to hundreds of ms at random polls."""
        if self._warm:
            return
        self._warm = True
        for rule in self.config.topic_mapping.topics:
            if rule.type not in GENERATED:
                channel_for(self.topics.types, rule.topic, rule.type)
        if self.mcap is not None:
            self.mcap.flush()
        memory.reuse_large_frees()
        gc.collect()
        gc.freeze()  # the collector's full passes then skip every module and type loaded

    async def _wait_for_first_part(self) -> Path:
        cfg = self.config
        deadline = time.monotonic() + cfg.appear_s
        while True:
            parts = _parts(cfg.path)
            if parts:
                return parts[0]
            if time.monotonic() >= deadline or self._stop.is_set():
                what = "no ADTF recording appeared in" if cfg.path.is_dir() else "did not appear"
                raise LiveTimeoutError(
                    f"{cfg.path}: {what} within {cfg.appear_s:g} s"
                    if cfg.path.is_dir()
                    else f"{cfg.path} {what} within {cfg.appear_s:g} s"
                )
            await asyncio.sleep(cfg.poll_s)

    async def _next_part(self, current: Path, reason: str) -> Path | None:
        """The part after `current` in a drive folder, waiting up to idle_s for it."""
        cfg = self.config
        if not cfg.path.is_dir() or self._stop.is_set():
            self.summary.end = reason
            return None
        deadline = time.monotonic() + cfg.idle_s
        while time.monotonic() < deadline and not self._stop.is_set():
            later = [p for p in _parts(cfg.path) if str(p) not in self.summary.parts]
            if later:
                return later[0]
            await asyncio.sleep(cfg.poll_s)
        self.summary.end = f"{reason}; no next part within {cfg.idle_s:g} s"
        return None

    async def _follow(self, path: Path) -> str:
        """Follow one part until it is closed or idle; returns why it ended."""
        cfg = self.config
        catalog = cfg.catalog or self._closed_part
        if cfg.catalog is None and catalog is not None:
            self.summary.notices.append(
                f"{path.name}: stream names from the catalog of {Path(catalog.path).name} "
                "(the previous part, closed)"
            )
        follower = AdtfFollower(path, catalog)
        self._recording.by_id.clear()  # ids are per part; jobs go on by stream name
        last_growth, last_size = time.monotonic(), -1
        try:
            while not self._stop.is_set():
                t0 = time.monotonic_ns()
                poll = follower.poll()
                now = time.monotonic()
                if poll.size != last_size or poll.chunks:
                    last_size, last_growth = poll.size or 0, now
                idle = now - last_growth
                await self._publish(self._handle(path, follower, poll), t0)
                if poll.closed:
                    self.summary.differences += [str(d) for d in follower.differences]
                    self._closed_part = follower.final
                    return f"{path.name} closed"
                if idle >= cfg.idle_s:
                    return f"{path.name} did not grow for {cfg.idle_s:g} s"
                waiting = poll.chunks == 0 and idle >= min(cfg.idle_s, 1.0)
                if waiting and cfg.path.is_dir() and self._newer_part(path):
                    return f"{path.name} idle while a next part is written"
                await asyncio.sleep(0 if poll.more else cfg.poll_s)
            return "stopped"
        finally:
            left = follower.unread()
            if left:  # the part ended (idle, stopped) inside a chunk or on damage
                self.summary.quarantine.append(
                    f"{path.name} offset {follower.pos}: {left} bytes after the last complete "
                    "chunk were not published (a chunk cut short, or damage)"
                )
            self.summary.triggers += follower.triggers
            self.summary.type_changes += len(follower.type_changes)
            self.summary.provisional |= {
                follower.streams[s].name for s in follower.provisional if s in follower.streams
            }
            follower.close()

    def _newer_part(self, path: Path) -> bool:
        return any(str(p) not in self.summary.parts and p != path for p in _parts(self.config.path))

    # -- one poll -------------------------------------------------------------------------

    def _handle(self, path: Path, follower: AdtfFollower, poll: Poll) -> list[Produced]:
        rec = self._recording
        s = self.summary
        s.notices += poll.notices
        if poll.restarted:  # a new recording: its own clock, jobs and /tf_static
            s.restarts += 1
            self._finish_jobs()
            rec.clock = None
        for q in poll.quarantine:
            s.quarantine.append(f"{path.name} offset {q.offset} ({q.length} bytes): {q.reason}")
        if not poll.samples:
            return []
        produced: list[Produced] = []
        if rec.clock is None:
            rec.clock = _clock(follower, poll.samples[0])
            s.clock = rec.clock.method
            first_ns = poll.samples[0].time_ns + rec.clock.offset_ns
            rows, found = drive_rig(
                self.config.path if self.config.path.is_dir() else path.parent, first_ns
            )
            s.notices.append(found)
            if rows is not None:
                produced += self.topics.use_rig(rows, first_ns)
        jobs = rec.by_id
        for sample in poll.samples:
            job = jobs.get(sample[0])
            if job is None:
                job = jobs[sample[0]] = self._job(follower.streams[sample[0]], path)
            job.pending.append(sample)
        for job in {id(j): j for j in jobs.values()}.values():
            job.flush()
        s.samples += len(poll.samples)
        s.chunks += poll.chunks
        s.bytes += poll.bytes
        return produced + self.topics.messages(self.sink.take(), self.sink)

    def _job(self, stream: Stream, path: Path) -> Job | Substreams:
        rec = self._recording
        assert rec.clock is not None  # set by the first sample of the recording
        key = stream.name or f"stream{stream.stream_id}"
        job = rec.jobs.get(key)
        if job is None:
            mapping = self.config.stream_mapping
            job = stream_job(stream, key, path.name, self.sink, mapping, rec.clock)
            rec.jobs[key] = job
        return job

    def _finish_jobs(self) -> None:
        rec = self._recording
        for job in rec.jobs.values():
            job.finish()  # type: ignore[attr-defined]
        rec.jobs.clear()
        rec.by_id.clear()

    async def _publish(self, produced: list[Produced], t0: int) -> None:
        """One poll's messages to the server, merged by time (each topic's messages stay in
        order), then to the MCAP (flushed: whole chunks on disk). The lag is the server's:
        its clients do not wait for the MCAP's chunk to be compressed and written."""
        if not produced:
            return
        ids = await self._server_channels(produced)
        which = np.concatenate([np.full(len(p.times), i, np.int64) for i, p in enumerate(produced)])
        index = np.concatenate([np.arange(len(p.times)) for p in produced])
        times = np.concatenate([p.times for p in produced])
        order = np.argsort(times, kind="stable")
        if self.server is not None or self.on_message is not None:
            w, x, ts = which[order].tolist(), index[order].tolist(), times[order].tolist()
            for i, k, t in zip(w, x, ts, strict=True):
                payload = produced[i].messages.message(k)
                if self.server is not None:
                    await self.server.send(ids[i], t, bytes(payload))
                if self.on_message is not None:
                    self.on_message(produced[i].topic, t, payload)
        if self.server is not None:
            await self.server.broadcast_time(int(times.max()))
        self.summary.lag_ns.append(time.monotonic_ns() - t0)
        if self.mcap is not None:
            self._write_mcap(produced)
        for p in produced:
            self.summary.count(p.topic, p.type, len(p.times))

    def _write_mcap(self, produced: list[Produced]) -> None:
        """The poll's messages merged by time, as the server gets them (each topic's stay in
        order; a poll of one lane is written as built, without a copy), flushed. Written
        topic by topic, a first poll that catches up on a whole recording went back in time
        by its length between topics, and file-order readers played it seconds late."""
        assert self.mcap is not None
        ids = [self.mcap.channel(p.topic, p.type, p.topic in self.topics.latched) for p in produced]
        cids = np.concatenate(
            [np.full(len(p.times), c, np.uint16) for p, c in zip(produced, ids, strict=True)]
        )
        times, messages = produced[0].times, produced[0].messages
        if len(produced) > 1:
            times = np.concatenate([p.times for p in produced])
            order = np.argsort(times, kind="stable")
            cids, times = cids[order], times[order]
            messages = Serialized.concat([p.messages for p in produced]).take(order)
        self.mcap.output.write(cids, times, messages)
        self.mcap.flush()

    async def _server_channels(self, produced: list[Produced]) -> list[int]:
        """The server's channel of each topic; new ones are advertised and their first
        messages wait (SUBSCRIBE_WAIT_S at most) for the clients to subscribe."""
        out, new = [], []
        for p in produced:
            cid = self._channels.get(p.topic)
            if cid is None and self.server is not None:
                latched = p.topic in self.topics.latched
                cid = await self.server.add_channel(
                    channel_for(self.topics.types, p.topic, p.type, latched)
                )
                self._channels[p.topic] = cid
                new.append(cid)
            out.append(cid or 0)
        if new and self.server is not None:
            await self.server.wait_subscribed(new, SUBSCRIBE_WAIT_S)
        return out


def _clock(follower: AdtfFollower, first: Sample) -> RecordingClock:
    """The recording's offset to the master clock, as `adtf_clock.header_clock` finds it
    offline, from what is known while recording: chunk times on the epoch already; else the
    header's creation time at the first chunk (offline: at `time_offset`, which the writers
    we know set to the first chunk's time)."""
    if first.time_ns >= EPOCH_FLOOR_NS:
        return RecordingClock(0, "absolute: chunk times on the Unix epoch")
    h = follower.header
    if h is not None and h.file_time > 0:
        return RecordingClock(
            h.file_time * 1_000_000_000 - first.time_ns,
            "header: file creation time at the first chunk (±1 s; live)",
        )
    return RecordingClock(0, "relative: no absolute time in the file")


_PART = re.compile(r"^(?P<base>.+)_(?P<n>\d{3,})$")


def _parts(path: Path) -> list[Path]:
    """The recording(s) to follow: the file, or a folder's recordings in part order (name
    without part number, then part number: `rec.dat`, `rec_001.dat`, ...)."""
    if path.is_file():
        return [path]
    if not path.is_dir():
        return []

    def key(p: Path) -> tuple[str, int]:
        m = _PART.match(p.stem)
        return (m["base"], int(m["n"])) if m else (p.stem, 0)

    found = [p for p in path.iterdir() if p.suffix in RECORDING_SUFFIXES and p.is_file()]
    return sorted(found, key=key)


__all__ = ["POLL_S", "LiveBridge", "LiveConfig", "LiveTimeoutError"]
