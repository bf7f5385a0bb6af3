"""One partition per drive, added at run time by the landing-zone sensor (or UI / CLI)."""

import dagster as dg

drives = dg.DynamicPartitionsDefinition(name="drives")
