"""The tiny workflow through profiles/slurm on a real single-node SLURM cluster on this machine.

The cluster is Debian's slurmctld, slurmd and munge, installed with apt when absent and started
by hand (no systemd) from a slurm.conf in a temp dir: no cgroups (proctrack/linuxproc,
task/affinity) and no accounting, so job status comes from squeue (as in the profile) and
MinJobAge keeps finished jobs visible to squeue and `scontrol show job` until the end. Two
partitions, ``cpu`` (default) and ``gpu``, share the node, which has two stand-in GPUs (GRES
over /dev/null and /dev/zero): GPU requests are scheduled as on a real cluster, while CUDA
stays hidden so torch runs on the CPU. The run overrides only site-specific values, the
partition file (the shipped example, whose names match this cluster) and a short status wait,
and sets `device=auto` in both runs so that the torch rules ask for a GPU.
"""

from __future__ import annotations

import difflib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from memcap.aot.cut import sweep_settings
from memcap.config_schema import validate_schema
from memcap.synthetic.cut import setting_ids
from memcap.synthetic.settings import sweep_names, sweep_spec

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("slurmctld", "slurmd", "slurm-client", "munge")
BINARIES = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scontrol", "scancel", "sinfo")
SEARCH_PATH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])
# The system location the nested `srun` inside each job falls back to: the plugin strips
# SLURM_CONF from that srun's environment, so the test links its own slurm.conf there.
SYSTEM_CONF = Path("/etc/slurm/slurm.conf")
# The plugin's first status check comes after this many seconds (40 by default).
STATUS_WAIT_S = 2
# Finished jobs stay in squeue/scontrol this long: >= 3 x STATUS_WAIT_S as the plugin needs,
# and longer than the whole test so every job can be inspected afterwards.
MIN_JOB_AGE_S = 3600
FAKE_GPUS = ("/dev/null", "/dev/zero")
# `auto` (the default run's device) makes every torch rule request a GPU (gpu_request() = 1);
# with CUDA hidden it still resolves to the CPU, so the local run is the same computation.
CONFIG_ARGS = ("--configfile", "configs/test.yaml", "--config", "device=auto")
# Hard limit of each run (a loaded 2-core machine needs about 10 minutes for both).
RUN_TIMEOUT_S = 1500
# Generated and local-only paths left out of the workflow copies.
COPY_IGNORE = shutil.ignore_patterns(
    ".git",
    ".venv",
    ".snakemake",
    "results",
    "logs",
    "reports",
    "__pycache__",
    "*_cache",
    ".hypothesis",
)


@dataclass
class Cluster:
    """A running single-node SLURM cluster and the environment its clients need."""

    conf: Path
    log_dir: Path
    env: dict[str, str]
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)

    def run(self, *args: str, check: bool = True) -> str:
        """Run a SLURM client command against this cluster and return its stdout."""
        result = subprocess.run(
            args, env=self.env, capture_output=True, text=True, timeout=60, check=False
        )
        if check and result.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} failed: {result.stderr}\n{self.log_tail()}")
        return result.stdout

    def log_tail(self, lines: int = 30) -> str:
        """The ends of the daemons' logs, for failure messages."""
        parts = []
        for log in sorted(self.log_dir.glob("*.log")):
            text = log.read_text(errors="replace").splitlines()[-lines:]
            parts.append(f"--- {log.name}\n" + "\n".join(text))
        return "\n".join(parts)


def _which(name: str) -> str | None:
    return shutil.which(name, path=SEARCH_PATH)


def _install_slurm() -> str | None:
    """Install SLURM and munge with apt when absent; the reason it cannot be done, if so."""
    if os.geteuid() != 0:
        return "it needs root (apt-get install, /etc/slurm/slurm.conf, slurmd)"
    if all(_which(binary) for binary in BINARIES):
        return None
    if _which("apt-get") is None:
        return "SLURM is not installed and there is no apt-get to install it"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *PACKAGES]
    for command in (["apt-get", "update", "-qq"], install):
        command[1:1] = ["-o", "DPkg::Lock::Timeout=300"]
        try:
            result = subprocess.run(
                command, env=env, capture_output=True, text=True, timeout=900, check=False
            )
        except subprocess.TimeoutExpired:
            return f"`{' '.join(command)}` did not finish in 15 minutes"
        if result.returncode != 0:
            return f"`{' '.join(command)}` failed: {result.stderr.strip()[-500:]}"
    missing = [binary for binary in BINARIES if _which(binary) is None]
    return f"installed {' '.join(PACKAGES)} but {missing} are missing" if missing else None


