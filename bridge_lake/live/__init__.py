"""`bridge-lake live`: ADTF recordings followed while they are written, published as ROS
messages over Foxglove WebSocket and into a live MCAP, through the offline export's own
normalizer jobs, topic mapping and serializers (so online and offline agree)."""
