"""Publish latency as a Flink user feels it through ctasd's catalog jar:
plain `CREATE TABLE lake.`default`.t AS SELECT …` on a real Flink 2.3
cluster whose `lib/` holds the jar (`flink/build.sh`, built here), onto a
`filesystem` catalog of a ctasd release build on its embedded SQLite store.

Each statement's job ends in Flink; the jar's `commit` (run by the
JobManager right after FINISHED) reports it to ctasd, which publishes the
staging. For each job this prints how long after Flink's `end-time`:
- ctasd recorded the report (the commit action's `created_at`),
- ctasd's commit was done (its `updated_at`),
- the table was on the target (its directory in the warehouse, looked for
  every millisecond),
- the table was readable through ctasd (`GET …/tables/<t>`, every 5 ms),
as p50 / p99 / max over the jobs. The statements run one after another
from one Flink client, as a user's script runs them.

    CTASD_TEST_FLINK_HOME=$(python -c 'import os,pyflink;print(os.path.dirname(pyflink.__file__))') \\
    CTASD_TEST_FLINK_PYTHON=$VENV/bin/python \\
    python3 benches/flink_publish.py [--jobs 40] [--rows 100] [--ctasd target/release/ctasd]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from datetime import datetime

from flink_cluster import Cluster, free_port, get_json

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

DRIVER = """
import json, sys
from pyflink.table import DataTypes, EnvironmentSettings, TableEnvironment
spec = json.load(open(sys.argv[1]))
t_env = TableEnvironment.create(EnvironmentSettings.in_batch_mode())
t_env.execute_sql(f"CREATE CATALOG lake WITH ('type' = 'ctasd', 'url' = '{spec['url']}')")
t_env.get_config().set("table.rtas-ctas.atomicity-enabled", "true")
schema = DataTypes.ROW([DataTypes.FIELD("id", DataTypes.BIGINT()), DataTypes.FIELD("note", DataTypes.STRING())])
rows = [(i, f"row {i}") for i in range(spec["rows"])]
t_env.create_temporary_view("orders", t_env.from_elements(rows, schema))
for n in range(spec["jobs"]):
    result = t_env.execute_sql(
        f"CREATE TABLE lake.`default`.t{n} WITH ('format' = 'csv') AS SELECT id, note FROM orders")
    result.wait()
    print(f"JOB t{n} {result.get_job_client().get_job_id()}", flush=True)