def _claim_system_conf(conf: Path) -> str | None:
    """Link SYSTEM_CONF to ``conf``; the reason it cannot be done, if so."""
    if SYSTEM_CONF.is_symlink():
        target = SYSTEM_CONF.resolve()
        pid_file = target.parent / "slurmctld.pid"
        if pid_file.exists() and Path(f"/proc/{pid_file.read_text().strip()}").exists():
            return f"another test cluster is running ({SYSTEM_CONF} -> {target})"
        SYSTEM_CONF.unlink()  # left behind by a test run that was killed
    elif SYSTEM_CONF.exists():
        return f"{SYSTEM_CONF} belongs to a real SLURM installation; not touching it"
    SYSTEM_CONF.parent.mkdir(parents=True, exist_ok=True)
    SYSTEM_CONF.symlink_to(conf)
    return None


def _ensure_host_resolves(host: str) -> str | None:
    """slurmd needs ``hostname -s`` to resolve: add it to /etc/hosts if it does not.

    Returns:
        The line added to /etc/hosts, or None when nothing was added.
    """
    try:
        socket.gethostbyname(host)
        return None
    except OSError:
        line = f"127.0.0.1 {host}  # memcap SLURM test\n"
        with open("/etc/hosts", "a") as hosts:
            hosts.write(line)
        return line


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _write_slurm_conf(root: Path, host: str) -> Path:
    """A single-node cluster: partitions cpu (default) and gpu, two stand-in GPUs."""
    (root / "state").mkdir()
    (root / "spool").mkdir()
    cpus = max(32, os.cpu_count() or 1)  # more slots than cores, so jobs run side by side
    mem_mb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20 - 512
    conf = root / "slurm.conf"
    conf.write_text(
        f"""\
ClusterName=memcaptest
SlurmctldHost={host}
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={root}/munge/munge.sock
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldLogFile={root}/log/slurmctld.log
SlurmdLogFile={root}/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/affinity
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
# Backfill every second: jobs queued behind a blocked one start at once, not after 30 s.
SchedulerParameters=bf_interval=1
MinJobAge={MIN_JOB_AGE_S}
ReturnToService=2
MpiDefault=none
GresTypes=gpu
SlurmdParameters=config_overrides
NodeName={host} CPUs={cpus} RealMemory={mem_mb} Gres=gpu:{len(FAKE_GPUS)} State=UNKNOWN
PartitionName=cpu Nodes=ALL Default=YES MaxTime=INFINITE State=UP
PartitionName=gpu Nodes=ALL MaxTime=INFINITE State=UP
"""
    )
    # no_gpu_env: SLURM must not point CUDA_VISIBLE_DEVICES at the stand-ins.
    (root / "gres.conf").write_text(f"Name=gpu File={','.join(FAKE_GPUS)} Flags=no_gpu_env\n")
    return conf


def _start(cluster: Cluster, name: str, *args: str) -> None:
    out = (cluster.log_dir / f"{name}.out").open("w")
    cluster.procs[name] = subprocess.Popen(
        [_which(name), *args], env=cluster.env, stdout=out, stderr=subprocess.STDOUT
    )


