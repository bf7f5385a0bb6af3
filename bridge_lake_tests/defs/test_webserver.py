"""The real UI server over our workspace: asset graph and drive partitions via GraphQL."""

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request

import dagster as dg

from bridge_lake.defs.raw import raw_manifest
from bridge_lake.defs.resources import LakeResource, LandingZoneResource
from bridge_lake_tests.conftest import REPO, free_port, make_adtf_drive

QUERY = """
{
  assetNodes { assetKey { path } groupName isPartitioned hasAssetChecks
               partitionDefinition { name type } }
  assetNodeOrError(assetKey: {path: ["raw_manifest"]}) {
    ... on AssetNode {
      partitionKeys
      assetMaterializations { partition metadataEntries { label } }
    }
  }
}
"""


def _post(url: str, query: str) -> dict:
    req = urllib.request.Request(
        url,
        data=json.dumps({"query": query}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.load(resp)


def _reset_sigint() -> None:
    # a server started from a non-interactive shell inherits SIGINT ignored and then
    # ignores SIGTERM too (Dagster maps it onto SIGINT); restore the default
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_webserver_serves_asset_graph_and_drive_partitions(tmp_path, landing):
    home = tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    make_adtf_drive(landing, "drive_a")
    make_adtf_drive(landing, "drive_b")
    with dg.DagsterInstance.local_temp(tempdir=str(home)) as instance:
        instance.add_dynamic_partitions("drives", ["drive_a", "drive_b"])
        result = dg.materialize(
            [raw_manifest],
            partition_key="drive_a",
            instance=instance,
            resources={
                "lake": LakeResource(root=str(tmp_path / "lake")),
                "landing": LandingZoneResource(root=str(landing)),
            },
        )
        assert result.success
    port = free_port()
    env = {
        **os.environ,
        "DAGSTER_HOME": str(home),
        "BRIDGE_LAKE_ROOT": str(tmp_path / "lake"),
        "BRIDGE_LAKE_LANDING": str(landing),
    }
    bindir = os.path.dirname(sys.executable)
    proc = subprocess.Popen(
        [
            os.path.join(bindir, "dagster-webserver"),
            "-w",
            str(REPO / "workspace.yaml"),
            "-h",
            "127.0.0.1",
            "-p",
            str(port),
        ],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        preexec_fn=_reset_sigint,
    )
    url = f"http://127.0.0.1:{port}/graphql"
    try:
        deadline = time.monotonic() + 90
        data = None
        while time.monotonic() < deadline:
            assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
            try:
                data = _post(url, QUERY)
                if data.get("data", {}).get("assetNodes"):
                    break
            except OSError:
                pass
            time.sleep(1)
        assert data is not None and "errors" not in data, data
        nodes = {tuple(n["assetKey"]["path"]): n for n in data["data"]["assetNodes"]}
        node = nodes[("raw_manifest",)]
        assert node["groupName"] == "raw" and node["isPartitioned"] and node["hasAssetChecks"]
        assert node["partitionDefinition"]["name"] == "drives"
        asset = data["data"]["assetNodeOrError"]
        assert asset["partitionKeys"] == ["drive_a", "drive_b"]
        mats = asset["assetMaterializations"]
        assert [m["partition"] for m in mats] == ["drive_a"]
        assert "dagster/row_count" in {e["label"] for e in mats[0]["metadataEntries"]}
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode is not None
