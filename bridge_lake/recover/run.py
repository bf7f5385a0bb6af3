"""Pick the format of a damaged recording, recover it, and render what was kept and lost."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from bridge_lake.cli_common import table_lines
from bridge_lake.errors import BridgeLakeError
from bridge_lake.formats.adtf import ifhd
from bridge_lake.formats.adtf.errors import AdtfError
from bridge_lake.formats.adtf.recover import AdtfRecovery, recover_dat
from bridge_lake.formats.ros.bag1_recover import recover_bag1
from bridge_lake.formats.ros.bag2_recover import recover_bag2
from bridge_lake.formats.ros.damage import RosFormatError, ScanReport
from bridge_lake.formats.ros.files import BAG1_MAGIC, MCAP_MAGIC
from bridge_lake.formats.ros.mcap_recover import recover_mcap

ADTF_SUFFIXES = (".dat", ".adtfdat")


class RecoverError(BridgeLakeError):
    """A recovery that cannot start: unknown format, output exists, input missing."""


@dataclass
class Recovery:
    source: str
    out: str
    format: str
    """mcap | bag1 | bag2 | adtf"""
    report: ScanReport | AdtfRecovery

    @property
    def damaged(self) -> bool:
        r = self.report
        return bool(r.damages) if isinstance(r, ScanReport) else bool(r.problems)

    def to_json(self) -> dict:
        return {
            "source": self.source,
            "out": self.out,
            "damaged": self.damaged,
            **self.report.to_json(),
        }

    def render(self) -> str:
        r = self.report
        if isinstance(r, ScanReport):
            head = f"{self.source} ({self.format}) -> {self.out}"
            rows = [["topic", "type", "kept", "dropped"]] + [
                [t.topic, t.type, str(t.kept), str(t.dropped)]
                for t in sorted(r.topics.values(), key=lambda t: t.topic)
            ]
            lines = [head, *(f"  {line}" for line in r.diagnosis())]
            lines += table_lines(rows, indent="  ", rule=True, right=(2, 3))
            lines.append(f"  total: kept {r.kept} messages, dropped {r.dropped}")
            return "\n".join(lines)
        head = f"{self.source} (adtf 0x{r.version:04x}) -> {self.out}"
        lines = [head, *(f"  {p}" for p in r.problems)]
        lines.append(
            f"  kept {r.chunks} complete chunks; {r.lost_bytes} bytes after the last complete "
            f"chunk at {r.valid_end}"
        )
        rows = [["id", "stream", "named from", "samples", "triggers", "types"]] + [
            [str(s.stream_id), s.name, s.source, str(s.samples), str(s.triggers), str(s.types)]
            for s in sorted(r.streams.values(), key=lambda s: s.stream_id)
        ]
        return "\n".join(lines + table_lines(rows, indent="  ", rule=True, right=(0, 3, 4, 5)))


def input_format(path: Path, catalog: Path | None = None) -> str:
    """mcap | bag1 | bag2 | adtf, by content (a folder is a ROS 2 bag)."""
    if path.is_dir():
        return "bag2"
    with path.open("rb") as f:
        head = f.read(ifhd.HEADER_SIZE)
    if head.startswith(MCAP_MAGIC):
        return "mcap"
    if head.startswith(BAG1_MAGIC):
        return "bag1"
    if head[:4] == ifhd.MAGIC:
        return "adtf"
    blank = len(head) == ifhd.HEADER_SIZE and not any(head)
    if blank and catalog is not None and path.suffix.lower() in ADTF_SUFFIXES:
        return "adtf"  # an ADTF writer that never wrote its header; the catalog says which
    raise RecoverError(
        f"{path}: neither an MCAP file, a ROS 1 bag, a ROS 2 bag folder nor an ADTF recording"
        + (" (its first 2048 bytes are zero: give --catalog-from)" if blank else "")
    )


def recover(
    src: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    catalog_from: str | os.PathLike[str] | None = None,
    names: dict[int, str] | None = None,
    force: bool = False,
) -> Recovery:
    """Recover `src` into `out` (never over `src`; an existing `out` only with `force`)."""
    src, out = Path(src), Path(out)
    catalog = Path(catalog_from) if catalog_from is not None else None
    if not src.exists():
        raise RecoverError(f"{src}: no such file or folder")
    if out.resolve() == src.resolve():
        raise RecoverError(f"{out}: recover never writes over its input")
    if out.exists() and not force:
        raise RecoverError(f"{out} exists (give --force to replace it)")
    if catalog is not None and not catalog.is_file():
        raise RecoverError(f"{catalog}: no such catalog recording")
    fmt = input_format(src, catalog)
    if out.exists() and out.is_dir() != (fmt == "bag2"):
        raise RecoverError(f"{out} exists and is {'a folder' if out.is_dir() else 'a file'}")
    if out.is_dir():
        shutil.rmtree(out)
    elif out.exists():
        out.unlink()
    try:
        if fmt == "mcap":
            report: ScanReport | AdtfRecovery = recover_mcap(src, out)
        elif fmt == "bag1":
            report = recover_bag1(src, out)
        elif fmt == "bag2":
            report = recover_bag2(src, out)
        else:
            report = recover_dat(src, out, catalog=catalog, names=names)
    except (RosFormatError, AdtfError) as exc:
        raise RecoverError(str(exc)) from exc
    return Recovery(str(src), str(out), fmt, report)
