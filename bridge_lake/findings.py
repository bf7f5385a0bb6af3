"""A check's outcome as plain data: layers compute findings, the Dagster layer reports them.

Keeping the rules out of Dagster makes them testable as pure functions and the same for every
source; `defs/` turns each finding into an asset check result.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Finding:
    table: str
    check: str
    passed: bool
    error: bool
    """ERROR (blocking) or WARN."""
    metadata: dict[str, Any] = field(default_factory=dict)
    summary: str = ""
    """One line a person reads in the UI: what was checked and what was found."""
