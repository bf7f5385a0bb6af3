"""`bridge-lake scenes list` and `scenes validate` through the `bridge-lake` entry point: the
table of the event lake's scene catalog, a missing lake in one line, a folder made by
`scenes export` valid until one byte of one of its MCAPs changes."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from bridge_lake.cli import main
from bridge_lake.export.exporter import drive_span
from bridge_lake.lake import Lake
from bridge_lake.lake.schemas.scenes import CATALOG
from bridge_lake.scenes.sets import SETS, scene_set_to_lake
from bridge_lake_tests.scene_sets import writable_lake, write_catalog

LIST_HEADER = ["drive", "scene", "start s", "length s", "score", "tags", "rules", "scene set"]
VALIDATE_HEADER = ["file", "variant", "messages", "status", "problems"]
NS = 1_000_000_000


def table(out: str) -> tuple[list[str], list[list[str]], list[str]]:
    """A printed table cut into header, rows and the one line after it (the count), by the
    column spans of its rule line (dashes two spaces apart), so empty cells and cells holding
    blanks stay cells."""
    lines = out.splitlines()
    (at,) = [i for i, line in enumerate(lines) if re.fullmatch(r"-+(  -+)*", line)]
    spans = [m.span() for m in re.finditer(r"-+", lines[at])]

    def cells(line: str) -> list[str]:
        ends = [s for s, _ in spans[1:]] + [None]
        return [line[a:b].strip() for (a, _), b in zip(spans, ends, strict=True)]

    return cells(lines[at - 1]), [cells(r) for r in lines[at + 1 : -1]], lines[-1:]


def catalog_rows(lake: Lake, drives, tag: str | None = None) -> dict[tuple[str, str], tuple]:
    """(drive, scene id) → (start s from the drive's start, length s, score, tags, rules,
    scene set variants) read from the lake's scenes/catalog and scenes/sets; with `tag`,
    the scenes carrying it."""
    out = {}
    for drive in drives:
        first = drive_span(lake, drive)[0]
        variants: dict[str, list[str]] = {}
        if lake.has_partition(*SETS, drive):
            for r in lake.read_partition(*SETS, drive).to_pylist():
                variants.setdefault(r["scene_id"], []).append(r["variant"])
        for r in lake.read_partition(CATALOG.layer, CATALOG.name, drive).to_pylist():
            if tag is None or tag in r["tags"]:
                out[drive, r["scene_id"]] = (
                    (r["t_start_ns"] - first) / NS,
                    (r["t_end_ns"] - r["t_start_ns"]) / NS,
                    r["score"],
                    ",".join(r["tags"]),
                    ",".join(r["rules"]),
                    ",".join(variants.get(r["scene_id"], [])) or "-",
                )
    return out


def assert_list_output(out: str, expected: dict[tuple[str, str], tuple]) -> None:
    header, rows, rest = table(out)
    assert header == LIST_HEADER
    assert rest == [f"{len(expected)} scenes"]
    printed = {(r[0], r[1]): r[2:] for r in rows}
    assert len(printed) == len(rows) == len(expected), "one row per scene"
    assert set(printed) == set(expected)
    for key, (start, length, score, tags, rules, sets) in expected.items():
        row = printed[key]
        assert re.fullmatch(r"\d+\.\d\d", row[0]) and re.fullmatch(r"\d+\.\d\d", row[1]), row
        # the CLI rounds to ms (start_s, 3 decimals), the table shows 2: off by up to 5.5 ms
        assert float(row[0]) == pytest.approx(start, abs=0.0056), (key, row)
        assert float(row[1]) == pytest.approx(length, abs=0.0056), (key, row)
        assert float(row[2]) == pytest.approx(score, rel=5e-3), (key, row)
        assert (row[3], row[4], row[5]) == (tags, rules, sets), (key, row)


def test_scenes_list_prints_every_catalog_row(event_lake, scene_results, capsys, monkeypatch):
    """The rules' catalog of the event lake: every scene of both event drives, none of the
    calm one."""
    monkeypatch.delenv("BRIDGE_LAKE_ROOT", raising=False)
    expected = catalog_rows(event_lake.lake, scene_results)
    assert {d for d, _ in expected} == set(event_lake.planted), "the event drives have scenes"
    assert all(v[3] for v in expected.values()), "every scene has tags"
    assert main(["scenes", "list", "--lake", str(event_lake.root / "lake")]) == 0
    assert_list_output(capsys.readouterr().out, expected)


def test_scenes_list_by_drive_and_tag_names_the_scene_set(event_lake, tmp_path, capsys):
    """A hard-linked copy of the event lake with a hand-written catalog (tags that are not
    the rules' names) and one drive's scene set: `--drive D --tag T` lists that drive's scenes
    with the tag and the variants of their files."""
    lake = writable_lake(event_lake.lake, tmp_path / "lake")
    drive, other = event_lake.planted
    for d in (drive, other):
        scenes = [(f"{d}-a", 1.0, 3.0, ["braking"]), (f"{d}-b", 5.0, 7.0, ["turn", "braking"])]
        write_catalog(lake, d, [*scenes, (f"{d}-c", 9.0, 10.5, ["turn"])])
    scene_set_to_lake(lake, drive)
    expected = catalog_rows(lake, [drive], tag="braking")
    assert sorted(sid for _, sid in expected) == [f"{drive}-a", f"{drive}-b"]
    assert all(v[3] != v[4] and v[5] != "-" for v in expected.values()), expected
    argv = ["scenes", "list", "--lake", str(tmp_path / "lake"), "--drive", drive]
    assert main([*argv, "--tag", "braking"]) == 0
    assert_list_output(capsys.readouterr().out, expected)


def test_scenes_list_without_a_lake_is_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("BRIDGE_LAKE_ROOT", raising=False)
    missing = tmp_path / "no-lake-here"
    assert main(["scenes", "list", "--lake", str(missing)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines() == [
        f"bridge-lake: error: no lake at {missing} (give --lake or set BRIDGE_LAKE_ROOT)"
    ]


@pytest.fixture(scope="module")
def exported(event_lake, scene_results, tmp_path_factory) -> tuple[Path, str, str]:
    """The shortest scene of the event lake, exported by `scenes export` with one injected
    variant: (folder, clean file name, variant file name)."""
    drive, scene = min(
        ((d, r) for d, res in scene_results.items() for r in res.catalog.to_pylist()),
        key=lambda x: x[1]["t_end_ns"] - x[1]["t_start_ns"],
    )
    out = tmp_path_factory.mktemp("exported")
    argv = ["scenes", "export", "--lake", str(event_lake.root / "lake"), "--drive", drive]
    argv += ["--scene", scene["scene_id"], "--out", str(out), "--quiet"]
    assert main([*argv, "--inject", "imu:drop=2%", "--variant", "drop"]) == 0
    clean = sorted(p.name for p in out.glob("*.mcap") if scene["scene_id"] in p.name)
    assert len(clean) == 2 and len(list(out.glob("*.json"))) == 2, clean
    (variant,) = [n for n in clean if "drop" in n]
    (source,) = [n for n in clean if n != variant]
    return out, source, variant


def test_scenes_validate_passes_on_an_exported_folder(exported, capsys):
    folder, clean, variant = exported
    capsys.readouterr()
    assert main(["scenes", "validate", str(folder)]) == 0
    header, rows, rest = table(capsys.readouterr().out)
    assert header == VALIDATE_HEADER
    assert {r[0]: (r[1], r[3], r[4]) for r in rows} == {
        clean: ("clean", "ok", ""),
        variant: ("drop", "ok", ""),
    }
    assert len(rows) == 2
    assert rest == ["2/2 files valid"]


@pytest.mark.parametrize("which", ["clean", "variant"])
def test_scenes_validate_names_the_file_with_one_changed_byte(exported, which, tmp_path, capsys):
    source, clean, variant = exported
    folder = tmp_path / "scenes"
    shutil.copytree(source, folder)
    bad = folder / (clean if which == "clean" else variant)
    data = bytearray(bad.read_bytes())
    data[len(data) // 2] ^= 0xFF
    bad.write_bytes(bytes(data))

    assert main(["scenes", "validate", str(folder)]) == 1
    _, rows, rest = table(capsys.readouterr().out)
    status = {r[0]: (r[3], r[4]) for r in rows}
    assert set(status) == {clean, variant}
    assert status[bad.name][0] == "FAIL"
    assert "sha256 differs from the manifest" in status[bad.name][1]
    if which == "clean":  # the variant is checked against the file it was made from
        assert status[variant] == ("FAIL", f"source {clean} is not the file it was made from")
        assert rest == ["0/2 files valid"]
    else:
        assert status[clean] == ("ok", "")
        assert rest == ["1/2 files valid"]
