"""Run by Debian's /usr/bin/python3 (where ROS 1's `rosbag` lives), not by the venv: reads a
bag message by message through rosbag's own API and prints one JSON object, per topic:
the datatype and md5sum of its connection, the message count, and a sha256 over the bytes
genpy serializes back from each *deserialized* message (so a message rosbag cannot decode,
or decodes to other values, shows up), plus the same over the raw record bytes."""

import hashlib
import json
import sys
from io import BytesIO

import rosbag  # Debian's, only under /usr/bin/python3


def main(path):
    out = {}
    with rosbag.Bag(path) as bag:
        raw = {}
        for topic, raw_msg, _t in bag.read_messages(raw=True):
            raw.setdefault(topic, hashlib.sha256()).update(raw_msg[1])
        for topic, msg, _t in bag.read_messages():
            t = out.setdefault(
                topic,
                {"type": msg._type, "md5sum": msg._md5sum, "messages": 0, "h": hashlib.sha256()},
            )
            buf = BytesIO()
            msg.serialize(buf)
            t["h"].update(buf.getvalue())
            t["messages"] += 1
    for topic, t in out.items():
        t["reserialized"] = t.pop("h").hexdigest()
        t["raw"] = raw[topic].hexdigest()
    json.dump(out, sys.stdout, sort_keys=True)


if __name__ == "__main__":
    main(sys.argv[1])