"""


def ms(rfc3339):
    return datetime.fromisoformat(rfc3339.replace("Z", "+00:00")).timestamp() * 1000


def post_json(url, body):
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"content-type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as answer:
        return json.load(answer)


def readable(url):
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            answer.read()
            return True
    except urllib.error.HTTPError as refused:
        if refused.code == 404:
            return False
        raise


class Lookout(threading.Thread):
    """Notes when each table first shows on the target (a directory in the
    warehouse) and through ctasd. The statements run one after another,
    so it looks only for the first table not yet seen both ways."""

    def __init__(self, tables, warehouse, ctasd):
        super().__init__(daemon=True)
        self.tables, self.warehouse, self.ctasd = tables, warehouse, ctasd
        self.on_target, self.through_ctasd = {}, {}
        self.done = threading.Event()

    def run(self):
        next_ctasd_look = 0.0
        while not self.done.is_set():
            pending = [t for t in self.tables if t not in self.on_target or t not in self.through_ctasd]
            if not pending:
                return
            table = pending[0]
            now = time.time()
            if table not in self.on_target and os.path.isdir(os.path.join(self.warehouse, table)):
                self.on_target[table] = now * 1000
            if table not in self.through_ctasd and now >= next_ctasd_look:
                next_ctasd_look = now + 0.005
                if readable(f"{self.ctasd}/v1/catalogs/lake/databases/default/tables/{table}"):
                    self.through_ctasd[table] = now * 1000
            time.sleep(0.001)


def start_ctasd(binary, workdir):
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = open(os.path.join(workdir, "ctasd.log"), "w")
    server = subprocess.Popen([binary, "serve", "--listen", f"127.0.0.1:{port}",
                               "--data-dir", os.path.join(workdir, "ctasd-data")],
                              stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    deadline = time.time() + 30
    while True:
        try:
            get_json(f"{base}/readyz")
            return server, base
        except OSError:
            if server.poll() is not None or time.time() > deadline:
                sys.exit(f"ctasd did not start; see {log.name}")
            time.sleep(0.1)


def quantiles(values):
    values = sorted(values)
    at = lambda q: values[min(len(values) - 1, int(q * len(values)))]
    return f"{at(0.5):.0f} / {at(0.99):.0f} / {values[-1]:.0f} ms"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=40)
    parser.add_argument("--rows", type=int, default=100)
    parser.add_argument("--ctasd", default=os.path.join(ROOT, "target/release/ctasd"))
    args = parser.parse_args()
    if not os.access(args.ctasd, os.X_OK):
        sys.exit(f"no ctasd at {args.ctasd}: build it first (cargo build --release), or name one with --ctasd")
    home, python = os.environ["CTASD_TEST_FLINK_HOME"], os.environ["CTASD_TEST_FLINK_PYTHON"]
    subprocess.run([os.path.join(ROOT, "flink/build.sh")], env=dict(os.environ, FLINK_HOME=home),
                   check=True, stdout=subprocess.DEVNULL)
    jar = os.path.join(ROOT, "target/flink/ctasd-flink.jar")
    with tempfile.TemporaryDirectory() as workdir:
        server, ctasd = start_ctasd(args.ctasd, workdir)
        cluster = Cluster(home, python, workdir, lib_jars=[jar])
        try:
            warehouse = os.path.join(workdir, "warehouse", "default")
            os.makedirs(warehouse)
            post_json(f"{ctasd}/v1/catalogs", {"name": "lake", "options": {
                "type": "filesystem", "path": os.path.dirname(warehouse), "default-database": "default"}})
            cluster.start()
            tables = [f"t{n}" for n in range(args.jobs)]
            lookout = Lookout(tables, warehouse, ctasd)
            lookout.start()
            driver, spec = os.path.join(workdir, "driver.py"), os.path.join(workdir, "spec.json")
            open(driver, "w").write(DRIVER)
            json.dump({"url": ctasd, "jobs": args.jobs, "rows": args.rows}, open(spec, "w"))
            began = time.time()
            ran = cluster.run_python(driver, spec, capture_output=True, text=True)
            if ran.returncode != 0:
                sys.exit(f"the statements failed:\n{ran.stdout}\n{ran.stderr}\n{cluster.log_tail()}")
            took = time.time() - began
            lookout.join(timeout=10)
            lookout.done.set()
            flink_ids = dict(line.split()[1:] for line in ran.stdout.splitlines() if line.startswith("JOB "))
            steps = {"report recorded": [], "commit done": [], "on the target": [], "readable through ctasd": []}
            for table in tables:
                ended = get_json(f"{cluster.base}/jobs/{flink_ids[table]}")["end-time"]
                [job] = get_json(f"{ctasd}/v1/jobs?engine_job_id={flink_ids[table]}")["jobs"]
                job = get_json(f"{ctasd}/v1/jobs/{job['id']}")
                [commit] = [a for a in job["actions"] if a["trigger"] == "FINISHED" and a["action"] == "commit"]
                assert commit["state"] == "done", commit
                steps["report recorded"].append(ms(commit["created_at"]) - ended)
                steps["commit done"].append(ms(commit["updated_at"]) - ended)
                steps["on the target"].append(lookout.on_target[table] - ended)
                steps["readable through ctasd"].append(lookout.through_ctasd[table] - ended)
            print(f"Flink {get_json(f'{cluster.base}/config')['flink-version']}, catalog jar, "
                  f"{args.jobs} CTAS jobs of {args.rows} rows one after another "
                  f"({took / args.jobs:.1f} s a statement)")
            print("| Flink end-time → | p50 / p99 / max |")
            print("| --- | --- |")
            for step, values in steps.items():
                print(f"| {step} | {quantiles(values)} |")
        finally:
            cluster.stop()
            server.terminate()
            server.wait()


if __name__ == "__main__":
    main()
