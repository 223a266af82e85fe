"""A real single-node Slurm (slurmctld + slurmd + slurmdbd on MariaDB, munge auth) in a temporary
folder, for tests and measurements; every daemon is started here in the foreground and stopped by PID.

Measured facts behind the configuration: /work/shared/facts/slurm.md (Debian 12, Slurm 22.05,
no cgroups, no systemd). Accounting is on because submitit sees a task that died hard only through
``sacct``. Private ports and a private munge socket, so nothing already running on the machine is
touched. ``Cluster.env`` (SLURM_CONF) must be in the environment of every Slurm client call.
"""
from __future__ import annotations

import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

PACKAGES = ["slurm-wlm", "munge", "slurmdbd", "mariadb-server"]
BINARIES = ["slurmctld", "slurmd", "slurmdbd", "munged", "mariadbd", "mariadb-install-db", "sbatch", "sacct"]


class Unavailable(RuntimeError):
    """Why no cluster can be started here (the caller skips with this reason)."""


def install() -> None:
    """apt-get the packages when a binary is missing; Unavailable when that is not possible."""
    if os.geteuid() != 0:
        raise Unavailable("starting slurmctld/slurmd/slurmdbd/mariadbd needs root")
    if all(shutil.which(b) or Path("/usr/sbin", b).exists() for b in BINARIES):
        return
    if shutil.which("apt-get") is None:
        raise Unavailable(f"Slurm is not installed and there is no apt-get to install {' '.join(PACKAGES)}")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    r = subprocess.run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", *PACKAGES],
                       capture_output=True, text=True, env=env, timeout=900)
    if r.returncode != 0:
        subprocess.run(["apt-get", "update", "-qq"], capture_output=True, env=env, timeout=600)
        r = subprocess.run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", *PACKAGES],
                           capture_output=True, text=True, env=env, timeout=900)
    if r.returncode != 0:
        raise Unavailable(f"apt-get install {' '.join(PACKAGES)} failed: {r.stderr.strip()[-300:]}")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _chown(path: Path, user: str) -> None:
    pw = pwd.getpwnam(user)
    for p in [path, *path.rglob("*")]:
        os.chown(p, pw.pw_uid, pw.pw_gid)


