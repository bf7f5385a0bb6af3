"""The production instance running here: PostgreSQL storage, dagster-daemon with the
QueuedRunCoordinator's per-drive limit, and lake_job's steps on two Celery workers (Redis).

One deployment for the module, set up as docs/deploy/README.md describes it: the instance
file is docs/deploy/dagster.celery.yaml as it is (runs in local processes, compute logs on
local disk without `tail` processes, run monitoring), PostgreSQL on a free port given by
DAGSTER_PG_PORT; the code runs in a gRPC code server; BRIDGE_LAKE_EXECUTOR=celery sends
every step to the workers; `dagster job backfill` submits the runs. Three synthetic drives
are backfilled, one of them twice at once: the queue must hold its second run until the
first has ended. Everything is then read back from PostgreSQL with psql, from /proc and from
the lake with pyarrow, not through Dagster.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import celery
import grpc
import pyarrow.parquet as pq
import pytest
import yaml
from grpc_health.v1 import health_pb2, health_pb2_grpc

from bridge_lake.defs import executors
from bridge_lake.synth import synthesize
from bridge_lake_tests.conftest import REPO, free_port
from bridge_lake_tests.deploy.servers import (
    Background,
    Postgres,
    postgres_server,
    redis_server,
    wait_until,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

BIN = Path(sys.executable).parent
CELERY_INSTANCE_YAML = REPO / "docs" / "deploy" / "dagster.celery.yaml"
CELERY_YAML = executors.CELERY_YAML
WORKERS = ("w1", "w2")
DONE = {"SUCCESS", "FAILURE", "CANCELED"}
RUNS_TIMEOUT_S = 720


@dataclass(frozen=True)
class Run:
    run_id: str
    status: str
    drive: str
    created: float
    start: float
    end: float


@dataclass
class Deployment:
    pg: Postgres
    landing: Path
    lake: Path
    drives: list[str]
    twice: str
    """The drive backfilled a second time while its first run was queued."""
    worker_pids: dict[str, set[int]]
    """Every process seen below each Celery worker we started, by worker name (/proc)."""

    def runs(self) -> list[Run]:
        rows = self.pg.sql(
            "select r.run_id, r.status, t.value, extract(epoch from r.create_timestamp),"
            " coalesce(r.start_time, 0), coalesce(r.end_time, 0) from runs r"
            " join run_tags t on t.run_id = r.run_id and t.key = 'dagster/partition'"
            " where r.pipeline_name = 'lake_job'"
        )
        return [Run(a, b, c, float(d), float(e), float(f)) for a, b, c, d, e, f in rows]


def instance_config() -> dict:
    """docs/deploy/dagster.celery.yaml as it is (every host, port and secret from the env)."""
    return yaml.safe_load(CELERY_INSTANCE_YAML.read_text())


def _serving(port: int) -> bool:
    """The code server answers the standard gRPC health check (what `dagster api
    grpc-health-check` asks, without starting a process per try)."""
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        request = health_pb2.HealthCheckRequest(service="DagsterApi")
        try:
            reply = health_pb2_grpc.HealthStub(channel).Check(request, timeout=2)
        except grpc.RpcError:
            return False
    return reply.status == health_pb2.HealthCheckResponse.SERVING


def _workers_ready(broker: str) -> bool:
    app = celery.Celery(broker=broker, backend=broker)
    replies = app.control.ping(timeout=1.0)
    return {name.split("@")[0] for reply in replies for name in reply} >= set(WORKERS)


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    import dagster as dg

    work = tmp_path_factory.mktemp("deploy")
    landing, lake, home = work / "landing", work / "lake", work / "home"
    timings: dict[str, float] = {}
    t0 = time.monotonic()
    with ExitStack() as stack:
        pg = stack.enter_context(postgres_server(free_port()))
        broker = stack.enter_context(redis_server(free_port(), work))
        timings["postgres_and_redis_s"] = time.monotonic() - t0
        drives = [d.drive_id for d in synthesize(landing, drives=3, minutes=0.1, light=True)]
        twice = drives[1]
        home.mkdir()
        (home / "dagster.yaml").write_text(yaml.safe_dump(instance_config()))
        instance_env = {
            "DAGSTER_HOME": str(home),
            "DAGSTER_PG_HOST": pg.host,
            "DAGSTER_PG_PORT": str(pg.port),
            "DAGSTER_PG_DB": "dagster",
            "DAGSTER_PG_USER": pg.user,
            "DAGSTER_PG_PASSWORD": pg.password,
        }
        t = time.monotonic()
        with pytest.MonkeyPatch.context() as mp:
            for key, value in instance_env.items():
                mp.setenv(key, value)
            # first touch of the database: creates Dagster's schema, before any server starts
            with dg.DagsterInstance.get() as instance:
                instance.add_dynamic_partitions("drives", drives)
        timings["schema_and_partitions_s"] = time.monotonic() - t
        grpc_port = free_port()
        workspace = work / "workspace.yaml"
        location = {"host": "127.0.0.1", "port": grpc_port, "location_name": "bridge_lake"}
        workspace.write_text(yaml.safe_dump({"load_from": [{"grpc_server": location}]}))
        env = {
            **os.environ,
            **instance_env,
            # dagster-celery starts `celery` from PATH
            "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
            "BRIDGE_LAKE_ROOT": str(lake),
            "BRIDGE_LAKE_LANDING": str(landing),
            "BRIDGE_LAKE_EXECUTOR": "celery",
            "BRIDGE_LAKE_CELERY_BROKER": broker,
        }

        def start(name: str, *argv: str) -> Background:
            server = Background(name, [str(BIN / argv[0]), *argv[1:]], env, work / f"{name}.log")
            stack.callback(server.stop)
            return server

        t = time.monotonic()
        serve = f"dagster api grpc -m bridge_lake.definitions -h 127.0.0.1 -p {grpc_port}"
        code = start("code-server", *serve.split())
        celery_worker = f"dagster-celery worker start -A dagster_celery.app -y {CELERY_YAML} -n"
        workers = {
            name: start(name, *celery_worker.split(), name, "--", "--concurrency=1")
            for name in WORKERS
        }
        servers = [code, *workers.values()]
        wait_until("code server", lambda: _serving(grpc_port), 180, *servers)
        timings["code_server_s"] = time.monotonic() - t
        # the operator's commands, all at once: the daemon may start the first runs while the
        # second backfill of `twice` is still being submitted (the test checks it was queued
        # before the first run of `twice` ended, so the per-drive limit had work to do)
        t = time.monotonic()
        backfill = ("dagster", "job", "backfill", "-w", str(workspace), "-j", "lake_job")
        commands = [
            (*backfill, "--partitions", ",".join(drives), "--noprompt"),
            (*backfill, "--partitions", twice, "--noprompt"),
            ("dagster", "schedule", "start", "nightly_stale_drives", "-w", str(workspace)),
        ]
        submitting = [
            subprocess.Popen(
                [str(BIN / c[0]), *c[1:]],
                env=env,
                cwd=work,
                text=True,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
            )
            for c in commands
        ]
        for proc in submitting:
            stack.callback(proc.kill)  # only if it hangs: a finished process is left alone
        daemon = start("dagster-daemon", "dagster-daemon", "run", "-w", str(workspace))
        for command, proc in zip(commands, submitting, strict=True):
            out, _ = proc.communicate(timeout=300)
            assert proc.returncode == 0, f"{' '.join(command)}:\n{out[-3000:]}"
        timings["submit_s"] = time.monotonic() - t
        wait_until("celery workers", lambda: _workers_ready(broker), 180, *servers)
        worker_pids: dict[str, set[int]] = {name: set() for name in WORKERS}
        deployment = Deployment(pg, landing, lake, drives, twice, worker_pids)

        def finished() -> bool:
            for name, worker in workers.items():
                worker_pids[name] |= worker.descendants()
            runs = deployment.runs()
            return len(runs) == len(drives) + 1 and all(r.status in DONE for r in runs)

        wait_until("backfill runs", finished, RUNS_TIMEOUT_S, daemon, *servers)
        timings["runs_s"] = time.monotonic() - t
        timings["total_s"] = time.monotonic() - t0
        print(f"\nproduction instance timings: {json.dumps(timings)}", file=sys.stderr)
        epoch0 = min(r.created for r in deployment.runs())
        for r in sorted(deployment.runs(), key=lambda r: r.created):
            print(
                f"  run {r.run_id[:8]} {r.drive:24s} {r.status:8s} queued {r.created - epoch0:5.1f}"
                f" start {r.start - epoch0:5.1f} end {r.end - epoch0:5.1f} s",
                file=sys.stderr,
            )
        yield deployment


def _overlap(a: Run, b: Run) -> bool:
    return a.start < b.end and b.start < a.end


def test_backfill_through_the_queue_runs_each_drive_once_at_a_time(deployment: Deployment):
    runs = deployment.runs()
    assert sorted(r.drive for r in runs) == sorted([*deployment.drives, deployment.twice])
    assert {r.status for r in runs} == {"SUCCESS"}, runs
    twice = [r for r in runs if r.drive == deployment.twice]
    first, second = sorted(twice, key=lambda r: r.created)
    # the second run was queued while the first was running, so the limit had work to do...
    assert second.created < first.end
    # ...and it held the second back until the first had ended
    assert second.start >= first.end
    for drive in deployment.drives:
        mine = [r for r in runs if r.drive == drive]
        assert not any(_overlap(a, b) for a in mine for b in mine if a != b)
    # the limit is per drive, not one queue for all: other drives ran beside the twice one
    others = [r for r in runs if r.drive != deployment.twice]
    assert any(_overlap(o, r) for o in others for r in (first, second))


def test_lake_holds_every_drive(deployment: Deployment):
    from bridge_lake.definitions import LAKE_ASSETS

    for drive in deployment.drives:
        folder = deployment.landing / drive
        on_disk = {
            p.relative_to(folder).as_posix(): p.stat().st_size
            for p in folder.rglob("*")
            if p.is_file()
        }
        manifest = pq.read_table(deployment.lake / "raw" / "manifest" / f"drive={drive}")
        listed = manifest.to_pydict()
        assert dict(zip(listed["path"], listed["size_bytes"], strict=True)) == on_disk
        sha = dict(zip(listed["path"], listed["sha256"], strict=True))
        assert sha["drive.yaml"] == hashlib.sha256((folder / "drive.yaml").read_bytes()).hexdigest()
        assert not (deployment.lake / "exports" / f"drive={drive}" / f"{drive}.mcap").exists()
        poses = pq.read_table(deployment.lake / "calibrated" / "poses" / f"drive={drive}")
        assert poses.num_rows > 0
    # every asset of lake_job recorded for every drive in the event log in PostgreSQL; the
    # drive backfilled twice, twice
    rows = deployment.pg.sql(
        "select asset_key, partition, count(*) from event_logs"
        " where dagster_event_type = 'ASSET_MATERIALIZATION' group by asset_key, partition"
    )
    counts = {(tuple(json.loads(key)), part): int(n) for key, part, n in rows}
    keys = {tuple(k.path) for a in LAKE_ASSETS for k in a.keys}
    expected = {(k, d): 1 + (d == deployment.twice) for k in keys for d in deployment.drives}
    assert counts == expected


def test_steps_of_each_drive_ran_on_both_celery_workers(deployment: Deployment):
    rows = deployment.pg.sql(
        "select run_id, step_key, event from event_logs where dagster_event_type = 'STEP_START'"
    )
    owner = {pid: name for name, pids in deployment.worker_pids.items() for pid in pids}
    workers_of_run: dict[str, set[str]] = {}
    for run_id, step_key, event in rows:
        pid = json.loads(event)["dagster_event"]["pid"]
        # a process below one of the workers we started, not the run's own process
        assert pid in owner, f"step {step_key} of run {run_id} ran in pid {pid}, no worker's"
        workers_of_run.setdefault(run_id, set()).add(owner[pid])
    assert len(workers_of_run) == len(deployment.drives) + 1
    assert set().union(*workers_of_run.values()) == set(WORKERS)
    # the steps of one drive's run spread over both workers: a run alone always does (three
    # of its steps can run at once and a worker holds at most one more than it runs), but
    # beside other runs one may get every step from the same worker, so ask it of one run
    assert any(used == set(WORKERS) for used in workers_of_run.values()), workers_of_run


def test_daemon_and_schedule_state_live_in_postgres(deployment: Deployment):
    daemons = {row[0] for row in deployment.pg.sql("select daemon_type from daemon_heartbeats")}
    assert {"QUEUED_RUN_COORDINATOR", "SCHEDULER", "SENSOR", "BACKFILL"} <= daemons
    states = deployment.pg.sql("select instigator_type, status, instigator_body from instigators")
    # the origin's name is stored under its pre-0.14 field name, job_name
    schedules = {
        json.loads(body)["origin"]["job_name"]: (kind, status) for kind, status, body in states
    }
    assert schedules["nightly_stale_drives"] == ("SCHEDULE", "RUNNING")
