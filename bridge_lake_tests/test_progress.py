"""Progress lines: throttled, with rate and ETA."""

from bridge_lake.progress import Progress


def test_lines_are_throttled_and_carry_rate_and_eta(monkeypatch):
    clock = iter([0.0, 1.0, 6.0, 7.0, 13.0, 20.0])
    monkeypatch.setattr("bridge_lake.progress.time.monotonic", lambda: next(clock))
    lines: list[str] = []
    p = Progress("export d1", lines.append, total=1000, unit="msgs")  # start at t = 0
    p.update(100, 1_000_000)  # t = 1: too soon
    p.update(600, 6_000_000)  # t = 6: a line
    p.update(700, 7_000_000)  # t = 7: too soon
    p.update(900, 9_000_000)  # t = 13: a line
    p.done()  # t = 20
    assert lines == [
        "export d1: 600 msgs of 1,000, 6.0 MB, 100 msgs/s, 6 s, ETA 4 s",
        "export d1: 900 msgs of 1,000, 9.0 MB, 69 msgs/s, 13 s, ETA 1 s",
        "export d1: 900 msgs of 1,000, 9.0 MB, 45 msgs/s, 20 s (done)",
    ]