class Cluster:
    def __init__(self, root: Path, cpus: int | None = None):
        self.root = root
        self.node = socket.gethostname().split(".")[0]
        self.cpus = cpus or os.cpu_count() or 1
        self.procs: list[tuple[str, subprocess.Popen]] = []
        self.env = {**os.environ, "SLURM_CONF": str(root / "etc" / "slurm.conf")}

    # ----- start ------------------------------------------------------------------------------------
    def start(self) -> "Cluster":
        install()
        r = self.root
        for d in ("etc", "state", "spool", "log", "munge", "mysql", "run"):
            (r / d).mkdir(parents=True, exist_ok=True)
        self.root.chmod(0o755)
        try:
            self._munge()
            self._mariadb()
            self._slurm_conf()
            self._daemon("slurmdbd", ["slurmdbd", "-D"])
            self._wait(lambda: self._port_open(self.dbd_port), "slurmdbd to listen", "slurmdbd")
            self._daemon("slurmctld", ["slurmctld", "-D", "-i"])
            self._daemon("slurmd", ["slurmd", "-D"])
            self._wait(self._node_idle, f"node {self.node} to be idle in sinfo", "slurmctld")
        except BaseException:
            self.stop()
            raise
        return self

    def _munge(self) -> None:
        d = self.root / "munge"
        _chown(d, "munge")
        d.chmod(0o755)  # slurmctld/slurmdbd run as the slurm user and connect to the socket
        self.munge_socket = d / "munge.socket"
        self._daemon("munged", ["munged", "-F", f"--socket={self.munge_socket}", f"--pid-file={d / 'munged.pid'}",
                                f"--log-file={d / 'munged.log'}", f"--seed-file={d / 'munged.seed'}"], user="munge")
        self._wait(self.munge_socket.exists, "munged's socket", "munged")

    def _mariadb(self) -> None:
        d = self.root / "mysql"
        data = d / "data"
        subprocess.run(["mariadb-install-db", f"--datadir={data}", "--user=mysql", "--auth-root-authentication-method=socket",
                        "--skip-test-db"], check=True, capture_output=True, timeout=300)
        _chown(d, "mysql")
        self.db_port, self.db_pass = _free_port(), secrets.token_hex(12)
        self.db_socket = d / "mysqld.sock"
        self._daemon("mariadbd", ["mariadbd", "--no-defaults", f"--datadir={data}", "--user=mysql",
                                  "--bind-address=127.0.0.1", f"--port={self.db_port}", f"--socket={self.db_socket}",
                                  f"--pid-file={d / 'mysqld.pid'}", "--skip-name-resolve", "--innodb-buffer-pool-size=64M"])
        self._wait(self.db_socket.exists, "mariadbd's socket", "mariadbd")
        sql = (f"CREATE DATABASE slurm_acct_db; CREATE USER 'slurm'@'127.0.0.1' IDENTIFIED BY '{self.db_pass}';"
               "GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1'; FLUSH PRIVILEGES;")
        subprocess.run(["mariadb", f"--socket={self.db_socket}", "-u", "root", "-e", sql], check=True,
                       capture_output=True, timeout=60)

    def _slurm_conf(self) -> None:
        r, etc = self.root, self.root / "etc"
        self.ctld_port, self.slurmd_port, self.dbd_port = _free_port(), _free_port(), _free_port()
        mem = int(subprocess.run(["free", "-m"], capture_output=True, text=True).stdout.split("\n")[1].split()[1])
        auth = f"AuthInfo=socket={self.munge_socket}"
        (etc / "slurmdbd.conf").write_text("\n".join([
            "AuthType=auth/munge", auth, "DbdHost=localhost", f"DbdPort={self.dbd_port}", "SlurmUser=slurm",
            f"LogFile={r / 'log' / 'slurmdbd.log'}", f"PidFile={r / 'run' / 'slurmdbd.pid'}",
            "StorageType=accounting_storage/mysql", "StorageHost=127.0.0.1", f"StoragePort={self.db_port}",
            "StorageUser=slurm", f"StoragePass={self.db_pass}", "StorageLoc=slurm_acct_db", ""]))
        (etc / "slurm.conf").write_text("\n".join([
            "ClusterName=tcourse", f"SlurmctldHost={self.node}", f"SlurmctldPort={self.ctld_port}",
            f"SlurmdPort={self.slurmd_port}", "AuthType=auth/munge", auth, "SlurmUser=slurm", "MpiDefault=none",
            "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none", "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core", "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/slurmdbd", "AccountingStorageHost=localhost",
            f"AccountingStoragePort={self.dbd_port}", f"AccountingStoragePass={self.munge_socket}",
            f"StateSaveLocation={r / 'state'}",
            f"SlurmdSpoolDir={r / 'spool'}", f"SlurmctldPidFile={r / 'run' / 'slurmctld.pid'}",
            f"SlurmdPidFile={r / 'run' / 'slurmd.pid'}", f"SlurmctldLogFile={r / 'log' / 'slurmctld.log'}",
            f"SlurmdLogFile={r / 'log' / 'slurmd.log'}", "ReturnToService=2", "MinJobAge=600",
            "SchedulerParameters=sched_interval=2", "KillWait=5",
            f"NodeName={self.node} CPUs={self.cpus} RealMemory={mem} State=UNKNOWN",
            f"PartitionName=debug Nodes={self.node} Default=YES MaxTime=INFINITE State=UP", ""]))
        for d in ("state", "log", "run"):
            _chown(r / d, "slurm")
        _chown(etc, "slurm")
        (etc / "slurmdbd.conf").chmod(0o600)

    def _daemon(self, name: str, argv: list[str], user: str | None = None) -> None:
        log = open(self.root / "log" / f"{name}.out", "wb")
        self.procs.append((name, subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=self.env,
                                                  start_new_session=True, user=user, group=user)))
        log.close()

    def _wait(self, ready, what: str, name: str, timeout: float = 60) -> None:
        t0 = time.monotonic()
        while not ready():
            proc = dict(self.procs).get(name)
            if proc is not None and proc.poll() is not None:
                raise Unavailable(f"{name} exited ({proc.returncode}) while waiting for {what}: {self.log_tail(name)}")
            if time.monotonic() - t0 > timeout:
                raise Unavailable(f"timed out waiting for {what}: {self.log_tail(name)}")
            time.sleep(0.3)

    def log_tail(self, name: str, n: int = 600) -> str:
        text = ""
        for f in (self.root / "log" / f"{name}.out", self.root / "log" / f"{name}.log"):
            if f.exists():
                text += f.read_text(errors="replace")
        return text[-n:]

    @staticmethod
    def _port_open(port: int) -> bool:
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", port)) == 0

    def _node_idle(self) -> bool:
        r = subprocess.run(["sinfo", "-h", "-N", "-o", "%t"], capture_output=True, text=True, env=self.env)
        return r.returncode == 0 and r.stdout.strip() in ("idle", "mix")

    def run(self, *argv: str, **kw) -> subprocess.CompletedProcess:
        """A Slurm client command against this cluster."""
        return subprocess.run(list(argv), capture_output=True, text=True, env=self.env, **kw)

    # ----- stop -------------------------------------------------------------------------------------
    def stop(self) -> None:
        """SIGTERM each daemon this object started, newest first (SIGKILL after 15 s); then SIGKILL what
        the jobs left (slurmstepd outlives slurmd by design): every process with this cluster's SLURM_CONF."""
        for name, proc in reversed(self.procs):
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(15)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(5)
        self.procs.clear()
        mine = f"SLURM_CONF={self.env['SLURM_CONF']}".encode()
        left = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                if mine in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0") and int(pid) != os.getpid():
                    left.append(int(pid))
            except OSError:
                pass
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
