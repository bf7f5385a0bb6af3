"""Partitions on an object store (moto's S3 server) are published as sets through a manifest:
a reader sees the whole old set or the whole new one, whatever moment it reads at."""

from __future__ import annotations

import json
import posixpath
import threading

import pyarrow as pa
import pytest

from bridge_lake.errors import FormatError
from bridge_lake.lake import Lake, partition_sets
from bridge_lake.lake.query import connect, scan

TABLE = ("normalized", "imu")


def _generation(gen: int, rows: int) -> pa.Table:
    return pa.table(
        {
            "time_ns": pa.array(range(rows), pa.int64()),
            "gen": pa.array([gen] * rows, pa.int64()),
        }
    )


def _seen(table: pa.Table) -> tuple[frozenset[int], int]:
    return frozenset(table.column("gen").to_pylist()), table.num_rows


class Observed:
    """Every way a user reads the lake, each returning (generations seen, rows)."""

    def __init__(self, lake: Lake, drive: str) -> None:
        self.lake, self.drive = lake, drive

    def partition(self) -> tuple[frozenset[int], int]:
        return _seen(self.lake.read_partition(*TABLE, self.drive))

    def duckdb(self) -> tuple[frozenset[int], int]:
        con = connect(self.lake)
        sql = "select gen from normalized_imu where drive = ?"
        rows = con.execute(sql, [self.drive]).fetchall()
        return frozenset(r[0] for r in rows), len(rows)

    def polars(self) -> tuple[frozenset[int], int]:
        frame = scan("imu", lake=self.lake, drives=[self.drive]).select("gen").collect()
        return _seen(frame.to_arrow())

    def all(self) -> dict[str, tuple[frozenset[int], int]]:
        return {"partition": self.partition(), "duckdb": self.duckdb(), "polars": self.polars()}


class ReadAfterEveryChange:
    """Stands in for the writer's filesystem: after each call that changes the store, every
    reader reads the partition, so each intermediate state of a publish is observed."""

    MUTATING = ("pipe_file", "pipe", "rm", "rm_file", "copy", "cp_file", "put_file", "mv")

    def __init__(self, fs, on_change) -> None:
        self._fs, self._on_change = fs, on_change

    def __getattr__(self, name):
        attr = getattr(self._fs, name)
        if name not in self.MUTATING:
            return attr

        def call(*args, **kwargs):
            out = attr(*args, **kwargs)
            self._on_change(name)
            return out

        return call

    def open(self, path, mode="rb", **kwargs):
        f = self._fs.open(path, mode, **kwargs)
        if "w" in mode:
            close = f.close

            def closing():
                close()
                self._on_change(f"upload {posixpath.basename(path)}")

            f.close = closing
        return f


def _writer_lake(lake: Lake, on_change) -> Lake:
    writer = Lake(lake.root, lake.storage_options)
    fs, base = writer._fs_and_base
    vars(writer)["_fs_and_base"] = (ReadAfterEveryChange(fs, on_change), base)
    return writer


def test_reader_during_republish_sees_old_or_new_set(s3_options, s3_bucket):
    lake = Lake(f"s3://{s3_bucket}/lake", s3_options)
    old, new = _generation(1, 10), _generation(2, 7)
    lake.write_partition(*TABLE, "d1", old, rows_per_part=4)  # 3 parts
    readers = Observed(Lake(lake.root, s3_options), "d1")
    assert set(readers.all().values()) == {_seen(old)}
    observations: list[tuple[str, dict]] = []
    writer = _writer_lake(lake, lambda what: observations.append((what, readers.all())))

    files = writer.write_partition(*TABLE, "d1", new, rows_per_part=3)  # 3 other parts

    steps = [what for what, _ in observations]
    assert steps[:3] == [f"upload part-0000{i}.parquet" for i in range(3)]
    assert "pipe_file" in steps  # the manifest: the one step that publishes
    for what, seen in observations:
        for reader, got in seen.items():
            assert got in (_seen(old), _seen(new)), f"{reader} after {what}: {got}"
    commit = steps.index("pipe_file")
    assert all(set(s.values()) == {_seen(old)} for _, s in observations[:commit])
    assert all(set(s.values()) == {_seen(new)} for _, s in observations[commit:])
    assert lake.partition_files(*TABLE, "d1") == files


