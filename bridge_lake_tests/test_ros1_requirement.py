"""The one rule for the ROS 1 tests (`ros1_graph.require`): they run where ROS 1 is
installed, skip only where apt has no ROS 1 packages, and fail where apt has them but they are
missing (so CI on Debian cannot go green by skipping)."""

from __future__ import annotations

import subprocess

import pytest

from bridge_lake_tests import ros1_graph


def _apt_offers_ros1() -> bool:
    try:
        r = subprocess.run(["apt-cache", "show", "ros-core"], capture_output=True, text=True)
    except FileNotFoundError:
        return False
    return r.returncode == 0


def test_missing_ros1_fails_where_apt_has_it_and_skips_where_not(monkeypatch):
    monkeypatch.setattr(ros1_graph, "NEEDED", ("/nonexistent/roscore",))
    if _apt_offers_ros1():
        with pytest.raises(pytest.fail.Exception, match="make ros1"):
            ros1_graph.require()
    monkeypatch.setenv("PATH", "/nonexistent")  # no apt-cache: no apt, no ROS 1 to install
    with pytest.raises(pytest.skip.Exception, match="apt has no ROS 1 packages"):
        ros1_graph.require()
