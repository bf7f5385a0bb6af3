"""Peak resident memory of the current process, for the benchmarks' child processes.

VmHWM belongs to the process image. `ru_maxrss` does not: a child started by
`subprocess.run` inherits its parent's high-water mark at exec, so a parent that just
synthesized a 30-minute drive (720 MB) made every child report at least 720 MB.
"""

from __future__ import annotations

import resource
from pathlib import Path


def peak_rss_mb() -> float:
    """This process's own peak resident set in MB (ru_maxrss where there is no /proc)."""
    status = Path("/proc/self/status")
    if status.exists():
        for line in status.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