def test_concurrent_reads_while_republishing(s3_options, s3_bucket):
    """Real threads: one re-publishes with a different number of parts each time, the other
    reads as fast as it can; every read is one whole generation."""
    lake = Lake(f"s3://{s3_bucket}/lake", s3_options)
    gens = {g: _generation(g, 3 + 2 * g) for g in range(1, 7)}
    lake.write_partition(*TABLE, "d1", gens[1], rows_per_part=2)
    done = threading.Event()

    def republish() -> None:
        try:
            for g in range(2, 7):
                lake.write_partition(*TABLE, "d1", gens[g], rows_per_part=2)
        finally:
            done.set()

    reader = Lake(lake.root, s3_options)
    seen = []
    thread = threading.Thread(target=republish)
    thread.start()
    while not done.is_set():
        seen.append(_seen(reader.read_partition(*TABLE, "d1")))
    thread.join()
    generation = {_seen(t): g for g, t in gens.items()}
    assert all(s in generation for s in seen), seen  # every read is one whole generation
    order = [generation[s] for s in seen]
    assert order == sorted(order), order  # one reader after another never goes back
    assert len(seen) >= 3 and len(set(order)) >= 2, order  # the reads overlapped the writes
    assert _seen(reader.read_partition(*TABLE, "d1")) == _seen(gens[6])


def test_replaced_sets_are_deleted_after_the_grace(s3_options, s3_bucket, monkeypatch):
    lake = Lake(f"s3://{s3_bucket}/lake", s3_options)
    pdir = lake.partition_dir(*TABLE, "d1")

    def sets() -> set[str]:
        lake.fs.invalidate_cache(pdir)
        return {p.split("/")[-2] for p in lake.fs.find(pdir) if p.endswith(".parquet")}

    first = lake.write_partition(*TABLE, "d1", _generation(1, 4))
    second = lake.write_partition(*TABLE, "d1", _generation(2, 4))
    name = lambda files: posixpath.basename(posixpath.dirname(files[0]))  # noqa: E731
    assert sets() == {name(first), name(second)}  # the replaced set stays for readers
    manifest = json.loads(lake.fs.cat_file(f"{pdir}/_manifest.json"))
    assert manifest["set"] == name(second) and list(manifest["superseded"]) == [name(first)]
    monkeypatch.setattr(partition_sets, "SUPERSEDED_GRACE_S", 0.0)
    third = lake.write_partition(*TABLE, "d1", _generation(3, 4))
    assert sets() == {name(third)}
    assert json.loads(lake.fs.cat_file(f"{pdir}/_manifest.json"))["superseded"] == {}


def test_killed_writer_leaves_an_invisible_set_swept_after_a_day(
    s3_options, s3_bucket, monkeypatch
):
    lake = Lake(f"s3://{s3_bucket}/lake", s3_options)
    lake.write_partition(*TABLE, "d1", _generation(1, 4))
    pdir = lake.partition_dir(*TABLE, "d1")
    dead = f"{pdir}/set-19700101T000000-deadbeef0000/part-00000.parquet"
    lake.fs.pipe_file(dead, b"a killed run's part")
    lake.fs.pipe_file(lake.partition_dir(*TABLE, "d2") + "/set-x/part-00000.parquet", b"x")
    assert lake.read_partition(*TABLE, "d1").equals(_generation(1, 4))
    assert lake.drives(*TABLE) == ["d1"]  # d2 was never published
    assert Observed(lake, "d1").all() == dict.fromkeys(
        ("partition", "duckdb", "polars"), _seen(_generation(1, 4))
    )
    lake.write_partition(*TABLE, "d1", _generation(2, 4))
    assert lake.fs.exists(dead)  # young: it may be a writer still uploading
    monkeypatch.setattr(partition_sets, "ORPHAN_MAX_AGE_S", -1.0)
    lake.write_partition(*TABLE, "d1", _generation(3, 4))
    lake.fs.invalidate_cache(pdir)
    assert not lake.fs.exists(dead)


