"""A private standalone Flink 2.3 cluster for the Python benches, from the
`apache-flink` package (CTASD_TEST_FLINK_HOME and CTASD_TEST_FLINK_PYTHON,
as the Flink suite): its own configuration in a directory of the caller's,
127.0.0.1 and free ports, no restarts, and optionally jars added to its
`lib/` (through FLINK_LIB_DIR, the package itself untouched)."""

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get_json(url):
    with urllib.request.urlopen(url, timeout=10) as answer:
        return json.load(answer)


class Cluster:
    """Started by `start`, stopped by `stop`; `base` is its REST URL and
    `jobmanager` the JobManager's pid."""

    def __init__(self, home, python, workdir, lib_jars=(), settings=""):
        self.home, self.python = home, python
        conf = os.path.join(workdir, "conf")
        os.makedirs(os.path.join(conf, "log"))
        self.conf = conf
        self.env = dict(os.environ, FLINK_CONF_DIR=conf, FLINK_LOG_DIR=os.path.join(conf, "log"))
        self.env["PATH"] = os.path.dirname(python) + ":" + self.env.get("PATH", "")
        if lib_jars:
            lib = os.path.join(workdir, "lib")
            os.makedirs(lib)
            for name in os.listdir(os.path.join(home, "lib")):
                os.symlink(os.path.join(home, "lib", name), os.path.join(lib, name))
            for jar in lib_jars:
                os.symlink(os.path.abspath(jar), os.path.join(lib, os.path.basename(jar)))
            self.env["FLINK_LIB_DIR"] = lib
        shipped = open(os.path.join(home, "conf", "config.yaml")).read()
        java_opts = next(
            (l.split("all:", 1)[1].strip() for l in shipped.splitlines() if l.strip().startswith("all:")),
            "",
        )
        for name in os.listdir(os.path.join(home, "conf")):
            if name.endswith((".properties", ".xml")):
                shutil.copy(os.path.join(home, "conf", name), conf)
        self.rest_port = free_port()
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
                f"rest.port: {self.rest_port}\n"
                "restart-strategy.type: none\n"
                f"python.client.executable: {python}\n"
                f"python.executable: {python}\n"
                f"{settings}"
            )
        with open(os.path.join(conf, "workers"), "w") as f:
            f.write("127.0.0.1\n")
        with open(os.path.join(conf, "masters"), "w") as f:
            f.write(f"127.0.0.1:{self.rest_port}\n")
        self.base = f"http://127.0.0.1:{self.rest_port}"
        self.jobmanager = None

    def _script(self, name, *args, **kwargs):
        return subprocess.run([os.path.join(self.home, "bin", name), *args], env=self.env,
                              stdin=subprocess.DEVNULL, **kwargs)

    def start(self):
        self._script("start-cluster.sh", check=True, stdout=subprocess.DEVNULL)
        deadline = time.time() + 90
        while True:
            try:
                if get_json(f"{self.base}/overview")["taskmanagers"] >= 1:
                    break
            except OSError:
                pass
            if time.time() > deadline:
                sys.exit("the Flink cluster did not start")
            time.sleep(0.25)
        pid_file = next(n for n in os.listdir(self.conf) if n.endswith("standalonesession.pid"))
        self.jobmanager = int(open(os.path.join(self.conf, pid_file)).read().split()[0])

    def run_python(self, driver, *args, **kwargs):
        """`flink run -py driver args…` on this cluster."""
        return self._script("flink", "run", "-m", f"127.0.0.1:{self.rest_port}", "-py", driver, *args,
                            **kwargs)

    def log_tail(self):
        log = os.path.join(self.conf, "log")
        said = []
        for name in sorted(os.listdir(log)):
            if "standalonesession" in name and name.endswith(".log"):
                said.extend(open(os.path.join(log, name)).read().splitlines()[-40:])
        return "\n".join(said)

    def stop(self):
        self._script("stop-cluster.sh", stdout=subprocess.DEVNULL)
