"""Client hosts on this machine: network namespaces, each with a real OpenSSH server, for `--clients`.

Each host is a namespace joined to the root namespace's bridge by a veth pair with several queues,
with a link-local address (169.254.0.0/16: never routed) and Debian's sshd (unpacked by
scripts/fetch-sshd, never installed) listening on that address alone, with its own host key, the
test's own client key and a config of the test's. sshd runs in the namespace's private mount
namespace (`ip netns exec` makes one), where /etc/passwd is bound over by a copy with the privilege
separation user sshd needs: nothing of the machine's changes. A host may have its clock skewed for
its sessions (libfaketime, preloaded by sshd's SetEnv).

Everything is removed when the context ends: sshd by its PID, the namespaces (their veth ends with
them), the bridge, the directory of keys and configs, libfaketime's semaphore and shared memory.
"""

from __future__ import annotations

import contextlib
import ctypes
import itertools
import os
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]  # the checkout: scripts/fetch-sshd
FAKETIME = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")
SHM = Path("/dev/shm")
QUEUES = 4
_SERIAL = itertools.count()


def sshd_path() -> Path | None:
    """The unpacked sshd, fetched if it is not there yet; None where it cannot be."""
    out = subprocess.run(["bash", str(REPO / "scripts/fetch-sshd")], capture_output=True, text=True)
    if out.returncode:
        return None
    path = Path(out.stdout.strip().splitlines()[-1])
    return path if path.exists() else None


def why_not() -> str | None:
    """Why client hosts cannot be made here; None if they can."""
    if os.geteuid() != 0:
        return "client hosts need root (network namespaces, veth, a bridge)"
    for tool in ("ip", "ssh", "ssh-keygen"):
        if not shutil.which(tool):
            return f"client hosts need {tool}"
    if sshd_path() is None:
        return "scripts/fetch-sshd could not unpack openssh-server"
    return None


def _faketime_files() -> set[Path]:
    """libfaketime's own pairs in /dev/shm (named by the PID that made them)."""
    return {*SHM.glob("faketime_shm_*"), *SHM.glob("sem.faketime_sem_*")}


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


