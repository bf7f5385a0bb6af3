"""Every public NCLT reader takes a path as str or os.PathLike (issue 15)."""

from pathlib import Path

import pytest

from bridge_lake.formats.nclt import (
    iter_hokuyo,
    iter_scans,
    iter_velodyne_hits,
    load_table,
    locate_session,
    read_lb3_image,
    read_table,
    read_velodyne_sync,
)
from bridge_lake.synth.nclt import write_nclt_drive


@pytest.fixture(scope="module")
def session(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("nclt")
    write_nclt_drive(root, minutes=0.05, seed=3, hits_per_rev=200)
    return next(p for p in root.iterdir() if p.is_dir())


def test_readers_take_str_paths(session):
    s = str(session)
    assert read_table("gps", f"{s}/gps.csv").height > 0
    assert load_table("ms25", f"{s}/ms25.csv").frame.height > 0
    assert sum(b.num_rows for b in iter_velodyne_hits(f"{s}/velodyne_hits.bin")) > 0
    assert sum(1 for _ in iter_scans(f"{s}/velodyne_hits.bin")) > 0
    assert sum(b.num_rows for b in iter_hokuyo("hokuyo_30m", f"{s}/hokuyo_30m.bin")) > 0
    sync = next((session / "velodyne_sync").iterdir())
    assert read_velodyne_sync(str(sync)).num_rows > 0
    tiff = next((session / "lb3" / "Cam0").iterdir())
    assert read_lb3_image(str(tiff))["width"] > 0
    assert locate_session(str(session.parent)).files
