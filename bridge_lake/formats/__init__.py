"""Readers and writers of the recording formats bridge_lake ingests."""
