"""The ranged-playback messages against the bytes Foxglove's SDK encodes (its insta
snapshots of PlaybackControlRequest and PlaybackState, foxglove/foxglove-sdk)."""

from __future__ import annotations

import pytest

from bridge_lake.play.server import PLAYING, parse_playback_request, playback_state

SDK_PLAY_WITH_SEEK = (
    bytes([0x00, 0x00, 0x00, 0x80, 0x3F, 0x01, 0x15, 0xCD, 0x5B, 0x07, 0x00, 0x00, 0x00, 0x00])
    + bytes([0x07, 0x00, 0x00, 0x00])
    + b"some-id"
)
"""PlaybackControlRequest{Play, speed 1.0, seek 123_456_789, "some-id"} without its opcode"""
SDK_STATE_WITH_ID = (
    bytes([0x00, 0x39, 0x30, 0, 0, 0, 0, 0, 0, 0x00, 0x00, 0x80, 0x3F, 0x00, 0x0E, 0, 0, 0])
    + b"i-am-a-request"
)
"""PlaybackState{Playing, time 12345, speed 1.0, no seek, "i-am-a-request"} without opcode"""


def test_playback_control_request_as_the_sdk_encodes_it():
    r = parse_playback_request(bytes([3]) + SDK_PLAY_WITH_SEEK)
    assert (r.play, r.speed, r.seek_ns, r.request_id) == (True, 1.0, 123_456_789, "some-id")
    pause = bytearray(SDK_PLAY_WITH_SEEK)
    pause[0], pause[5] = 1, 0  # pause, no seek (the seek time is then ignored)
    r = parse_playback_request(bytes([3]) + bytes(pause))
    assert (r.play, r.seek_ns) == (False, None)


def test_playback_state_as_the_sdk_encodes_it():
    assert playback_state(PLAYING, 12345, 1.0, False, "i-am-a-request") == bytes([5]) + (
        SDK_STATE_WITH_ID
    )


@pytest.mark.parametrize(
    "data",
    [bytes([3, 0, 0]),  # too short
     bytes([3]) + SDK_PLAY_WITH_SEEK[:14] + b"\xff\x00\x00\x00abc",  # id runs past the end
     bytes([3, 7]) + SDK_PLAY_WITH_SEEK[1:]],  # command 7
)  # fmt: skip
def test_bad_requests_are_value_errors(data):
    with pytest.raises(ValueError):
        parse_playback_request(data)