def test_partition_written_before_manifests_is_read_then_replaced(s3_options, s3_bucket):
    lake = Lake(f"s3://{s3_bucket}/lake", s3_options)
    pdir = lake.partition_dir(*TABLE, "d1")
    import pyarrow.parquet as pq

    for i, rows in enumerate((3, 2)):
        with lake.fs.open(f"{pdir}/part-0000{i}.parquet", "wb") as f:
            pq.write_table(_generation(0, rows), f)
    assert lake.read_partition(*TABLE, "d1").num_rows == 5
    assert scan("imu", lake=lake).collect().height == 5
    lake.write_partition(*TABLE, "d1", _generation(1, 4))
    lake.fs.invalidate_cache(pdir)
    assert not lake.fs.exists(f"{pdir}/part-00000.parquet")
    assert _seen(lake.read_partition(*TABLE, "d1")) == _seen(_generation(1, 4))


def test_removed_partition_disappears_whole(s3_options, s3_bucket):
    lake = Lake(f"s3://{s3_bucket}/lake", s3_options)
    lake.write_partition(*TABLE, "d1", _generation(1, 9), rows_per_part=2)
    lake.write_partition(*TABLE, "d2", _generation(2, 1))
    lake.remove_partition(*TABLE, "d1")
    assert lake.partition_files(*TABLE, "d1") == [] and lake.drives(*TABLE) == ["d2"]
    assert lake.fs.find(lake.partition_dir(*TABLE, "d1")) == []
    assert scan("imu", lake=lake, drives=["d1"]).collect().height == 0


BAD_MANIFESTS = [
    b"not json",
    b'{"format": "other"}',
    b'{"format": "bridge_lake.partition/1", "set": "../../x", "parts": [], "published_at": 0}',
    b'{"format": "bridge_lake.partition/1", "set": "set-a", "parts": ["../p.parquet"],'
    b' "published_at": 0}',
    b'{"format": "bridge_lake.partition/1", "set": "set-a", "parts": [], "published_at": 0,'
    b' "superseded": {"set-b/..": 1}}',
]


def test_bad_manifest_is_a_format_error_naming_it(s3_options, s3_bucket):
    lake = Lake(f"s3://{s3_bucket}/lake", s3_options)
    for i, body in enumerate(BAD_MANIFESTS):
        path = lake.partition_dir(*TABLE, f"d{i}") + "/_manifest.json"
        lake.fs.pipe_file(path, body)
        with pytest.raises(FormatError) as err:
            lake.partition_files(*TABLE, f"d{i}")
        assert err.value.path == path, body
    with pytest.raises(FormatError):
        lake.drives(*TABLE)


def test_set_names_are_unique():
    names = {partition_sets.new_set_name() for _ in range(100)}
    assert len(names) == 100 and all(n.startswith("set-") for n in names)


def test_table_files_local_and_on_s3_agree(s3_options, s3_bucket, tmp_path):
    lakes = [Lake(str(tmp_path / "lake")), Lake(f"s3://{s3_bucket}/lake", s3_options)]
    found = []
    for lake in lakes:
        lake.write_partition(*TABLE, "d1", _generation(1, 5), rows_per_part=2)
        lake.write_partition(*TABLE, "d2", _generation(2, 1))
        files = lake.table_files(*TABLE)
        assert files == {d: lake.partition_files(*TABLE, d) for d in ("d1", "d2")}
        found.append({d: [posixpath.basename(f) for f in fs] for d, fs in files.items()})
    assert (
        found[0]
        == found[1]
        == {"d1": [f"part-0000{i}.parquet" for i in range(3)], "d2": ["part-00000.parquet"]}
    )
