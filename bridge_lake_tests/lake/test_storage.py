import json
import os
import posixpath
import signal
import subprocess
import sys
import textwrap

import duckdb
import polars as pl
import pyarrow as pa
import pytest

from bridge_lake.errors import BridgeLakeError, DriveIdError
from bridge_lake.lake import Lake
from bridge_lake.landing import LandingZone


def _table(n: int, offset: int = 0) -> pa.Table:
    return pa.table(
        {
            "time_ns": pa.array(range(offset, offset + n), pa.int64()),
            "v": pa.array([float(i) for i in range(n)], pa.float64()),
        }
    )


def test_round_trip_multi_part_and_readers_agree(tmp_path):
    lake = Lake(str(tmp_path / "lake"))
    files = lake.write_partition("normalized", "imu", "0001", _table(10), rows_per_part=4)
    assert [os.path.basename(f) for f in files] == [
        "part-00000.parquet",
        "part-00001.parquet",
        "part-00002.parquet",
    ]
    assert lake.read_partition("normalized", "imu", "0001").equals(_table(10))
    lake.write_partition("normalized", "imu", "0002", _table(3))
    root = tmp_path / "lake" / "normalized" / "imu"
    counts = duckdb.sql(
        f"select drive, count(*) from read_parquet('{root}/*/*.parquet', hive_partitioning=true, "
        "hive_types={'drive': VARCHAR}) group by drive order by drive"
    ).fetchall()
    assert counts == [("0001", 10), ("0002", 3)]
    lf = pl.scan_parquet(str(root) + "/", hive_schema={"drive": pl.String})
    assert lf.filter(pl.col("drive") == "0001").select(pl.len()).collect().item() == 10
    assert lake.drives("normalized", "imu") == ["0001", "0002"]


def test_replace_with_fewer_parts_removes_stale_parts(tmp_path):
    lake = Lake(str(tmp_path))
    lake.write_partition("raw", "t", "d", _table(10), rows_per_part=3)
    lake.write_partition("raw", "t", "d", _table(2))
    assert len(lake.partition_files("raw", "t", "d")) == 1
    assert lake.read_partition("raw", "t", "d").num_rows == 2
    assert not os.listdir(tmp_path / "_staging")


def test_identical_input_gives_identical_bytes(tmp_path):
    a, b = Lake(str(tmp_path / "a")), Lake(str(tmp_path / "b"))
    fa = a.write_partition("raw", "t", "d", _table(1000), rows_per_part=300)
    fb = b.write_partition("raw", "t", "d", _table(1000), rows_per_part=300)
    assert [open(x, "rb").read() for x in fa] == [open(x, "rb").read() for x in fb]


def test_empty_partition_keeps_its_schema(tmp_path):
    lake = Lake(str(tmp_path))
    lake.write_partition("raw", "t", "d", _table(0))
    got = lake.read_partition("raw", "t", "d")
    assert got.num_rows == 0 and got.schema.names == ["time_ns", "v"]


def test_exception_mid_write_leaves_previous_partition(tmp_path):
    lake = Lake(str(tmp_path))
    lake.write_partition("raw", "t", "d", _table(5))
    before = lake.partition_files("raw", "t", "d")
    with pytest.raises(RuntimeError, match="boom"):
        with lake.partition_writer("raw", "t", "d", _table(0).schema, rows_per_part=2) as w:
            w.write(_table(7, offset=100))
            raise RuntimeError("boom")
    assert lake.partition_files("raw", "t", "d") == before
    assert lake.read_partition("raw", "t", "d").equals(_table(5))
    assert not os.listdir(tmp_path / "_staging")


