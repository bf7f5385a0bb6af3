"""DDL and stream-type XML (from recordings and `.description` sidecars) cannot expand
entities or reach the network: every parse goes through defusedxml, which refuses entity
declarations and external references before expat would resolve them."""

from __future__ import annotations

import ast
import threading
import time
import tracemalloc
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from bridge_lake.formats.adtf import Property, StreamType, open_dat, parse_ddl
from bridge_lake.formats.adtf.errors import DDLError, StreamIndexError
from bridge_lake.formats.adtf.samples import parse_stream_type
from bridge_lake.formats.adtf.writer import DatWriter

PACKAGE = Path(__file__).resolve().parents[2] / "bridge_lake"
STRUCT = "<struct name='S'><element name='a' type='tUInt8' arraysize='1'/></struct>"


def laughs(levels: int = 9) -> str:
    ents = ['<!ENTITY l0 "lol">'] + [
        f'<!ENTITY l{i} "{f"&l{i - 1};" * 10}">' for i in range(1, levels + 1)
    ]
    return f"<?xml version='1.0'?><!DOCTYPE ddl [{''.join(ents)}]><ddl>&l{levels};</ddl>"


@pytest.fixture
def server():
    """An HTTP server on 127.0.0.1 that records every request it gets."""
    hits: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            hits.append(self.path)
            body = b'<!ENTITY x "fetched">'
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", hits
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_server_fixture_sees_requests(server):
    """The oracle works: a plain fetch is recorded (so `not hits` below means something)."""
    import urllib.request

    url, hits = server
    with urllib.request.urlopen(f"{url}/probe") as r:
        assert r.read()
    assert hits == ["/probe"]


def test_billion_laughs_is_refused_without_expanding():
    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        with pytest.raises(DDLError, match="forbidden"):
            parse_ddl(laughs())
        with pytest.raises(StreamIndexError):
            parse_stream_type(laughs().replace("ddl", "stream"), path="f.dat", offset=7)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert time.perf_counter() - t0 < 2
    assert peak < 8 << 20  # 10^9 "lol"s would be 3 GB


def test_external_entities_and_dtds_reach_neither_files_nor_the_network(server, tmp_path):
    url, hits = server
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET")
    docs = [
        f'<!DOCTYPE ddl [<!ENTITY x SYSTEM "{secret.as_uri()}">]><ddl>{STRUCT}&x;</ddl>',
        f'<!DOCTYPE ddl [<!ENTITY x SYSTEM "{url}/entity">]><ddl>{STRUCT}&x;</ddl>',
        f'<!DOCTYPE ddl [<!ENTITY % p SYSTEM "{url}/param">%p;]><ddl>{STRUCT}</ddl>',
        f'<!DOCTYPE ddl SYSTEM "{url}/external.dtd"><ddl>{STRUCT}</ddl>',
        f'<!DOCTYPE ddl PUBLIC "-//x//EN" "{url}/public.dtd"><ddl>{STRUCT}</ddl>',
    ]
    for doc in docs:
        try:
            ddl = parse_ddl(doc)
        except DDLError as exc:
            assert "TOP-SECRET" not in str(exc)
        else:  # an external DTD that is not loaded leaves a plain DDL
            assert set(ddl.structs) == {"S"} and not ddl.constants
        try:
            parse_stream_type(doc.replace("<ddl>", "<stream meta_type='m'>").replace(
                "</ddl>", "</stream>"), path="f.dat", offset=0)  # fmt: skip
        except StreamIndexError as exc:
            assert "TOP-SECRET" not in str(exc)
    assert hits == []


def test_a_recording_carrying_an_entity_bomb_is_a_typed_error(tmp_path):
    path = tmp_path / "bomb.dat"
    with DatWriter(path, version=0x0500) as w:
        stype = StreamType(
            "adtf/default",
            {
                "md_struct": Property("cString", "S"),
                "md_definitions": Property("cString", laughs()),
            },
        )
        sid = w.add_stream("s", stream_type=stype)
        w.write_sample(sid, 0, b"\x01")
    with pytest.raises(DDLError) as err:
        open_dat(path)
    assert err.value.path == str(path)
    with open_dat(path, strict=False) as f:
        assert f.stream("s").ddl is None
        assert any(isinstance(e, DDLError) for e in f.issues.items)


def test_every_xml_parse_in_the_package_goes_through_defusedxml():
    """No module imports a parser of the standard library or lxml directly (ElementTree's
    Element type and saxutils' escaping do not parse)."""
    allowed = {("xml.etree.ElementTree", "Element"), ("xml.sax.saxutils", "escape")}
    allowed |= {("xml.sax.saxutils", "quoteattr")}
    bad = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                mods = [(a.name, None) for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                mods = [(node.module, a.name) for a in node.names]
            else:
                continue
            for mod, name in mods:
                parser = mod.split(".")[0] in ("xml", "lxml", "pyexpat", "xmltodict")
                if parser and (mod, name) not in allowed:
                    bad.append(f"{path.relative_to(PACKAGE)}: {mod} {name or ''}")
    assert not bad, bad
