"""One damaged, truncated or empty recording never blocks its drive (issue 22, findings 3, 4):
it is a WARN naming the file and the reader's reason, the raw manifest and the quarantine
carry that reason, the rest of the drive lands, and the report agrees with the tables."""

from __future__ import annotations

import shutil
from html.parser import HTMLParser
from pathlib import Path

import dagster as dg
import polars as pl
import pytest

from bridge_lake.formats.adtf.writer import DatWriter
from bridge_lake.synth import synthesize
from bridge_lake_tests.defs import materialize_normalized
from bridge_lake_tests.testdata import ADTF_TESTDATA

TRUNCATED_REASON = "file has 1024 bytes, the IFHD header alone needs 2048"


def _no_samples(path: Path) -> None:
    """A well-formed ADTF 3 recording with two streams and not one sample."""
    with DatWriter(path, version=0x0400) as w:
        w.add_stream("front")
        w.add_stream("rear")


def _drive(landing: Path, drive_id: str, *files: str) -> Path:
    d = landing / drive_id
    d.mkdir(parents=True)
    (d / "drive.yaml").write_text("vehicle: test-car\nsource: adtf\n")
    real = (ADTF_TESTDATA / "test_type_seek.dat").read_bytes()
    for name in files:
        if name == "no_samples.dat":
            _no_samples(d / name)
        elif name == "zero.dat":
            (d / name).write_bytes(b"")
        elif name == "truncated.dat":
            (d / name).write_bytes(real[:1024])
        else:
            shutil.copy(ADTF_TESTDATA / name, d / name)
    return d


def _checks(result) -> dict[tuple[str, str], dg.AssetCheckEvaluation]:
    return {
        (e.asset_key.to_user_string(), e.check_name): e
        for e in result.get_asset_check_evaluations()
    }


def _read(lake: Path, layer: str, table: str, drive: str) -> pl.DataFrame:
    return pl.read_parquet(lake / layer / table / f"drive={drive}" / "*.parquet")


@pytest.fixture(scope="module")
def damaged_drive(tmp_path_factory):
    root = tmp_path_factory.mktemp("damaged")
    names = ("test_type_seek.dat", "one_empty_stream.dat", "no_samples.dat", "zero.dat")
    _drive(root / "landing", "d1", *names, "truncated.dat")
    result = materialize_normalized(root / "landing", root / "lake", "d1")
    return root / "lake", result


def test_an_empty_recording_beside_a_real_one_no_longer_blocks(tmp_path):
    """The reproduction of finding 3: before, `streams: completeness` (ERROR) failed naming
    no_samples.dat and test_type_seek.dat's 14 samples never landed."""
    _drive(tmp_path / "landing", "d1", "test_type_seek.dat", "no_samples.dat")
    result = materialize_normalized(tmp_path / "landing", tmp_path / "lake", "d1")
    assert result.success
    checks = _checks(result)
    assert checks[("normalized_streams", "completeness")].passed
    files = checks[("normalized_streams", "files")]
    assert not files.passed and files.severity == dg.AssetCheckSeverity.WARN
    assert files.description == (
        "1 files quarantined or damaged: no_samples.dat (empty recording: 2 streams, no samples)"
    )
    payloads = _read(tmp_path / "lake", "normalized", "adtf_payloads", "d1")
    assert payloads.group_by("stream").len().sort("stream").rows() == [("in1", 7), ("in2", 7)]


def test_each_damaged_file_is_a_warning_and_a_quarantine_row_with_its_reason(damaged_drive):
    lake, result = damaged_drive
    assert result.success
    checks = _checks(result)
    blocking = [k for k, e in checks.items() if not e.passed and e.severity.value == "ERROR"]
    assert blocking == []
    # the raw manifest: the reader's own reason, readable = false, "empty" for 0 bytes
    manifest = {r["path"]: r for r in _read(lake, "raw", "manifest", "d1").iter_rows(named=True)}
    assert (manifest["truncated.dat"]["readable"], manifest["truncated.dat"]["problem"]) == (
        False,
        TRUNCATED_REASON,
    )
    assert (manifest["zero.dat"]["readable"], manifest["zero.dat"]["problem"]) == (
        False,
        "empty file (0 bytes)",
    )
    assert manifest["test_type_seek.dat"]["readable"] and manifest["no_samples.dat"]["readable"]
    raw = checks[("raw_manifest", "formats_valid")]
    assert not raw.passed and raw.severity == dg.AssetCheckSeverity.WARN
    assert TRUNCATED_REASON in raw.description and "zero.dat (empty file" in raw.description
    assert checks[("raw_manifest", "no_unreadable_file")].passed  # no I/O error
    # one quarantine row per damaged file, with the reason
    q = _read(lake, "normalized", "quarantine", "d1").sort("source_file")
    assert q.select("source_file", "reason", "byte_length").rows() == [
        ("no_samples.dat", "empty recording: 2 streams, no samples", 7621),
        ("truncated.dat", f"unreadable recording: {TRUNCATED_REASON}", 1024),
        ("zero.dat", "empty file (0 bytes)", 0),
    ]
    files = checks[("normalized_streams", "files")]
    assert files.severity == dg.AssetCheckSeverity.WARN and not files.passed
    for name in ("no_samples.dat", "truncated.dat", "zero.dat"):
        assert name in files.description
    # the rest landed: both real recordings' samples (one_empty_stream's stream1 has none)
    payloads = _read(lake, "normalized", "adtf_payloads", "d1")
    assert dict(payloads.group_by("stream").len().rows()) == {"in1": 7, "in2": 7, "stream2": 2}