def _wait_until_idle(cluster: Cluster, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for name, proc in cluster.procs.items():
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited with {proc.returncode}\n{cluster.log_tail()}")
        states = cluster.run("sinfo", "--noheader", "--format=%t", check=False).split()
        if states and all(state == "idle" for state in states):
            return
        time.sleep(0.5)
    raise RuntimeError(f"the node did not become idle in {timeout_s} s\n{cluster.log_tail()}")


def _stop(cluster: Cluster) -> None:
    """Cancel leftover jobs, then stop the daemons this test started, by PID."""
    if "slurmctld" in cluster.procs and cluster.procs["slurmctld"].poll() is None:
        cluster.run("scancel", f"--user={os.getuid()}", check=False)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and cluster.run(
            "squeue", "--noheader", "--states=PENDING,RUNNING,COMPLETING", check=False
        ):
            time.sleep(0.5)
    for name in ("slurmd", "slurmctld", "munged"):
        proc = cluster.procs.get(name)
        if proc is None or proc.poll() is not None:
            continue
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def slurm_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """Install (if needed) and start a single-node SLURM cluster; stop it afterwards."""
    reason = _install_slurm()
    if reason:
        pytest.skip(f"no SLURM cluster possible here: {reason}")
    root = tmp_path_factory.mktemp("slurm")
    root.chmod(0o755)
    (root / "log").mkdir()
    host = socket.gethostname().split(".")[0]
    conf = _write_slurm_conf(root, host)
    reason = _claim_system_conf(conf)
    if reason:
        pytest.skip(f"no SLURM cluster possible here: {reason}")
    hosts_line = _ensure_host_resolves(host)
    env = {key: value for key, value in os.environ.items() if not key.startswith("SLURM_")}
    env.update(SLURM_CONF=str(conf), PATH=SEARCH_PATH)
    cluster = Cluster(conf=conf, log_dir=root / "log", env=env)
    try:
        munge = root / "munge"
        munge.mkdir(mode=0o755)
        (munge / "munge.key").write_bytes(os.urandom(1024))
        (munge / "munge.key").chmod(0o600)
        _start(
            cluster,
            "munged",
            "--foreground",
            "--force",
            f"--key-file={munge}/munge.key",
            f"--socket={munge}/munge.sock",
            f"--pid-file={munge}/munged.pid",
            f"--seed-file={munge}/munged.seed",
            f"--log-file={root}/log/munged.log",
        )
        deadline = time.monotonic() + 20
        while not (munge / "munge.sock").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        _start(cluster, "slurmctld", "-D")
        _start(cluster, "slurmd", "-D", "-N", host)
        _wait_until_idle(cluster)
        yield cluster
    finally:
        _stop(cluster)
        if SYSTEM_CONF.is_symlink() and SYSTEM_CONF.resolve() == conf.resolve():
            SYSTEM_CONF.unlink()
        if hosts_line:
            hosts = Path("/etc/hosts")
            hosts.write_text(hosts.read_text().replace(hosts_line, "", 1))


class SnakemakeRun:
    """A Snakemake process in a workflow copy, with its output going to a log file."""

    def __init__(self, args: list[str], cwd: Path, env: dict[str, str], log: Path) -> None:
        self.args, self.log = args, log
        self.started = time.monotonic()
        # Scripts import memcap from this copy, not from the checkout the venv points at.
        env = {**env, "PYTHONPATH": str(cwd / "src")}
        with log.open("w") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "snakemake", *args],
                cwd=cwd,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def kill(self) -> None:
        """SIGKILL the run's whole process group if it is still going."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def finish(self, timeout_s: float, succeed: bool = True) -> tuple[str, float]:
        """Wait for the run under a hard timeout; its output and wall time in seconds.
        ``succeed``: fail the test unless Snakemake exits with 0 (else: unless it fails).

        A Snakemake that waits for a job SLURM no longer reports ignores SIGTERM, so on
        timeout its whole process group gets SIGKILL.
        """
        try:
            self.proc.wait(timeout=max(1.0, timeout_s - (time.monotonic() - self.started)))
        except subprocess.TimeoutExpired:
            self.kill()
        seconds = time.monotonic() - self.started
        text = self.log.read_text(errors="replace")
        if (self.proc.returncode == 0) != succeed:
            pytest.fail(
                f"snakemake {' '.join(self.args)} exited with {self.proc.returncode} after "
                f"{seconds:.0f} s:\n{text[-6000:]}"
            )
        return text, seconds


@dataclass
class JobRecord:
    """One job as Snakemake's log describes it (``grouped``: a member of a group job)."""

    rule: str
    local: bool
    threads: int
    resources: dict[str, str]
    slurm_id: str | None = None
    grouped: bool = False
    wildcards: str = ""


def _parse_jobs(log: str) -> dict[str, JobRecord]:
    """Snakemake job id -> rule, threads, resources and SLURM job id, from a run's log. A
    group job's members are listed indented under its report, and the group is submitted as
    one SLURM job (named by a UUID) after them."""
    jobs, members = {}, []
    pattern = r"^( *)(local)?rule (\w+):\n((?:\1    .*\n)+)"
    for block in re.finditer(pattern, log, re.MULTILINE):
        fields = dict(re.findall(r"^ *    (\w+): (.*)$", block.group(4), re.MULTILINE))
        resources = dict(re.findall(r"(\w+)=([^,]+)", fields.get("resources", "")))
        jobs[fields["jobid"]] = JobRecord(
            rule=block.group(3),
            local=block.group(2) is not None,
            threads=int(fields.get("threads", 1)),
            resources=resources,
            grouped=bool(block.group(1)),
            wildcards=fields.get("wildcards", ""),
        )
        if block.group(1):
            members.append((block.end(), fields["jobid"]))
    submitted = r"Job ([\w-]+) has been submitted with SLURM jobid (\d+)"
    groups = []
    for found in re.finditer(submitted, log):
        jobid, slurm_id = found.groups()
        if jobid in jobs:
            jobs[jobid].slurm_id = slurm_id
        else:  # a group job's UUID: its members are those listed since the previous group
            groups.append((found.start(), slurm_id))
    for end, jobid in members:
        jobs[jobid].slurm_id = next(slurm_id for start, slurm_id in groups if start > end)
    return jobs


