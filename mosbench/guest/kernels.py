"""The kernel a guest boots, named the way a kernel developer has it at hand:

- an installed version (`6.1.0-56-amd64`: /boot/vmlinuz-6.1.0-56-amd64 and its modules);
- a Debian kernel package (`linux-image-6.1.0-56-rt-amd64_….deb`), unpacked into mosbench's cache and
  booted from there: nothing is installed, no boot entry is made;
- a kernel image file (`vmlinuz-…`, `bzImage`), its modules found beside it the way virtme-ng looks;
- a built kernel tree (its `arch/x86/boot/bzImage` and `.config`), e.g. built with virtme-ng's config.

The guest's root is the host's over 9p, so the kernel must have 9p and virtio, built in or as modules.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from mosbench import gitrepo
from mosbench.errors import UserError
from mosbench.workloads.base import cache_root

IMAGE_IN_TREE = Path("arch/x86/boot/bzImage")
# Options whose difference explains a scalability difference first; the rest follow, sorted.
FIRST_OPTIONS = ("CONFIG_PREEMPT_RT", "CONFIG_PREEMPT", "CONFIG_PREEMPT_VOLUNTARY", "CONFIG_PREEMPT_NONE",
                 "CONFIG_HZ", "CONFIG_TRANSPARENT_HUGEPAGE", "CONFIG_NR_CPUS", "CONFIG_NUMA", "CONFIG_LOCKDEP",
                 "CONFIG_PROVE_LOCKING", "CONFIG_DEBUG_SPINLOCK", "CONFIG_KASAN", "CONFIG_PARAVIRT_SPINLOCKS",
                 "CONFIG_QUEUED_SPINLOCKS")
_VERSION = re.compile(rb"(\d+\.\d+\.\d+[^\s\x00]*) \(")


@dataclass(frozen=True)
class Kernel:
    spec: str  # as the user gave it
    image: Path
    release: str  # `uname -r` in the guest
    origin: str  # installed, package, image, tree
    config: Path | None  # its .config where one is known
    commit: str | None = None  # a tree's HEAD (a git tree's): mosbench history orders and bisects by it

    def describe(self) -> str:
        return f"{self.release} ({self.origin} {self.spec})" if self.spec != self.release else self.release

    def facts(self) -> dict[str, str]:
        found = {"kernel_release": self.release, "kernel_origin": self.origin, "kernel_image": str(self.image)}
        return {**found, "kernel_commit": self.commit} if self.commit else found


def tree_head(tree: Path) -> str | None:
    """The commit a built tree is at (read only); None where it is no git tree. A tree with changes not
    committed is still named by its HEAD: the closest commit there is."""
    return gitrepo.commit_id(tree, "HEAD")


def image_release(image: Path) -> str | None:
    """The release string an x86 kernel image carries (as `file` reads it): the setup header's kernel
    version pointer, else the first "N.N.N… (" in the file."""
    try:
        data = image.read_bytes()
    except OSError:
        return None
    if len(data) > 0x210 and data[0x202:0x206] == b"HdrS":
        offset = int.from_bytes(data[0x20E:0x210], "little") + 0x200
        found = _VERSION.match(data[offset:offset + 256])
        if found:
            return found.group(1).decode(errors="replace")
    found = _VERSION.search(data[:4 << 20])
    return found.group(1).decode(errors="replace") if found else None


def _modules_have_9p(modules: Path) -> bool:
    return any((modules / "kernel/fs/9p").glob("9p.ko*")) or "9p" in _builtin(modules)


def _builtin(modules: Path) -> str:
    try:
        return (modules / "modules.builtin").read_text()
    except OSError:
        return ""


def _config_has_9p(config: Path | None) -> bool:
    if config is None:
        return False
    text = config.read_text(errors="replace")
    return bool(re.search(r"^CONFIG_9P_FS=[ym]$", text, re.M) and re.search(r"^CONFIG_NET_9P_VIRTIO=[ym]$", text, re.M))


def _unpacked(package: Path) -> Path:
    """A .deb unpacked once into the cache (keyed by its content), as dpkg would lay it out."""
    digest = hashlib.sha256(package.read_bytes()).hexdigest()[:16]
    target = cache_root() / "kernels" / f"{package.stem}-{digest}"
    if not target.is_dir():
        if not shutil.which("dpkg-deb"):
            raise UserError(f"--kernel {package}: dpkg-deb is needed to unpack it (Debian package dpkg)")
        partial = target.with_name(target.name + ".part")
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        done = subprocess.run(["dpkg-deb", "-x", str(package), str(partial)], capture_output=True, text=True)
        if done.returncode:
            shutil.rmtree(partial, ignore_errors=True)
            raise UserError(f"--kernel {package}: dpkg-deb could not unpack it: {done.stderr.strip()}")
        partial.rename(target)
    return target


def _bisect_kept_commit(image: Path) -> str | None:
    """The commit of an image `mosbench bisect` kept (WORK/images/<commit>/bzImage, bisect.Builder.image_dir),
    so that `ab` between two of them, the command bisect and mail print, records each side's commit."""
    kept = image.parent
    if image.name == "bzImage" and kept.parent.name == "images" and re.fullmatch(r"[0-9a-f]{40}", kept.name):
        return kept.name
    return None