class FaketimeShared:
    """libfaketime's semaphore and shared state (struct ft_shared_s) made by the rig, for every session it
    skews to use. Left to itself, the first process of a session that loads libfaketime makes a pair
    named by its PID in /dev/shm and removes it only if it exits normally, which a shell that execs its
    command or a generator ended by a signal never does: they stayed behind. With FAKETIME_SHARED naming
    an existing pair, no process makes one, and the rig removes its own."""

    def __init__(self, tag: str):
        self.sem = f"/mosbench-test-faketime-sem-{tag}"
        self.shm = f"/mosbench-test-faketime-shm-{tag}"
        libc = ctypes.CDLL(None, use_errno=True)
        libc.sem_open.restype = ctypes.c_void_p
        libc.sem_open.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_uint, ctypes.c_uint]
        sem = libc.sem_open(self.sem.encode(), os.O_CREAT | os.O_EXCL, 0o600, 1)
        if sem in (None, ctypes.c_void_p(-1).value):
            raise OSError(ctypes.get_errno(), f"sem_open {self.sem}: {os.strerror(ctypes.get_errno())}")
        libc.sem_close(ctypes.c_void_p(sem))
        # ticks, file_idx, then the start times (real, monotonic, raw, boot) unset: tv_nsec -1, as
        # libfaketime's own ft_shm_create leaves them for the first process to fill.
        fd = os.open(SHM / self.shm[1:], os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(struct.pack("<QQ8q", 0, 0, *(0, -1) * 4))

    def env(self) -> str:
        """The SetEnv word that names the pair to libfaketime (sshd's config parser keeps the quotes' space)."""
        return f'FAKETIME_SHARED="{self.sem} {self.shm}"'

    def close(self) -> None:
        for path in (SHM / f"sem.{self.sem[1:]}", SHM / self.shm[1:]):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()


@dataclass
class Host:
    name: str  # the ssh alias in the test's config
    netns: str
    address: str
    sshd: subprocess.Popen | None = None


class ClientHosts:
    """`count` hosts; `skew` maps a host index to its clock's offset in seconds."""

    def __init__(self, count: int = 2, skew: dict[int, float] | None = None, tag: str = "",
                 rps_cpus: tuple[int, ...] = ()):
        # A fresh tag and subnet per rig: a namespace or bridge of the previous one may still be going.
        self.tag = tag or f"{os.getpid() % 1000}{next(_SERIAL) % 10}"
        self.count = count
        self.skew = skew or {}
        # Receive packet steering of the bridge's ends of the pairs (the rig's own devices, gone with it):
        # requests then reach the server's protocol stack on these CPUs, not on the sending client's.
        self.rps_cpus = rps_cpus
        self.bridge = f"mbtbr{self.tag}"
        subnet = 100 + int(self.tag) % 150
        self.server_address = f"169.254.{subnet}.1"
        self.hosts = [Host(f"c{i + 1}", f"mosbench-test-c{i + 1}-{self.tag}", f"169.254.{subnet}.{11 + i}")
                      for i in range(count)]
        self.dir = Path(tempfile.mkdtemp(prefix="mosbench-test-hosts-"))
        self.ssh_config = self.dir / "ssh_config"
        self.faketime: FaketimeShared | None = None
        self.sshd_binary: Path | None = None
        self.faketime_before = _faketime_files()  # others' (a run of an older rig) are not this one's

    def __enter__(self) -> ClientHosts:
        try:
            self._make()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _make(self) -> None:
        self.sshd_binary = sshd_path()
        assert self.sshd_binary is not None
        d = self.dir
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / "client_key")], check=True)
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / "host_key")], check=True)
        (d / "authorized_keys").write_text((d / "client_key.pub").read_text())
        host_pub = (d / "host_key.pub").read_text().split()
        (d / "known_hosts").write_text("".join(f"{h.address} {host_pub[0]} {host_pub[1]}\n" for h in self.hosts))
        passwd = Path("/etc/passwd").read_text()
        if not any(line.startswith("sshd:") for line in passwd.splitlines()):
            passwd += "sshd:x:65534:65534:privilege separation:/run/sshd:/usr/sbin/nologin\n"
        (d / "passwd").write_text(passwd)
        (d / "privsep").mkdir(mode=0o755)
        # Queues of its own, so that the servers' device spreads flows over several (its RSS stood in by
        # the verification key over them): a balanced choice of source ports has something to balance.
        _ip("link", "add", self.bridge, "numtxqueues", str(QUEUES), "numrxqueues", str(QUEUES), "type", "bridge")
        _ip("addr", "add", f"{self.server_address}/24", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")
        lines = []
        for i, h in enumerate(self.hosts):
            outer, inner = f"mbt{self.tag}h{i}", f"mbt{self.tag}c{i}"
            _ip("netns", "add", h.netns)
            _ip("link", "add", outer, "numtxqueues", str(QUEUES), "numrxqueues", str(QUEUES), "type", "veth",
                "peer", "name", inner, "numtxqueues", str(QUEUES), "numrxqueues", str(QUEUES), "netns", h.netns)
            _ip("link", "set", outer, "master", self.bridge)
            _ip("link", "set", outer, "up")
            if self.rps_cpus:
                mask = f"{sum(1 << c for c in self.rps_cpus):x}"
                for queue in Path(f"/sys/class/net/{outer}/queues").glob("rx-*"):
                    (queue / "rps_cpus").write_text(mask)
            _ip("-n", h.netns, "addr", "add", f"{h.address}/24", "dev", inner)
            _ip("-n", h.netns, "link", "set", inner, "up")
            _ip("-n", h.netns, "link", "set", "lo", "up")
            config = d / f"sshd_config.{i}"
            env = ""
            if i in self.skew:
                if self.faketime is None:
                    self.faketime = FaketimeShared(self.tag)
                env = (f"SetEnv LD_PRELOAD={FAKETIME} FAKETIME={self.skew[i]:+g} DONT_FAKE_MONOTONIC=1 "
                       f"FAKETIME_DONT_RESET=1 {self.faketime.env()}\n")
            config.write_text(
                f"ListenAddress {h.address}\nPort 22\nHostKey {d / 'host_key'}\n"
                f"AuthorizedKeysFile {d / 'authorized_keys'}\nPidFile {d / f'sshd.{i}.pid'}\n"
                "PermitRootLogin prohibit-password\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
                "UsePAM no\nStrictModes no\nPrintMotd no\nMaxSessions 64\nMaxStartups 64\n" + env)
            self._spawn_sshd(i)
            lines.append(f"Host {h.name}\n  HostName {h.address}\n  User root\n  IdentityFile {d / 'client_key'}\n"
                         f"  IdentitiesOnly yes\n  UserKnownHostsFile {d / 'known_hosts'}\n"
                         "  StrictHostKeyChecking yes\n")
        self.ssh_config.write_text("".join(lines))
        for h in self.hosts:
            self._wait_listening(h)

    def _spawn_sshd(self, index: int) -> None:
        h, d = self.hosts[index], self.dir
        # The mount namespace `ip netns exec` makes is the sshd's alone: the binds vanish with it.
        script = (f"mount --bind {d / 'passwd'} /etc/passwd && mkdir -p /run/sshd && "
                  f"mount --bind {d / 'privsep'} /run/sshd && exec {self.sshd_binary} -D -e "
                  f"-f {d / f'sshd_config.{index}'}")
        with open(d / f"sshd.{index}.log", "ab") as log:
            h.sshd = subprocess.Popen(["ip", "netns", "exec", h.netns, "sh", "-c", script], stdout=log,
                                      stderr=subprocess.STDOUT, start_new_session=True)

    def _wait_listening(self, h: Host) -> None:
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            assert h.sshd is not None
            if h.sshd.poll() is not None:
                raise RuntimeError(f"sshd for {h.name} ended: {self.log(h)}")
            with contextlib.suppress(OSError), socket.create_connection((h.address, 22), timeout=0.5):
                return
            time.sleep(0.1)
        raise RuntimeError(f"sshd for {h.name} is not listening: {self.log(h)}")

    def log(self, h: Host) -> str:
        i = self.hosts.index(h)
        with contextlib.suppress(OSError):
            return (self.dir / f"sshd.{i}.log").read_text()[-2000:]
        return ""

    def clients(self) -> str:
        return ",".join(h.name for h in self.hosts)

    def stop_sshd(self, index: int) -> None:
        """That host's sshd ends (the host becomes unreachable for new sessions)."""
        h = self.hosts[index]
        if h.sshd and h.sshd.poll() is None:
            os.killpg(h.sshd.pid, signal.SIGTERM)
            h.sshd.wait(10)

    def start_sshd(self, index: int) -> None:
        """That host's sshd again, after stop_sshd (a rig shared by tests is handed on whole)."""
        h = self.hosts[index]
        if h.sshd is None or h.sshd.poll() is not None:
            self._spawn_sshd(index)
            self._wait_listening(h)

    def close(self) -> None:
        for h in self.hosts:
            if h.sshd and h.sshd.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(h.sshd.pid, signal.SIGTERM)
                try:
                    h.sshd.wait(10)
                except subprocess.TimeoutExpired:
                    os.killpg(h.sshd.pid, signal.SIGKILL)
                    h.sshd.wait()
            subprocess.run(["ip", "netns", "delete", h.netns], capture_output=True)
        subprocess.run(["ip", "link", "delete", self.bridge], capture_output=True)
        if self.faketime is not None:
            self.faketime.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def leftovers(tag_hosts: ClientHosts) -> list[str]:
    """What of a run on these hosts is still there: generators' processes and their directories, and
    libfaketime's files from their sessions."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        with contextlib.suppress(OSError):
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            generator = "/tmp/mosbench-client." in cmd and "mktemp" not in cmd
            session = "ControlPath=" in cmd and str(tag_hosts.ssh_config) in cmd
            if generator or session:
                found.append(f"process {pid}: {cmd.strip()}")
    found += [f"file {p}" for p in Path("/tmp").glob("mosbench-client.*")]
    found += [f"file {p}" for p in sorted(_faketime_files() - tag_hosts.faketime_before)]
    return found