def _slurm_job(cluster: Cluster, slurm_id: str) -> dict[str, str]:
    """`scontrol show job` as a dict."""
    line = cluster.run("scontrol", "show", "job", "--oneliner", slurm_id)
    return dict(item.split("=", 1) for item in line.split() if "=" in item)


def _to_mb(size: str) -> float:
    units = {"M": 1, "G": 1024, "T": 1024**2}
    return float(size[:-1]) * units[size[-1]]


def _to_minutes(limit: str) -> int:
    days, _, clock = limit.rpartition("-")
    hours, minutes, seconds = (int(part) for part in clock.split(":"))
    return int(days or 0) * 1440 + hours * 60 + minutes + round(seconds / 60)


def _check_slurm_job(job: JobRecord, info: dict[str, str]) -> None:
    """The SLURM job ran this rule with the requests Snakemake computed for it."""
    assert info["JobState"] == "COMPLETED" and info["ExitCode"] == "0:0", info
    assert info["Comment"].startswith(f"rule_{job.rule}"), info
    gpus = int(job.resources.get("gpu", 0))
    if gpus:
        assert info.get("TresPerJob") == f"gres:gpu:{gpus}", (job, info)
        assert info["Partition"] == "gpu", (job, info)
    else:
        assert "gpu" not in info.get("TresPerJob", ""), (job, info)
        assert info["Partition"] == "cpu", (job, info)
    assert _to_mb(info["MinMemoryNode"]) == int(job.resources["mem_mb"]), (job, info)
    assert _to_minutes(info["TimeLimit"]) == int(job.resources["runtime"]), (job, info)
    cpus = int(job.resources.get("cpus_per_task", job.threads))
    assert int(info["NumCPUs"]) == cpus, (job, info)


# The rules of the group job (rules/common.smk's REPORT_GROUP): the summaries, plots, report.
REPORT_GROUP = "report"
REPORT_RULES = {
    "summarize_synthetic", "summarize_aot", "summarize_assumptions", "summarize_real_capacity",
    "summarize_real_memorization", "plot_synthetic", "plot_aot", "render_report",
}  # fmt: skip


def _check_group_job(members: list[JobRecord], info: dict[str, str]) -> None:
    """One SLURM job ran the group's members on the CPU partition with their requests
    combined: memory and CPUs at least one member's and at most all of theirs (summed over
    members that run side by side), runtime at least the longest member's and at most all of
    theirs (summed along the chain)."""
    assert info["JobState"] == "COMPLETED" and info["ExitCode"] == "0:0", info
    assert info["Comment"].startswith(f"rule_{REPORT_GROUP}_"), info
    assert "gpu" not in info.get("TresPerJob", "") and info["Partition"] == "cpu", info
    granted = {
        "mem_mb": _to_mb(info["MinMemoryNode"]),
        "runtime": _to_minutes(info["TimeLimit"]),
    }
    for key, value in granted.items():
        each = [int(member.resources[key]) for member in members]
        assert max(each) <= value <= sum(each), (key, value, each)
    threads = [member.threads for member in members]
    assert max(threads) <= int(info["NumCPUs"]) <= sum(threads), (threads, info)


def _check_remote(cluster: Cluster, jobs: list[JobRecord]) -> None:
    """Every SLURM job of ``jobs`` ran with its requests: a job per rule's job, and the
    report's group as one job holding every summary, plot and the report."""
    groups: dict[str, list[JobRecord]] = {}
    for job in jobs:
        if job.grouped:
            groups.setdefault(job.slurm_id, []).append(job)
        else:
            _check_slurm_job(job, _slurm_job(cluster, job.slurm_id))
    for slurm_id, members in groups.items():
        assert {m.rule for m in members} <= REPORT_RULES, members
        _check_group_job(members, _slurm_job(cluster, slurm_id))


