"""`bridge-lake recover`: rewrite a recording cut short (MCAP, ROS 1 bag, ROS 2 bag folder,
ADTF .dat) as a valid indexed file, and say what was kept and what was lost.

The format work lives below, in formats/ros (record scanners, recovery writers) and
formats/adtf/recover.py; this package picks the format, runs it, and renders the report.
"""

from bridge_lake.formats.ros.damage import recovered_name
from bridge_lake.recover.run import Recovery, recover

__all__ = ["Recovery", "recover", "recovered_name"]
