"""ROS 1 bags, ROS 2 bags and MCAP files: sniffing, bounded streaming readers, record
scanners and crash recovery.

`readers.open_recording` opens any of them and yields its messages as they are stored
(payload bytes, never decoded) with their channel's topic, schema and encodings, reading
one chunk at a time. `mcap_scan` / `bag1_scan` walk a file's records to find where its valid
data ends; `mcap_recover` / `bag1_recover` / `bag2_recover` rewrite a file cut short.
"""
