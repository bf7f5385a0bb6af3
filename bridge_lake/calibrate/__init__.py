"""The calibrated layer: rig calibration, REP-103/105 frames, poses, synchronized key frames.

Pure library code (no Dagster): `rig` reads the vehicle's calibration files, `transforms` turns
a rig into static transforms and moves lidar points into base_link, `poses` makes the map
trajectory, `sync` matches every key frame to its nearest samples, `drive` runs it all for one
drive with write-audit-publish, and `quality` holds the checks.
"""