def _timing_column(name: str) -> bool:
    """Wall-clock columns (seconds, kruskal_seconds, s, wall_s) differ from run to run."""
    return "seconds" in name or name == "s" or name.endswith("_s") or "time" in name


def _output_differences(local: Path, cluster: Path) -> list[str]:
    """Where the cluster run's numerical results (CSV, NPY) differ from the local run's."""
    paths = sorted(
        path.relative_to(local)
        for path in (local / "results").rglob("*")
        if path.suffix in {".csv", ".npy"}
    )
    assert paths, "the local run wrote no CSV or NPY results"
    differences = []
    for relative in paths:
        try:
            if relative.suffix == ".npy":
                expected, actual = np.load(local / relative), np.load(cluster / relative)
                assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
                np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-6)
            else:
                expected, actual = pd.read_csv(local / relative), pd.read_csv(cluster / relative)
                timings = [column for column in expected.columns if _timing_column(column)]
                pd.testing.assert_frame_equal(
                    actual.drop(columns=timings, errors="ignore"),
                    expected.drop(columns=timings),
                    rtol=1e-5,
                    atol=1e-6,
                )
        except (AssertionError, OSError) as error:
            differences.append(f"{relative}: {error}")
    return differences


# What differs between two runs of the same report: its creation time, the jobs' time span
# ('2026-11-24 09:58 to 10:02 UTC': the end without its date), wall times
# ('12.3 s', '4 min 05 s', '1 h 02 min') and the peak RSS printed beside each wall time.
REPORT_TIMES = (
    (re.compile(r"\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}(:\d{2}(\.\d+)?)?"), "<datetime>"),
    (re.compile(r"\b\d{2}:\d{2} UTC\b"), "<time> UTC"),
    (re.compile(r"\d+ h \d+ min|\d+ min \d+ s|\d+(\.\d+)? s\b"), "<duration>"),
    (re.compile(r"(<duration></td>\s*<td[^>]*>)[^<]*(</td>)"), r"\1<rss>\2"),
)


def _report_differences(local: Path, cluster: Path) -> list[str]:
    """Lines of the cluster run's report that differ from the local run's, beyond times."""
    pages = []
    for run in (local, cluster):
        text = (run / "reports" / "report.html").read_text()
        for pattern, replacement in REPORT_TIMES:
            text = pattern.sub(replacement, text)
        pages.append(text.replace("><", ">\n<").splitlines())
    diff = difflib.unified_diff(*pages, "local", "slurm", n=0, lineterm="")
    return [line[:300] for line in diff][:40]


def _profile_args(config_args: tuple[str, ...]) -> list[str]:
    """A run through the profile, with this cluster's partition file and a short status wait."""
    return [
        "--profile",
        "profiles/slurm",
        *config_args,
        "--slurm-partition-config",
        "profiles/slurm/partitions.example.yaml",
        "--slurm-init-seconds-before-status-checks",
        str(STATUS_WAIT_S),
        "--seconds-between-status-checks",
        str(STATUS_WAIT_S),
    ]


def _local_args() -> list[str]:
    """A local run beside the cluster's. The local run fills the cores while the cluster run
    waits on SLURM. Its jobs get the threads the SLURM jobs get (the profile's, at most the
    node's CPUs, this machine's): a training's float reductions depend on its thread count, so
    only equal threads make equal outputs."""
    profile = yaml.safe_load((REPO / "profiles" / "slurm" / "config.yaml").read_text())
    cpus = len(os.sched_getaffinity(0))
    args = ["--cores", str(cpus), "--set-threads"]
    return args + [f"{rule}={min(n, cpus)}" for rule, n in profile["set-threads"].items()]


