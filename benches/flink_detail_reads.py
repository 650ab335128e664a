"""What ctasd's detail reads cost a real Flink JobManager, for choosing the
engine's default request budget (`max_requests_per_second`).

Starts a standalone Flink 2.3 cluster from the `apache-flink` package
(its own configuration in a temporary directory, 127.0.0.1, free ports),
runs a few streaming jobs that keep running and some batch jobs that
finish, then (after a warm-up) reads `GET /jobs/<id>` (what the watcher reads for a job
whose state moved) at fixed rates, 8 requests at once as ctasd sends
them, and prints for each rate and kind of job: the rate reached, the
answer time p50/p99, and the JobManager's CPU (from `/proc/<pid>/stat`)
in CPU-milliseconds per read and as a share of one core. The cluster keeps
no job's graph between reads (`web.refresh-interval: 1`), so each read costs
what a catch-up's reads of thousands of distinct jobs cost.

    CTASD_TEST_FLINK_HOME=$(python -c 'import os,pyflink;print(os.path.dirname(pyflink.__file__))') \\
    CTASD_TEST_FLINK_PYTHON=$VENV/bin/python \\
    python3 benches/flink_detail_reads.py [--rates 20,100,200,400] [--seconds 20]
"""

import argparse
import http.client
import json
import os
import subprocess
import tempfile
import threading
import time

from flink_cluster import Cluster, get_json

AT_ONCE = 8
TICKS = os.sysconf("SC_CLK_TCK")

DRIVER = """
import json, sys
from pyflink.table import EnvironmentSettings, TableEnvironment
spec = json.load(open(sys.argv[1]))
def submit(settings, rows):
    t_env = TableEnvironment.create(settings)
    bound = f", 'number-of-rows' = '{rows}'" if rows else ""
    t_env.execute_sql("CREATE TEMPORARY TABLE src (id BIGINT) WITH ("
                      f"'connector' = 'datagen', 'rows-per-second' = '100'{bound})")
    t_env.execute_sql("CREATE TEMPORARY TABLE sink (id BIGINT) WITH ('connector' = 'blackhole')")
    return t_env.execute_sql("INSERT INTO sink SELECT id FROM src")
for _ in range(spec["running"]):
    submit(EnvironmentSettings.in_streaming_mode(), None)
for _ in range(spec["finished"]):
    submit(EnvironmentSettings.in_batch_mode(), 10).wait()
"""


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def read_at(rest_port, ids, rate, seconds):
    """Reads /jobs/<id> for `ids` in turn at `rate` a second, AT_ONCE at a
    time; the answer times in ms and the reads done."""
    times, lock = [], threading.Lock()
    start = time.monotonic()
    total = int(rate * seconds)
    taken = iter(range(total))

    def reader():
        conn = http.client.HTTPConnection("127.0.0.1", rest_port, timeout=10)
        for n in taken:
            due = start + n / rate
            pause = due - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            sent = time.monotonic()
            conn.request("GET", f"/jobs/{ids[n % len(ids)]}")
            answer = conn.getresponse()
            body = answer.read()
            assert answer.status == 200, body
            with lock:
                times.append((time.monotonic() - sent) * 1000)

    threads = [threading.Thread(target=reader) for _ in range(AT_ONCE)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sorted(times), time.monotonic() - start


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rates", default="20,100,200,400")
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--running", type=int, default=6)
    parser.add_argument("--finished", type=int, default=40)
    args = parser.parse_args()
    home, python = os.environ["CTASD_TEST_FLINK_HOME"], os.environ["CTASD_TEST_FLINK_PYTHON"]
    with tempfile.TemporaryDirectory() as workdir:
        # The REST handlers keep a job's graph this long: 1 ms makes every
        # read a fresh one, as a catch-up's reads of distinct jobs are.
        cluster = Cluster(home, python, workdir, settings="web.refresh-interval: 1\n")
        try:
            cluster.start()
            base, jobmanager, rest_port = cluster.base, cluster.jobmanager, cluster.rest_port
            driver = os.path.join(workdir, "driver.py")
            spec = os.path.join(workdir, "spec.json")
            open(driver, "w").write(DRIVER)
            json.dump({"running": args.running, "finished": args.finished}, open(spec, "w"))
            cluster.run_python(driver, spec, check=True, stdout=subprocess.DEVNULL)
            jobs = get_json(f"{base}/jobs/overview")["jobs"]
            kinds = {
                "running": [j["jid"] for j in jobs if j["state"] == "RUNNING"],
                "finished": [j["jid"] for j in jobs if j["state"] == "FINISHED"],
            }
            print(f"Flink {get_json(f'{base}/config')['flink-version']}: "
                  f"{len(kinds['running'])} running, {len(kinds['finished'])} finished jobs; "
                  f"{AT_ONCE} reads at once, {args.seconds:.0f} s per rate")
            # Warm-up: the JobManager's JIT compiles the handlers first.
            for ids in kinds.values():
                read_at(rest_port, ids, 100, 5)
            time.sleep(5)
            before = cpu_seconds(jobmanager)
            time.sleep(args.seconds)
            idle = (cpu_seconds(jobmanager) - before) / args.seconds
            print(f"JobManager idle: {idle * 100:.1f}% of a core")
            print("| jobs | asked/s | reached/s | answer p50 / p99 ms | JM CPU-ms per read | JM core share |")
            print("| --- | --- | --- | --- | --- | --- |")
            for kind, ids in kinds.items():
                for rate in [float(r) for r in args.rates.split(",")]:
                    before = cpu_seconds(jobmanager)
                    times, took = read_at(rest_port, ids, rate, args.seconds)
                    used = cpu_seconds(jobmanager) - before - idle * took
                    reached = len(times) / took
                    p = lambda q: times[min(len(times) - 1, int(q * len(times)))]
                    print(f"| {kind} | {rate:.0f} | {reached:.0f} | {p(0.5):.1f} / {p(0.99):.1f} | "
                          f"{used * 1000 / len(times):.2f} | {used / took * 100:.1f}% |")
        finally:
            cluster.stop()


if __name__ == "__main__":
    main()
