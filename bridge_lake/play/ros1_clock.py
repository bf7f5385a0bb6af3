"""`bridge-lake play --ros1 --clock`: a /clock of the log time, as `rosbag play --clock`.

Nodes running with `use_sim_time` take their time from /clock (rosgraph_msgs/Clock). The
ticks are messages of a channel of their own merged into the played stream, every 1/hz s of
log time and before the messages they precede, so they are paced, faulted around, windowed
and counted like every other topic, and a node sees the clock reach a message's time no later
than the message.
"""

from __future__ import annotations

from collections.abc import Iterator

from bridge_lake.formats.ros.readers import RosChannel, RosMessage
from bridge_lake.formats.ros.ros1_form import CLOCK_TOPIC, clock_form, clock_message

CLOCK_CHANNEL_ID = -1
"""Sources number their channels from 0; the clock's id never meets one of theirs."""
DEFAULT_HZ = 100.0
"""rosbag play's default --hz."""


def clock_channel() -> RosChannel:
    form = clock_form()
    return RosChannel(
        CLOCK_CHANNEL_ID, CLOCK_TOPIC, form.type, "ros1msg", form.definition.encode(), "ros1"
    )


def with_clock(
    messages: Iterator[RosMessage], channel: RosChannel, start_ns: int, hz: float
) -> Iterator[RosMessage]:
    """`messages` with a clock tick at `start_ns`, then every 1/hz s of log time up to each
    message (ticks never go back: a file not in time order only delays them)."""
    period = max(1, round(1e9 / hz))
    tick = start_ns
    for m in messages:
        while tick <= m.log_time:
            yield RosMessage(channel, tick, clock_message(tick))
            tick += period
        yield m


__all__ = ["CLOCK_CHANNEL_ID", "DEFAULT_HZ", "clock_channel", "with_clock"]
