"""ROS 1 bags, ROS 2 bags and MCAP files: sniffing, bounded streaming readers, the ROS 1 /
ROS 2 (CDR) wire in both directions, record scanners and crash recovery.

`readers.open_recording` opens any recording and yields its messages as they are stored
(payload bytes, never decoded) with their channel's topic, schema and encodings, reading
one chunk at a time. `wire` holds the fixed-size layouts the exports write; `stamps` finds,
reads and shifts the header stamps inside serialized messages without a typestore (a type's
layout is known from the definition text the file carries). `mcap_scan` / `bag1_scan` walk a
file's records to find where its valid data ends; `mcap_recover` / `bag1_recover` /
`bag2_recover` rewrite a file cut short.
"""
