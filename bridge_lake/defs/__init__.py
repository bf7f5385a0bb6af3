"""The Dagster layer: thin assets, checks, sensors and schedules over the pure library."""
