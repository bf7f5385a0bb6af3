"""bridge_lake: a Dagster data lake for autonomous-driving recordings."""

__version__ = "0.1.0"