class _Tables(HTMLParser):
    """The cells of every <table id=...> of the report, row by row."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self._table: str | None = None
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self._table = dict(attrs).get("id")
            self.tables[self._table] = []
        elif tag == "tr" and self._table:
            self.tables[self._table].append([])
        elif tag == "td" and self._table:
            self._cell = []

    def handle_endtag(self, tag):
        if tag == "td" and self._cell is not None:
            self.tables[self._table][-1].append("".join(self._cell).strip())
            self._cell = None
        elif tag == "table":
            self._table = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def _report(result) -> dict[str, list[list[str]]]:
    """The tables of the report the run linked from normalized_streams."""
    mat = next(
        m
        for m in result.get_asset_materialization_events()
        if m.asset_key.to_user_string() == "normalized_streams"
    )
    parser = _Tables()
    parser.feed(Path(mat.materialization.metadata["report"].value).read_text(encoding="utf-8"))
    return {k: [r for r in v if r] for k, v in parser.tables.items()}


def test_the_report_agrees_with_the_tables(damaged_drive):
    lake, result = damaged_drive
    tables = _report(result)
    streams = _read(lake, "normalized", "streams", "d1")
    quarantine = _read(lake, "normalized", "quarantine", "d1")
    # streams: one row per stream, with the catalog's figures
    shown = {r[2]: (int(r[4]), int(r[5]), int(r[6]), int(r[7])) for r in tables["streams"]}
    assert shown == {
        r["stream"]: (
            r["records_read"],
            r["rows_written"],
            r["records_joined"],
            r["rows_quarantined"],
        )
        for r in streams.iter_rows(named=True)
    }
    # quarantine by reason: the quarantine table grouped by reason, nothing else
    by_reason = {r[0]: int(r[1]) for r in tables["quarantine"]}
    assert by_reason == dict(quarantine.group_by("reason").len().rows())
    assert sum(by_reason.values()) == quarantine.height == streams["rows_quarantined"].sum() == 3
    # files: every manifest row with its problem
    files = {r[0]: r[3] for r in tables["files"]}
    assert (
        files["truncated.dat"] == TRUNCATED_REASON and files["zero.dat"] == "empty file (0 bytes)"
    )


def test_a_drive_of_nothing_but_an_empty_recording_blocks_and_its_report_still_agrees(tmp_path):
    """Block only when the drive as a whole has nothing; the report of the rejected run must
    not say "nothing quarantined" beside a stream with a quarantined record."""
    _drive(tmp_path / "landing", "d2", "no_samples.dat")
    result = materialize_normalized(tmp_path / "landing", tmp_path / "lake", "d2")
    assert not result.success
    checks = _checks(result)
    failed = sorted(k for k, e in checks.items() if not e.passed and e.severity.value == "ERROR")
    assert failed == [("normalized_streams", "has_rows")]
    report = (tmp_path / "lake" / "reports" / "drive=d2" / "normalized.html").read_text()
    parser = _Tables()
    parser.feed(report)
    quarantined = {r[0]: r[1] for r in parser.tables["quarantine"] if r}
    assert quarantined == {"empty recording: 2 streams, no samples": "1"}
    assert "nothing quarantined" not in report


def test_empty_nclt_files_beside_a_real_one_are_quarantined_and_the_rest_lands(tmp_path):
    """The same for NCLT: 0-byte files of known kinds are "empty", one quarantine row each."""
    (made,) = synthesize(tmp_path / "s", drives=1, minutes=0.1, seed=4, source="nclt", light=True)
    date = "2012-01-08"
    d = tmp_path / "landing" / "n1" / date
    d.mkdir(parents=True)
    shutil.copy(made.path / "drive.yaml", d.parent / "drive.yaml")
    shutil.copy(made.path / date / "gps.csv", d / "gps.csv")
    (d / "ms25.csv").write_bytes(b"")
    (d / "velodyne_hits.bin").write_bytes(b"")
    result = materialize_normalized(tmp_path / "landing", tmp_path / "lake", "n1")
    assert result.success
    q = _read(tmp_path / "lake", "normalized", "quarantine", "n1").sort("source_file")
    assert q.select("source_file", "reason").rows() == [
        (f"{date}/ms25.csv", "empty file (0 bytes)"),
        (f"{date}/velodyne_hits.bin", "empty file (0 bytes)"),
    ]
    files = _checks(result)[("normalized_streams", "files")]
    assert files.severity == dg.AssetCheckSeverity.WARN and f"{date}/ms25.csv" in files.description
    assert _read(tmp_path / "lake", "normalized", "gnss", "n1").height > 0
