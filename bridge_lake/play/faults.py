"""Faults injected while playing: `--fault camera:drop=0.5%` without writing a variant.

The choices are `scenes.faults.plan_faults`'s, seeded the same way: a first pass over the
source collects each topic's log times (payloads are not kept), the plan says per message
of each topic whether it survives, its new log time, its stamp shift and whether it turns
black. While playing, `LiveFaults.apply` edits each message as it passes (stamps patched
and images blackened with the scenes' own functions) and a heap re-orders the survivors by
their new log times, holding a message no longer than the largest negative time shift.
Every fault applied goes into the report (topic, index in the topic, original and new time).
"""

from __future__ import annotations

import heapq
from array import array
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from bridge_lake.formats.ros.readers import Recording, RosMessage
from bridge_lake.formats.ros.stamps import definition_text, shift_stamps, stamp_positions
from bridge_lake.scenes.faults import (
    FaultError,
    FaultSpec,
    InjectionResult,
    TopicMessages,
    black_image,
    plan_faults,
)


class LiveFaults:
    def __init__(self, source: Recording, specs: Sequence[FaultSpec], seed: int) -> None:
        times: dict[int, array] = {cid: array("q") for cid in source.channels}
        for m in source.messages_in_time_order():  # as the player plays them
            times[m.channel.id].append(m.log_time)
        topics: dict[str, TopicMessages] = {}
        self._ids: dict[int, str] = {}
        for cid, ch in source.channels.items():
            if ch.message_encoding not in ("cdr", "ros1"):
                continue
            log = np.frombuffer(times[cid], np.int64).copy()
            n = len(log)
            empty = np.zeros(n, np.int64)
            text = definition_text(ch.schema_encoding, ch.schema_data)
            topics[ch.topic] = TopicMessages(
                ch.topic, cid, ch.type, ch.message_encoding, text, log, log, empty, None, empty
            )
            self._ids[cid] = ch.topic
        if not topics:
            raise FaultError(f"{source.path}: no ROS 1 or CDR topic to inject faults into")
        self.result = InjectionResult(source.path, seed, [s.compact() for s in specs], [])
        self.states = plan_faults(
            topics, specs, seed, source.start_ns, source.end_ns + 1, self.result
        )
        self.by_message: dict[tuple[str, int], list[Any]] = {}
        for f in self.result.faults:
            self.by_message.setdefault((f.topic, f.index), []).append(f)
        shifts = [0]
        for s in self.states.values():
            if len(s.log):
                shifts.append(int((s.log - s.msgs.log).min()))
        self.lead_ns = -min(shifts)
        self.end_ns = max(
            [source.end_ns] + [int(s.log.max()) for s in self.states.values() if len(s.log)]
        )
        """how long a message may have to wait for one moved earlier than it"""
        self.applied: list[dict[str, Any]] = []

    def stream(self, messages: Iterator[RosMessage], start_ns: int | None) -> Iterator[RosMessage]:
        """`messages` (from `start_ns`) with the faults applied, ordered by new log time."""
        counters = {
            topic: int(np.searchsorted(s.msgs.log, start_ns, "left")) if start_ns else 0
            for topic, s in self.states.items()
        }
        heap: list[tuple[int, int, RosMessage]] = []
        seq = 0
        for m in messages:
            topic = self._ids.get(m.channel.id)
            if topic is not None:
                k = counters[topic]
                counters[topic] = k + 1
                m = self._edit(topic, k, m)
                if m is None:
                    continue
            heapq.heappush(heap, (m.log_time, seq, m))
            seq += 1
            horizon = m.log_time if topic is None else self.states[topic].msgs.log[k]
            while heap and heap[0][0] <= horizon - self.lead_ns:
                yield heapq.heappop(heap)[2]
        while heap:
            yield heapq.heappop(heap)[2]

    def _edit(self, topic: str, k: int, m: RosMessage) -> RosMessage | None:
        s = self.states[topic]
        if k >= len(s.log):
            return m
        for f in self.by_message.get((topic, k), ()):
            self.applied.append(
                {
                    "kind": f.kind,
                    "topic": topic,
                    "index": k,
                    "orig_ns": f.orig_ns,
                    "new_ns": f.new_ns,
                    "spec": f.spec,
                }
            )
        if not s.present[k]:
            return None
        data = m.data
        enc = m.channel.message_encoding
        if s.black[k]:
            data = black_image(data, s.msgs.type, enc)
        if s.stamp_shift[k]:
            positions = stamp_positions(s.msgs.type, enc, data, s.msgs.definition)
            data = shift_stamps(data, positions, int(s.stamp_shift[k]), enc)
        new = int(s.log[k])
        if data is m.data and new == m.log_time:
            return m
        return RosMessage(m.channel, new, data)
