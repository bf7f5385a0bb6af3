"""Exports of lake drives to ROS 1 bags, ROS 2 bags and MCAP."""
