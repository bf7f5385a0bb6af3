"""The landing zone's one-listing scan gives every drive the fingerprint a listing of that
drive alone gives (the sensor's and the gap schedule's run keys depend on it)."""

import os

from bridge_lake.landing import LandingZone, fingerprint


def test_scan_fingerprints_equal_per_drive_listings(tmp_path):
    root = tmp_path / "landing"
    (root / "d1" / "sub").mkdir(parents=True)
    (root / "d1" / "a.dat").write_bytes(b"a")
    (root / "d1" / "sub" / "b.dat").write_bytes(b"bb")
    (root / "outside").mkdir()
    (root / "outside" / "o.dat").write_bytes(b"o")
    os.symlink("../outside", root / "d1" / "linked_folder")  # listed, not walked into
    os.symlink("sub/b.dat", root / "d1" / "linked_file")
    os.symlink("/nonexistent/x", root / "d1" / "dangling")
    (root / "d2").mkdir()
    (root / "d2" / "drive.yaml").write_text("vehicle: v\n")
    (root / "empty").mkdir()
    zone = LandingZone(str(root))
    scan = zone.scan()
    assert sorted(scan.drives) == ["d1", "d2", "outside"]
    for drive, fp in scan.drives.items():
        assert fp == fingerprint(zone.files(drive)), drive
    assert scan.totals["d1"] == (5, 1 + 2 + 2 + 0 + os.stat(root / "outside").st_size)
    (root / "d1" / "sub" / "b.dat").write_bytes(b"bbb")
    assert zone.scan().drives["d1"] != scan.drives["d1"]


def test_scan_on_s3_is_one_listing_with_the_same_fingerprints(s3_options, s3_bucket):
    import s3fs

    fs = s3fs.S3FileSystem(**s3_options)
    fs.pipe(
        {
            f"{s3_bucket}/fleet/landing/{d}/{name}": b"x" * i
            for i, d in enumerate(["d1", "d2", "d3"], 1)
            for name in ("drive.yaml", "rec/front.dat")
        }
    )
    zone = LandingZone(f"s3://{s3_bucket}/fleet/landing", s3_options)
    calls = []

    def counted(name):
        method = getattr(zone.fs, name)

        def call(path, *args, **kwargs):
            calls.append((name, path))
            return method(path, *args, **kwargs)

        return call

    originals = {name: zone.fs.__dict__.get(name) for name in ("find", "ls")}
    for name in originals:
        setattr(zone.fs, name, counted(name))
    try:
        scan = zone.scan()
    finally:  # the filesystem instance is cached and shared: put its methods back
        for name, method in originals.items():
            if method is None:
                delattr(zone.fs, name)
            else:
                setattr(zone.fs, name, method)
    assert calls == [("find", f"{s3_bucket}/fleet/landing")]  # not one per drive
    assert sorted(scan.drives) == ["d1", "d2", "d3"]
    for drive, fp in scan.drives.items():
        assert fp == fingerprint(zone.files(drive)), drive
    assert scan.totals["d3"] == (2, 6)