@pytest.mark.slurm
def test_tiny_workflow_runs_through_slurm(
    slurm_cluster: Cluster, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """Every job of the tiny run goes through SLURM with the profile's requests."""
    env = {**slurm_cluster.env, "CUDA_VISIBLE_DEVICES": ""}
    local, cluster = tmp_path / "local", tmp_path / "slurm"
    shutil.copytree(REPO, local, ignore=COPY_IGNORE)
    shutil.copytree(REPO, cluster, ignore=COPY_IGNORE)

    local_args = _local_args()
    local_run = SnakemakeRun([*local_args, *CONFIG_ARGS], local, env, tmp_path / "local.log")
    cluster_run = SnakemakeRun(_profile_args(CONFIG_ARGS), cluster, env, tmp_path / "slurm.log")
    try:
        log, cluster_s = cluster_run.finish(RUN_TIMEOUT_S)
        _, local_s = local_run.finish(RUN_TIMEOUT_S)
    finally:
        local_run.kill()
    with capsys.disabled():
        print(f"\nside by side: local run {local_s:.0f} s, SLURM run {cluster_s:.0f} s")

    jobs = _parse_jobs(log)
    finished = set(re.findall(r"Finished jobid: (\d+) ", log))
    assert finished == set(jobs), "every job Snakemake started finished"
    # Only the target rule runs on the submit host; every other job is a SLURM batch job.
    assert {job.rule for job in jobs.values() if job.local} <= {"all"}
    remote = [job for job in jobs.values() if not job.local]
    assert remote and all(job.slurm_id for job in remote), "every job went through SLURM"
    assert any(int(job.resources.get("gpu", 0)) for job in remote), "a job asked for a GPU"
    assert any(not int(job.resources.get("gpu", 0)) for job in remote), "a job asked for none"
    _check_remote(slurm_cluster, remote)
    grouped = [job for job in remote if job.grouped]
    assert {job.rule for job in grouped} == REPORT_RULES, "the report's chain is one group"
    assert len({job.slurm_id for job in grouped}) == 1, "and one SLURM job"
    differences = _output_differences(local, cluster) + _report_differences(local, cluster)
    assert not differences, "\n".join(differences)


def test_slurm_profile_comments_every_entry_and_names_real_rules() -> None:
    """Each active key has a comment above or beside it; rule-specific keys name real rules."""
    text = (REPO / "profiles" / "slurm" / "config.yaml").read_text()
    lines = text.splitlines()
    for number, line in enumerate(lines):
        if re.match(r"\s*[\w-]+:", line):
            above = lines[number - 1].strip() if number else ""
            assert "#" in line or above.startswith("#"), f"uncommented entry: {line!r}"
    profile = yaml.safe_load(text)
    assert profile["executor"] == "slurm"
    listed = subprocess.run(
        [sys.executable, "-m", "snakemake", "--list-rules", "--configfile", "configs/test.yaml"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    rules = set(listed.stdout.split())
    for section in ("set-threads", "set-resources"):
        unknown = set(profile.get(section, {})) - rules
        assert not unknown, f"{section} names rules the workflow does not have: {unknown}"


# configs/test_paper.yaml: configs/paper.yaml's shape at tiny sizes, every stage in its fine cut.
PAPER_ARGS = ("--configfile", "configs/test_paper.yaml", "--config", "device=auto")
# The training and check jobs' outputs: one file or folder per setting and per layer.
PART_FOLDERS = ("results/synthetic/jobs", "results/aot/jobs", "results/assumptions/jobs")
# One compute rule per stage; under the fine cuts a job per setting and per layer.
FINE = ("train_synthetic", "train_aot", "check_assumptions")


def _first_submitted(log: Path, rule: str, timeout_s: float) -> tuple[str, str]:
    """The first job of ``rule`` that a running Snakemake has submitted: (its wildcards, its
    SLURM job id)."""
    deadline = time.monotonic() + timeout_s
    text = ""
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace")
        # Read while Snakemake writes: a block's last lines may not be there yet.
        submitted = dict(re.findall(r"Job (\d+) has been submitted with SLURM jobid (\d+)", text))
        for block in re.finditer(rf"^rule {rule}:\n((?:    .*\n)+)", text, re.MULTILINE):
            fields = dict(re.findall(r"^    (\w+): (.*)$", block.group(1), re.MULTILINE))
            if fields.get("jobid") in submitted and "wildcards" in fields:
                return fields["wildcards"], submitted[fields["jobid"]]
        time.sleep(0.5)
    raise AssertionError(f"no {rule} job was submitted in {timeout_s} s:\n{text[-3000:]}")


def _parts(root: Path) -> dict[str, float]:
    """Every part file of the fine cut under ``root`` with its modification time."""
    return {
        str(path.relative_to(root)): path.stat().st_mtime
        for folder in PART_FOLDERS
        for path in (root / folder).rglob("*")
        if path.is_file()
    }


@pytest.mark.slurm
def test_fine_cut_submits_a_job_per_setting_and_reruns_only_a_cancelled_one(
    slurm_cluster: Cluster, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """The tiny paper-shaped config in its fine cuts: one SLURM job per paper A and paper B
    setting and per checked layer, nothing on the submit host; a setting job cancelled with
    scancel fails alone, and the same command run again submits that job alone (with the
    report's group job, which waits for every stage), leaves every other job's files
    untouched, and ends with the local run's tables."""
    env = {**slurm_cluster.env, "CUDA_VISIBLE_DEVICES": ""}
    local, cluster = tmp_path / "local", tmp_path / "slurm"
    shutil.copytree(REPO, local, ignore=COPY_IGNORE)
    shutil.copytree(REPO, cluster, ignore=COPY_IGNORE)
    local_run = SnakemakeRun([*_local_args(), *PAPER_ARGS], local, env, tmp_path / "local.log")
    first = SnakemakeRun(_profile_args(PAPER_ARGS), cluster, env, tmp_path / "first.log")
    try:
        wildcards, slurm_id = _first_submitted(tmp_path / "first.log", "train_synthetic", 600)
        slurm_cluster.run("scancel", slurm_id)
        first_log, first_s = first.finish(RUN_TIMEOUT_S, succeed=False)
        _, local_s = local_run.finish(RUN_TIMEOUT_S)
    finally:
        first.kill()
        local_run.kill()
    setting = re.fullmatch(r"job=(\w+/\w+)", wildcards)[1]  # {sweep}/{setting}
    cancelled = f"results/synthetic/jobs/{setting}"

    config = yaml.safe_load((REPO / "configs" / "test_paper.yaml").read_text())
    validate_schema(config, REPO / "workflow" / "schemas" / "config.schema.yaml")
    jobs = _parse_jobs(first_log)
    remote = [job for job in jobs.values() if not job.local]
    assert all(job.slurm_id for job in remote), "every batch job went through SLURM"
    assert {job.rule for job in jobs.values() if job.local} <= {"all"}
    section, aot = config["synthetic"], config["aot"]["sweeps"]
    settings = [s for name in sweep_names(section) for s in setting_ids(sweep_spec(section, name))]
    per_rule = {rule: [job for job in remote if job.rule == rule] for rule in FINE}
    assert len(per_rule["train_synthetic"]) == len(settings) == 10
    assert len(per_rule["train_aot"]) == sum(len(sweep_settings(n, s)) for n, s in aot.items())
    assert len(per_rule["check_assumptions"]) == 4  # gpt2-tiny: 0, 1, 2, random_attention
    assert all("/" in job.wildcards for rule in FINE for job in per_rule[rule])
    assert not (cluster / f"{cancelled}.csv").exists()
    assert not (cluster / "results" / "synthetic" / "summary.csv").exists()
    _check_remote(slurm_cluster, [job for job in remote if job.slurm_id != slurm_id])
    assert _slurm_job(slurm_cluster, slurm_id)["JobState"] == "CANCELLED"

    before = _parts(cluster)
    second = SnakemakeRun(_profile_args(PAPER_ARGS), cluster, env, tmp_path / "second.log")
    try:
        second_log, second_s = second.finish(RUN_TIMEOUT_S)
    finally:
        second.kill()
    with capsys.disabled():
        print(f"\nfine cut: local {local_s:.0f} s, SLURM {first_s:.0f} s, rerun {second_s:.0f} s")
    rerun = _parse_jobs(second_log).values()
    trained = [job for job in rerun if job.rule in (*FINE, "extract_model")]
    assert [(job.rule, job.wildcards) for job in trained] == [("train_synthetic", wildcards)]
    # The report's group job waits for every stage, so none of it ran after the cancel: the
    # rerun runs all of it once, beside the cancelled setting.
    assert not any(job.grouped for job in jobs.values()), "no summary ran after the cancel"
    downstream = REPORT_RULES | {"all", "train_synthetic"}
    assert {job.rule for job in rerun} <= downstream
    assert {job.rule for job in rerun if job.grouped} == REPORT_RULES
    _check_remote(slurm_cluster, [job for job in rerun if not job.local])
    after = _parts(cluster)
    rebuilt = {path for path in after if after[path] != before.get(path)}
    assert rebuilt == {
        f"{cancelled}{end}" for end in (".csv", "_saturation.csv", "_provenance.json")
    }
    differences = _output_differences(local, cluster)
    assert not differences, "\n".join(differences)
