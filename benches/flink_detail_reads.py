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
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

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


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get_json(url):
    with urllib.request.urlopen(url, timeout=10) as answer:
        return json.load(answer)


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def start_cluster(home, python, conf):
    shipped = open(os.path.join(home, "conf", "config.yaml")).read()
    java_opts = next(
        (l.split("all:", 1)[1].strip() for l in shipped.splitlines() if l.strip().startswith("all:")),
        "",
    )
    for name in os.listdir(os.path.join(home, "conf")):
        if name.endswith((".properties", ".xml")):
            shutil.copy(os.path.join(home, "conf", name), conf)
    rest = free_port()
    os.makedirs(os.path.join(conf, "log"))
    with open(os.path.join(conf, "config.yaml"), "w") as f:
        f.write(
            f"env.java.opts.all: {java_opts}\n"
            f"env.pid.dir: {conf}\n"
            f"env.log.dir: {conf}/log\n"
            "jobmanager.bind-host: 127.0.0.1\n"
            "jobmanager.rpc.address: 127.0.0.1\n"
            f"jobmanager.rpc.port: {free_port()}\n"
            "jobmanager.memory.process.size: 1024m\n"
            "taskmanager.bind-host: 127.0.0.1\n"
            "taskmanager.host: 127.0.0.1\n"
            "taskmanager.rpc.port: 0\n"
            "taskmanager.data.port: 0\n"
            "taskmanager.numberOfTaskSlots: 8\n"
            "taskmanager.memory.process.size: 1600m\n"
            "blob.server.port: 0\n"
            "parallelism.default: 1\n"
            "rest.address: 127.0.0.1\n"
            "rest.bind-address: 127.0.0.1\n"
            f"rest.port: {rest}\n"
            "restart-strategy.type: none\n"
            # The REST handlers keep a job's graph this long: 1 ms makes every
            # read a fresh one, as a catch-up's reads of distinct jobs are.
            "web.refresh-interval: 1\n"
            f"python.client.executable: {python}\n"
            f"python.executable: {python}\n"
        )
    with open(os.path.join(conf, "workers"), "w") as f:
        f.write("127.0.0.1\n")
    with open(os.path.join(conf, "masters"), "w") as f:
        f.write(f"127.0.0.1:{rest}\n")
    env = dict(os.environ, FLINK_CONF_DIR=conf, FLINK_LOG_DIR=os.path.join(conf, "log"))
    env["PATH"] = os.path.dirname(python) + ":" + env.get("PATH", "")
    subprocess.run([os.path.join(home, "bin", "start-cluster.sh")], env=env, check=True,
                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{rest}"
    deadline = time.time() + 90
    while True:
        try:
            if get_json(f"{base}/overview")["taskmanagers"] >= 1:
                break
        except OSError:
            pass
        if time.time() > deadline:
            sys.exit("the Flink cluster did not start")
        time.sleep(0.25)
    pid_file = next(n for n in os.listdir(conf) if n.endswith("standalonesession.pid"))
    jobmanager = int(open(os.path.join(conf, pid_file)).read().split()[0])
    return base, env, jobmanager


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
    with tempfile.TemporaryDirectory() as conf:
        base, env, jobmanager = start_cluster(home, python, conf)
        rest_port = int(base.rsplit(":", 1)[1])
        try:
            driver = os.path.join(conf, "driver.py")
            spec = os.path.join(conf, "spec.json")
            open(driver, "w").write(DRIVER)
            json.dump({"running": args.running, "finished": args.finished}, open(spec, "w"))
            subprocess.run([os.path.join(home, "bin", "flink"), "run", "-m", f"127.0.0.1:{rest_port}",
                            "-py", driver, spec], env=env, check=True,
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
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
            subprocess.run([os.path.join(home, "bin", "stop-cluster.sh")], env=env,
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)


if __name__ == "__main__":
    main()