def test_killed_process_never_leaves_a_half_partition(tmp_path):
    """SIGKILL between two parts: readers still see exactly the old partition."""
    lake = Lake(str(tmp_path))
    lake.write_partition("raw", "t", "d", _table(5))
    script = textwrap.dedent(f"""
        import os, signal, pyarrow as pa
        from bridge_lake.lake import Lake
        lake = Lake({str(tmp_path)!r})
        t = pa.table({{"time_ns": pa.array(range(100), pa.int64()),
                       "v": pa.array([0.0] * 100, pa.float64())}})
        w = lake.partition_writer("raw", "t", "d", t.schema, rows_per_part=30)
        w.write(t)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    proc = subprocess.run([sys.executable, "-c", script], check=False)
    assert proc.returncode == -signal.SIGKILL
    assert lake.read_partition("raw", "t", "d").equals(_table(5))
    staged = os.listdir(tmp_path / "_staging")
    assert len(staged) == 1  # the dead run's scratch, outside every table
    root = tmp_path / "raw" / "t"
    n = duckdb.sql(f"select count(*) from read_parquet('{root}/*/*.parquet')").fetchall()[0][0]
    assert n == 5


def test_bad_drive_ids_cannot_write(tmp_path):
    lake = Lake(str(tmp_path / "lake"))
    for bad in ("../escape", "a/b", "..", ""):
        with pytest.raises(DriveIdError):
            lake.write_partition("raw", "t", bad, _table(1))
    assert not (tmp_path / "escape").exists()
    assert not any((tmp_path / "lake").rglob("*.parquet"))


def test_write_bytes_refuses_escape(tmp_path):
    lake = Lake(str(tmp_path / "lake"))
    path = lake.write_bytes("reports/drive=d/report.html", b"<html/>")
    assert open(path, "rb").read() == b"<html/>"
    with pytest.raises(BridgeLakeError):
        lake.write_bytes("../outside.txt", b"x")


def test_s3_round_trip_on_moto(s3_options, s3_bucket):
    lake = Lake(f"s3://{s3_bucket}/lake", s3_options)
    files = lake.write_partition("normalized", "imu", "d1", _table(10), rows_per_part=4)
    pdir = f"{s3_bucket}/lake/normalized/imu/drive=d1"
    (set_dir,) = {posixpath.dirname(f) for f in files}  # one set, named by the manifest
    assert posixpath.dirname(set_dir) == pdir
    assert [posixpath.basename(f) for f in files] == [f"part-0000{i}.parquet" for i in range(3)]
    assert json.loads(lake.fs.cat_file(f"{pdir}/_manifest.json"))["parts"] == [
        posixpath.basename(f) for f in files
    ]
    assert lake.read_partition("normalized", "imu", "d1").equals(_table(10))
    again = lake.write_partition("normalized", "imu", "d1", _table(3, offset=50))
    assert lake.partition_files("normalized", "imu", "d1") == again and len(again) == 1
    assert posixpath.dirname(again[0]) != set_dir
    assert lake.read_partition("normalized", "imu", "d1").equals(_table(3, offset=50))
    assert lake.drives("normalized", "imu") == ["d1"]
    assert lake.fs.find(f"{s3_bucket}/lake/_staging") == []
    assert lake.url(files[0]).startswith("s3://")
    # an independent reader over the S3 API sees the same rows
    import pyarrow.parquet as pq
    import s3fs

    fs = s3fs.S3FileSystem(**s3_options)
    assert pq.read_table(again[0], filesystem=fs).num_rows == 3
    assert pq.read_table(files[0], filesystem=fs).num_rows == 4  # replaced set kept a while


def test_s3_failed_write_keeps_previous_partition(s3_options, s3_bucket):
    lake = Lake(f"s3://{s3_bucket}/lake", s3_options)
    lake.write_partition("raw", "t", "d", _table(4))
    with pytest.raises(RuntimeError):
        with lake.partition_writer("raw", "t", "d", _table(0).schema, rows_per_part=2) as w:
            w.write(_table(9))
            raise RuntimeError("crash")
    assert lake.read_partition("raw", "t", "d").equals(_table(4))


def test_s3_landing_zone_scan_and_read(s3_options, s3_bucket):
    import s3fs

    fs = s3fs.S3FileSystem(**s3_options)
    fs.pipe(
        {
            f"{s3_bucket}/landing/d1/drive.yaml": b"vehicle: v\nsource: nclt\n",
            f"{s3_bucket}/landing/d1/sub/gps.csv": b"1,2\n",
            f"{s3_bucket}/landing/bad name/x.csv": b"1\n",
        }
    )
    zone = LandingZone(f"s3://{s3_bucket}/landing", s3_options)
    scan = zone.scan()
    assert list(scan.drives) == ["d1"] and "bad name" in scan.rejected
    assert [f.path for f in zone.files("d1")] == ["drive.yaml", "sub/gps.csv"]
    assert zone.read_head("d1", "sub/gps.csv", 10) == b"1,2\n"
    fs.pipe(f"{s3_bucket}/landing/d2/gps.csv", b"3\n")
    assert list(zone.scan().drives) == ["d1", "d2"]  # no stale listing cache


def test_s3_landing_zone_local_copy(s3_options, s3_bucket):
    import s3fs

    fs = s3fs.S3FileSystem(**s3_options)
    fs.pipe({f"{s3_bucket}/landing/d1/a/gps.csv": b"1,2\n", f"{s3_bucket}/landing/d1/b.dat": b"x"})
    zone = LandingZone(f"s3://{s3_bucket}/landing", s3_options)
    with zone.local_drive("d1") as local:
        assert (local / "a" / "gps.csv").read_bytes() == b"1,2\n"
        assert (local / "b.dat").read_bytes() == b"x"
    assert not local.exists()


def test_small_writes_are_gathered_into_row_groups(tmp_path):
    import pyarrow.parquet as pq

    lake = Lake(str(tmp_path))
    with lake.partition_writer("raw", "t", "d", _table(0).schema, row_group_rows=25) as w:
        for i in range(10):
            w.write(_table(10, offset=i * 10))
    (part,) = lake.partition_files("raw", "t", "d")
    meta = pq.ParquetFile(part).metadata
    assert [meta.row_group(i).num_rows for i in range(meta.num_row_groups)] == [25, 25, 25, 25]
    assert lake.read_partition("raw", "t", "d").column("time_ns").to_pylist() == list(range(100))


def test_replacing_a_partition_is_one_atomic_swap(tmp_path, monkeypatch):
    """With RENAME_EXCHANGE there is no moment without a partition: no two-step rename."""
    lake = Lake(str(tmp_path))
    lake.write_partition("raw", "t", "d", _table(5))

    def no_two_step(*args):
        raise AssertionError("partition was moved away before the new one was in place")

    monkeypatch.setattr(os, "replace", no_two_step)
    lake.write_partition("raw", "t", "d", _table(7))
    assert lake.read_partition("raw", "t", "d").num_rows == 7
    assert not os.listdir(tmp_path / "_staging")


def test_sweep_staging_removes_only_old_scratch(tmp_path):
    lake = Lake(str(tmp_path))
    lake.write_partition("raw", "t", "d", _table(1))
    old, fresh = tmp_path / "_staging" / "dead", tmp_path / "_staging" / "alive"
    old.mkdir()
    fresh.mkdir()
    os.utime(old, (1e9, 1e9))
    assert lake.sweep_staging() == [str(old)]
    assert fresh.exists() and not old.exists()


def test_local_drive_refuses_symlinks_out_of_the_drive(tmp_path):
    outside = tmp_path / "secret.csv"
    outside.write_text("1,2\n")
    (tmp_path / "landing" / "d1").mkdir(parents=True)
    (tmp_path / "landing" / "d1" / "ok.csv").write_text("3\n")
    zone = LandingZone(str(tmp_path / "landing"))
    with zone.local_drive("d1") as local:
        assert (local / "ok.csv").exists()
    os.symlink(outside, tmp_path / "landing" / "d1" / "gps.csv")
    with pytest.raises(BridgeLakeError, match="outside drive folder"):
        with zone.local_drive("d1"):
            pass


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_background_encoding_gives_the_same_partition(tmp_path, threads):
    """Parts encoded on background threads: same files, same order, same bytes."""
    batches = [_table(17, offset=i * 17) for i in range(20)]
    written = {}
    for name, n in (("base", 1), ("threads", threads)):
        lake = Lake(str(tmp_path / name))
        schema = batches[0].schema
        kwargs = dict(rows_per_part=70, row_group_rows=25, encode_threads=n)
        with lake.partition_writer("raw", "t", "d", schema, **kwargs) as w:
            for batch in batches:
                w.write(batch)
        written[name] = lake.partition_files("raw", "t", "d")
        assert lake.read_partition("raw", "t", "d").equals(pa.concat_tables(batches))
    assert len(written["threads"]) == 5  # 340 rows / 70
    assert [open(x, "rb").read() for x in written["threads"]] == [
        open(x, "rb").read() for x in written["base"]
    ]


def test_background_encoding_error_aborts_and_cleans_up(tmp_path, monkeypatch):
    import pyarrow.parquet as pq

    lake = Lake(str(tmp_path))
    lake.write_partition("raw", "t", "d", _table(4))
    real = pq.ParquetWriter.write_table

    def failing(self, table, *args, **kwargs):
        if table.column("time_ns")[0].as_py() >= 100:
            raise OSError("disk full")
        return real(self, table, *args, **kwargs)

    monkeypatch.setattr(pq.ParquetWriter, "write_table", failing)
    w = lake.partition_writer("raw", "t", "d", _table(0).schema, rows_per_part=50, encode_threads=2)
    with pytest.raises(OSError, match="disk full"):
        with w:
            for i in range(10):
                w.write(_table(30, offset=i * 30))
    assert lake.read_partition("raw", "t", "d").equals(_table(4))
    assert not os.listdir(tmp_path / "_staging")


def test_s3_background_encoding(s3_options, s3_bucket):
    lake = Lake(f"s3://{s3_bucket}/lake", s3_options)
    with lake.partition_writer(
        "raw", "t", "d", _table(0).schema, rows_per_part=30, encode_threads=2
    ) as w:
        w.write(_table(100))
    assert len(lake.partition_files("raw", "t", "d")) == 4
    assert lake.read_partition("raw", "t", "d").equals(_table(100))
