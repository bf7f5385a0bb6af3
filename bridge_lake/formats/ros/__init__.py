"""ROS 1 bags, ROS 2 bags and MCAP files: sniffing and bounded streaming readers.

`readers.open_recording` opens any of them and yields its messages as they are stored
(payload bytes, never decoded) with their channel's topic, schema and encodings, reading
one chunk at a time.
"""
