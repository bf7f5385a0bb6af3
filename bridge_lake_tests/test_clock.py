import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from bridge_lake import clock

I64 = st.integers(min_value=clock.INT64_MIN, max_value=clock.INT64_MAX)


@given(st.integers(min_value=-clock.MAX_ABS_US, max_value=clock.MAX_ABS_US))
def test_us_ns_round_trip_is_exact(us):
    ns = clock.us_to_ns(np.array([us], dtype=np.int64))
    assert int(ns[0]) == us * 1000
    assert int(clock.ns_to_us(ns)[0]) == us


@given(st.integers(min_value=clock.MAX_ABS_US + 1, max_value=clock.INT64_MAX))
def test_us_to_ns_refuses_overflow(us):
    with pytest.raises(clock.ClockError):
        clock.us_to_ns(np.array([us], dtype=np.int64))
    with pytest.raises(clock.ClockError):
        clock.us_to_ns(np.array([-us], dtype=np.int64))


def test_us_to_ns_refuses_floats_and_big_unsigned():
    with pytest.raises(clock.ClockError):
        clock.us_to_ns(np.array([1.5]))
    with pytest.raises(clock.ClockError):
        clock.us_to_ns(np.array([2**63], dtype=np.uint64))


@given(st.integers(min_value=-(2**62), max_value=2**62))
def test_ros_round_trip_is_exact_and_normalised(ns):
    sec, nsec = clock.ns_to_ros(ns)
    assert 0 <= int(nsec) < 1_000_000_000
    assert int(clock.ros_to_ns(sec, nsec)) == ns


@given(st.integers(min_value=0, max_value=0xFFFFFFFF), st.integers(0, 999_999_999))
def test_ros1_stamp_covers_its_range(sec, nsec):
    assert clock.ros1_stamp(sec * 1_000_000_000 + nsec) == (sec, nsec)


def test_ros1_stamp_refuses_out_of_range():
    with pytest.raises(clock.ClockError):
        clock.ros1_stamp(-1)
    with pytest.raises(clock.ClockError):
        clock.ros1_stamp((0xFFFFFFFF + 1) * 1_000_000_000)


def test_utime_epochs_stay_exact():
    utime = np.array([1326030975000001, 1326030975000002], dtype=np.int64)  # 2012-01-08
    ns = clock.us_to_ns(utime)
    assert ns.tolist() == [1326030975000001000, 1326030975000002000]
    assert np.diff(ns).tolist() == [1000]


@pytest.mark.parametrize(("offset_ms", "drift_ppm"), [(0.0, 0.0), (-37.5, 12.0), (250.0, -80.0)])
def test_fit_recovers_offset_and_drift(offset_ms, drift_ppm):
    rng = np.random.default_rng(1)
    master = 1_700_000_000_000_000_000 + np.arange(0, 600 * 10**9, 10**7, dtype=np.int64)
    # device clock: sensor = master - offset - drift * (elapsed), plus 50 µs jitter
    elapsed = (master - master[0]).astype(np.float64)
    sensor = master - np.rint(offset_ms * 1e6 + drift_ppm * 1e-6 * elapsed).astype(np.int64)
    master_seen = master + rng.normal(0, 50_000, master.size).astype(np.int64)
    fit = clock.fit_clock(sensor, master_seen)
    assert fit.offset_ns == pytest.approx(offset_ms * 1e6, abs=5_000)
    assert fit.drift_ppm == pytest.approx(drift_ppm, abs=0.05)
    assert 40_000 < fit.residual_rms_ns < 60_000
    err = fit.to_master(sensor) - master
    assert np.abs(err).mean() < 5_000


def test_fit_ignores_outliers():
    master = np.arange(0, 10**11, 10**8, dtype=np.int64)
    sensor = master - 1_000_000
    master_seen = master.copy()
    master_seen[::97] += 400_000_000  # late deliveries
    fit = clock.fit_clock(sensor, master_seen)
    assert fit.offset_ns == pytest.approx(1_000_000, abs=1)
    assert abs(fit.drift_ppm) < 1e-6
    assert fit.outliers == len(master_seen[::97])


def test_fit_needs_two_distinct_times():
    with pytest.raises(clock.ClockError):
        clock.fit_clock(np.array([5, 5]), np.array([1, 2]))
    with pytest.raises(clock.ClockError):
        clock.fit_clock(np.array([1, 2, 3]), np.array([1, 2]))


def test_time_order_counts_backward_duplicates_and_gaps():
    t = np.array([0, 10, 20, 15, 30, 30, 40, 200, 210], dtype=np.int64)
    order = clock.time_order(t)
    assert order.backward == 1
    assert order.duplicates == 1
    assert order.median_period_ns == 10
    assert order.gaps == 1 and order.longest_gap_ns == 160


def test_stable_order_keeps_file_order_among_equal_times():
    t = np.array([5, 3, 5, 1, 3], dtype=np.int64)
    perm = clock.stable_order(t)
    assert perm.tolist() == [3, 1, 4, 0, 2]
    assert clock.stable_order(np.sort(t)) is None


@given(st.lists(st.integers(-(10**12), 10**12), min_size=0, max_size=200))
def test_stable_order_sorts(values):
    t = np.array(values, dtype=np.int64)
    perm = clock.stable_order(t)
    out = t if perm is None else t[perm]
    assert np.all(np.diff(out) >= 0)
    assert sorted(values) == out.tolist()


def test_fit_of_a_boot_time_device_clock_is_exact():
    """A device counting from power-on: master - sensor is ~1.7e18 ns."""
    master = 1_700_000_000_000_000_000 + np.arange(0, 60 * 10**9, 10**7, dtype=np.int64)
    sensor = master - master[0] + 12_345  # boot clock, no drift
    fit = clock.fit_clock(sensor, master)
    assert abs(fit.drift_ppm) < 1e-9
    assert fit.residual_max_ns < 1
    assert np.array_equal(fit.to_master(sensor), master)


def test_reorder_count_counts_records_a_stable_sort_moves_back():
    assert clock.reorder_count(np.array([1, 2, 3])) == 0
    assert clock.reorder_count(np.array([5, 1, 2, 6, 3])) == 3
    assert clock.reorder_count(np.array([2, 2, 1])) == 1
