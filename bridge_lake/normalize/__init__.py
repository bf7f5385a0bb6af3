"""Raw records → normalized tables: one schema per sensor kind, one master clock, per source."""
