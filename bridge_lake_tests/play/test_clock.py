"""The playback clock: deadlines at a rate, re-anchoring, groups handed over together."""

from __future__ import annotations

from bridge_lake.play.clock import TOGETHER_NS, PlaybackClock, next_group


def test_messages_due_within_together_go_at_the_middle_of_their_span():
    t = TOGETHER_NS
    deadlines = [0, 3_000, t, t + 1, 10 * t, 10 * t]
    assert next_group(deadlines, 0) == (3, t // 2)  # t + 1 is over TOGETHER_NS from the first
    assert next_group(deadlines, 3) == (4, t + 1)  # alone: at its own deadline
    assert next_group(deadlines, 4) == (6, 10 * t)  # one log time: one group


def test_every_message_of_a_group_is_within_half_together_of_its_hand_over():
    deadlines = sorted((i * 7_919) % 1_000_003 for i in range(5_000))
    i = 0
    while i < len(deadlines):
        j, at = next_group(deadlines, i)
        assert j > i
        assert all(abs(at - d) <= TOGETHER_NS // 2 for d in deadlines[i:j])
        assert j == len(deadlines) or deadlines[j] - deadlines[i] > TOGETHER_NS
        i = j


def test_deadlines_follow_the_rate_and_re_anchor_without_a_jump():
    clock = PlaybackClock(1_000, rate=2.0)
    clock.anchor(1_000, mono_ns=50_000)
    assert clock.deadline(1_000) == 50_000
    assert clock.deadline(3_000) == 51_000  # 2 µs of log time at 2x: 1 µs
    clock.rate = 0.5
    clock.anchor(3_000, mono_ns=51_000)
    assert clock.deadline(4_000) == 53_000
