"""drive.yaml: the collection metadata people write by hand."""

from __future__ import annotations

from pathlib import Path

from bridge_lake.drive_meta import parse_drive_yaml

MAX_LEN = 4 << 10


def seeds(work: Path) -> dict[str, bytes]:
    return {
        "nclt": b'vehicle: nclt-segway\nsource: nclt\nrecorded_at: "2012-01-08"\n',
        "adtf": b"vehicle: test-car\nsource: adtf\noperator: alice\nroute: ring road\n"
        b"weather: sunny\nnotes: x\ntags: [a, b]\ndeskew: true\nmapping: m.yaml\n"
        b"export_mapping: e.yaml\nrecorded_at: 2024-05-14\n",
        "anchors": b"base: &b {vehicle: v, source: adtf}\nvehicle: *b\nsource: adtf\n"
        b"tags: !!set {a, b}\nrecorded_at: 1.5\n",
    }


def one_input(data: bytes) -> None:
    meta = parse_drive_yaml(data)
    meta.to_yaml()
    meta.extra_json()
