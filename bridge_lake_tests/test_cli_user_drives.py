"""`bridge-lake ingest` of the drives a new user brings (issue 22, findings 3, 4, 5, 9): an
empty and a truncated recording beside a real one, a drive whose vehicle has no rig, and an
NCLT drive of only gps.csv. None of them blocks: every drive lands, with a warning that says
why, and the Dagster instance's check records agree."""

from __future__ import annotations

import re
import shutil

import dagster as dg
from mcap.reader import make_reader

from bridge_lake.cli import main
from bridge_lake.formats.adtf.writer import DatWriter
from bridge_lake.lake.query import connect
from bridge_lake.synth import synthesize
from bridge_lake_tests.testdata import ADTF_TESTDATA

DATE = "2012-01-08"


def _landing(root):
    landing = root / "landing"
    damaged = landing / "damaged"
    damaged.mkdir(parents=True)
    (damaged / "drive.yaml").write_text("vehicle: test-car\nsource: adtf\n")
    shutil.copy(ADTF_TESTDATA / "test_type_seek.dat", damaged)
    with DatWriter(damaged / "empty.dat", version=0x0400) as w:
        w.add_stream("front")
    (damaged / "cut.dat").write_bytes((ADTF_TESTDATA / "test_type_seek.dat").read_bytes()[:1024])
    (rigless,) = synthesize(root / "s1", drives=1, minutes=0.05, seed=1, source="adtf", light=True)
    yaml_text = re.sub(
        r"vehicle: .*", "vehicle: no-rig-car", (rigless.path / "drive.yaml").read_text()
    )
    (rigless.path / "drive.yaml").write_text(yaml_text)
    shutil.move(rigless.path, landing / "rigless")
    (nclt,) = synthesize(root / "s2", drives=1, minutes=0.5, seed=2, source="nclt", light=True)
    (landing / "gps-only" / DATE).mkdir(parents=True)
    shutil.copy(nclt.path / "drive.yaml", landing / "gps-only")
    shutil.copy(nclt.path / DATE / "gps.csv", landing / "gps-only" / DATE)
    return landing


def test_ingest_lands_the_drives_a_new_user_brings(tmp_path, capsys, monkeypatch):
    landing = _landing(tmp_path)
    home = tmp_path / "home"
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    lake = tmp_path / "lake"
    assert main(["ingest", str(landing), "--lake", str(lake)]) == 0
    capsys.readouterr()
    warnings: dict[str, set[tuple[str, str]]] = {}
    with dg.DagsterInstance.from_config(str(home)) as instance:
        runs = instance.get_runs()
        assert len(runs) == 3 and all(r.is_success for r in runs)
        for run in runs:
            drive = run.tags["bridge_lake/drive"]
            for record in instance.all_logs(
                run.run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION
            ):
                e = record.dagster_event.event_specific_data
                assert e.passed or e.severity == dg.AssetCheckSeverity.WARN, (drive, e.check_name)
                if not e.passed:
                    warnings.setdefault(drive, set()).add(
                        (e.asset_key.to_user_string(), e.check_name)
                    )
    assert {("raw_manifest", "formats_valid"), ("normalized_streams", "files")} <= warnings[
        "damaged"
    ]
    assert ("calibrated_tf_static", "rig_found") in warnings["rigless"]
    con = connect(str(lake))
    rows = dict(
        con.sql("select drive, count(*) from normalized_adtf_payloads group by all").fetchall()
    )
    assert rows["damaged"] == 14  # test_type_seek.dat's samples landed
    quarantined = con.sql(
        "select source_file, reason from normalized_quarantine where drive = 'damaged' order by 1"
    ).fetchall()
    assert quarantined == [
        ("cut.dat", "unreadable recording: file has 1024 bytes, the IFHD header alone needs 2048"),
        ("empty.dat", "empty recording: 1 streams, no samples"),
    ]
    sources = dict(
        con.sql("select drive, any_value(source) from calibrated_poses group by all").fetchall()
    )
    assert sources == {"gps-only": "gnss"}  # the rig-less drive has no poses, no transforms
    assert (lake / "exports" / "drive=gps-only" / "waypoints.csv").is_file()
    # the whole-drive export is on demand: the rig-less drive exports, without transforms
    out = tmp_path / "rigless.mcap"
    assert main(["export", "--lake", str(lake), "--drive", "rigless", "--out", str(out)]) == 0
    with open(out, "rb") as f:
        topics = {c.topic for c in make_reader(f).get_summary().channels.values()}
    assert topics and not {"/tf", "/tf_static"} & topics