def resolve(spec: str, boot: Path = Path("/boot"), modules: Path = Path("/lib/modules")) -> Kernel:
    """The kernel `spec` names, checked bootable as a guest (9p for its root), or one UserError line."""
    path = Path(spec).expanduser()
    if (boot / f"vmlinuz-{spec}").is_file() and "/" not in spec:
        if not _modules_have_9p(modules / spec):
            raise UserError(f"--kernel {spec}: its modules have no 9p, which the guest's root needs "
                            "(Debian's cloud kernels lack it; the generic linux-image-amd64 has it)")
        config = boot / f"config-{spec}"
        return Kernel(spec, boot / f"vmlinuz-{spec}", spec, "installed", config if config.is_file() else None)
    if path.is_file() and path.suffix == ".deb":
        root = _unpacked(path.resolve())
        images = sorted((root / "boot").glob("vmlinuz-*"))
        if len(images) != 1:
            raise UserError(f"--kernel {spec}: the package holds {len(images)} kernel images, not one "
                            "(give a linux-image-… package)")
        release = images[0].name.removeprefix("vmlinuz-")
        if not _modules_have_9p(root / "lib/modules" / release):
            raise UserError(f"--kernel {spec}: its modules have no 9p, which the guest's root needs")
        config = root / "boot" / f"config-{release}"
        return Kernel(spec, images[0], release, "package", config if config.is_file() else None)
    if path.is_dir():
        image = path / IMAGE_IN_TREE
        if not image.is_file():
            raise UserError(f"--kernel {spec}: a directory, but no built kernel tree (no {IMAGE_IN_TREE}; build it "
                            "with `vng --kconfig && make bzImage` there)")
        config = path / ".config"
        release_file = path / "include/config/kernel.release"
        release = release_file.read_text().strip() if release_file.is_file() else image_release(image)
        if not _config_has_9p(config if config.is_file() else None):
            raise UserError(f"--kernel {spec}: its .config lacks 9p over virtio (CONFIG_9P_FS, CONFIG_NET_9P_VIRTIO), "
                            "which the guest's root needs: configure it with `vng --kconfig`")
        return Kernel(spec, image.resolve(), release or "unknown", "tree", config, tree_head(path))
    if path.is_file():
        release = image_release(path)
        if release is None:
            raise UserError(f"--kernel {spec}: not a Linux kernel image (no version string in it)")
        # "config" beside it: how `mosbench bisect` keeps each commit's image (the ab command it prints names it)
        config = next((c for c in (path.parent / f"config-{release}", path.parent / ".config", path.parent / "config",
                                   boot / f"config-{release}") if c.is_file()), None)
        mods = [path.resolve().parent.parent / "lib/modules" / release, modules / release]
        if not any(_modules_have_9p(m) for m in mods) and not _config_has_9p(config):
            raise UserError(f"--kernel {spec}: found neither its modules with 9p nor a config with 9p built in; "
                            "the guest's root needs 9p")
        return Kernel(spec, path.resolve(), release, "image", config, _bisect_kept_commit(path.resolve()))
    raise UserError(f"--kernel {spec}: not an installed kernel (see /boot), a linux-image .deb, a kernel image "
                    "or a built kernel tree")


def read_config(config: Path | None) -> dict[str, str]:
    """CONFIG_X → its value ("y", "m", "300", …); an option "is not set" reads "n"."""
    if config is None:
        return {}
    out = {}
    for line in config.read_text(errors="replace").splitlines():
        if line.startswith("CONFIG_") and "=" in line:
            key, _, value = line.partition("=")
            out[key] = value.strip('"')
        elif m := re.match(r"# (CONFIG_\w+) is not set", line):
            out[m.group(1)] = "n"
    return out


def config_differences(a: Kernel, b: Kernel) -> list[tuple[str, str, str]]:
    """(option, a's value, b's) for every option that differs; an option one side lacks reads "–".
    Where a side has no known config, nothing can be said: empty."""
    ca, cb = read_config(a.config), read_config(b.config)
    if not ca or not cb:
        return []
    differing = [k for k in set(ca) | set(cb) if ca.get(k, "n") != cb.get(k, "n")]
    differing.sort(key=lambda k: (FIRST_OPTIONS.index(k) if k in FIRST_OPTIONS else len(FIRST_OPTIONS), k))
    return [(k, ca.get(k, "–"), cb.get(k, "–")) for k in differing]
