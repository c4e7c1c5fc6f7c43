#!/usr/bin/env python3
"""Run one command inside a throw-away qemu VM whose kernel has nothing but cgroup v2.

The Debian kernel package is downloaded (never installed), its `vmlinuz` unpacked once into
the ELF `vmlinux` that qemu boots directly, and a busybox initramfs loads the 9p, virtio and
overlay modules. The guest sees the host's root read-only over 9p under a tmpfs overlay, so
the checkout, the venv, Python and Bun sit at their host paths; a second, writable 9p share
(the run's output directory, mounted at its host path) carries back the exit status, the
command's log and whatever the command writes there (JUnit XML). Why each step is done this
way is measured in the project's notes on the VM (KVM is unusable here: TCG only).

    scripts/v2vm.py prepare
    scripts/v2vm.py run [options] -- COMMAND...
    scripts/v2vm.py pytest [options] -- PYTEST-ARGS...   (junit.xml lands in the output dir)
"""

from __future__ import annotations

import argparse
import hashlib
import io
import lzma
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "GUEST_BASETEMP",
    "GUEST_ENV_MARK",
    "GuestRun",
    "Images",
    "Stage",
    "VmUnavailable",
    "default_python",
    "missing_tools",
    "prepare",
    "run_in_vm",
    "stage_of",
]

ROOT = Path(__file__).resolve().parents[1]
# The guest sets this, so that a pytest run inside never collects the test that boots the VM.
GUEST_ENV_MARK = "JIGCMD_IN_V2VM"
# The unpacked kernel and modules (~65 MB), kept between runs in the user's cache directory.
DEFAULT_CACHE = Path(
    os.environ.get("JIGCMD_V2VM_CACHE")
    or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "jigcmd-v2vm"
)
TOOLS = ("qemu-system-x86_64", "busybox", "apt-get", "apt-cache", "dpkg-deb")
BUSYBOX_CANDIDATES = ("/bin/busybox", "/usr/bin/busybox")
# Load order from each module's `depends=` (the initramfs has no modprobe).
MODULES = (
    "virtio_ring",
    "virtio_pci_modern_dev",
    "virtio_pci_legacy_dev",
    "virtio",
    "virtio_pci",
    "9pnet",
    "9pnet_virtio",
    "netfs",
    "fscache",
    "9p",
    "overlay",
)
HOST_TAG = "hostroot"
OUT_TAG = "v2vmout"
# Where the initramfs leaves a copy of busybox in the new root (for tee and poweroff).
GUEST_BUSYBOX = "/run/v2vm/busybox"
# A tmpfs of the guest alone, for pytest's temporary directories (see `main`).
GUEST_BASETEMP = "/run/jigcmd-v2vm-pytest"
GUEST_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
XZ_MAGIC = b"\xfd7zXZ\x00"
# The guest script marks its own stages on the console with this prefix.
STAGE_MARK = "v2vm-stage: "
# A line of pytest's progress: a test file's results (or their continuation) and the percent.
_PYTEST_PROGRESS = re.compile(r"^(\S+\.py )?[.sxXfFE]+\s*\[\s*\d+%\]$")

Stage = Callable[[str], None]
"""Told one line per stage of a VM run (the kernel, the boot, the guest's progress, the end)."""

INIT = r"""#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
fail() { echo "v2vm init: $*" >/dev/console; poweroff -f; }
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
for m in @MODULES@; do insmod /modules/$m.ko || fail "insmod $m"; done
out=$(sed -n 's/.*v2vm.out=\([^ ]*\).*/\1/p' /proc/cmdline)
[ -n "$out" ] || fail "no v2vm.out= on the kernel command line"
mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=262144,cache=loose @HOST@ /mnt/lower \
  || fail "mount the host root"
mount -t tmpfs -o mode=0755 tmpfs /mnt/rw
mkdir -p /mnt/rw/upper /mnt/rw/work
mount -t overlay -o lowerdir=/mnt/lower,upperdir=/mnt/rw/upper,workdir=/mnt/rw/work overlay \
  /newroot || fail "mount the overlay"
# The host's marker of a docker container is no fact of this VM (the doctor would say it runs
# in one): hidden by a whiteout in the overlay, the host's file untouched.
rm -f /newroot/.dockerenv
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 @OUT@ "/newroot$out" \
  || fail "mount the output share at $out"
for d in proc sys dev; do mount --move /$d /newroot/$d; done
mkdir -p /newroot/dev/pts /newroot/dev/shm
mount -t devpts -o newinstance,ptmxmode=0666 devpts /newroot/dev/pts
mount -t tmpfs -o mode=1777 tmpfs /newroot/dev/shm
mount -t tmpfs -o mode=0755 tmpfs /newroot/run
mount -t cgroup2 -o nsdelegate,memory_recursiveprot cgroup2 /newroot/sys/fs/cgroup \
  || fail "mount cgroup2"
echo "+memory +pids +cpu +cpuset" > /newroot/sys/fs/cgroup/cgroup.subtree_control \
  || fail "enable the cgroup controllers"
ip link set lo up
mkdir -p /newroot/run/v2vm
cp /bin/busybox /newroot@BUSYBOX@
exec switch_root /newroot @BUSYBOX@ sh "$out/guest.sh"
"""


class VmUnavailable(RuntimeError):
    """The VM cannot be built or booted here (a tool, the kernel package or qemu is missing)."""


@dataclass(frozen=True)
class Images:
    """What qemu boots: the unpacked kernel and the initramfs."""

    kernel: Path
    initramfs: Path
    release: str


@dataclass(frozen=True)
class GuestRun:
    """How one command inside the VM ended, and where its traces are."""

    status: int | None  # the command's exit status; None when it never reported one
    timed_out: bool
    seconds: float
    out_dir: Path

    @property
    def log(self) -> str:
        """The command's stdout and stderr."""
        return _read_text(self.out_dir / "guest.log")

    @property
    def console(self) -> str:
        """The VM's serial console (kernel messages, init failures, the command's output)."""
        return _read_text(self.out_dir / "console.log")


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return ""


def missing_tools() -> list[str]:
    """Host tools the VM needs that are missing (apt: qemu-system-x86, busybox-static)."""
    missing = [tool for tool in TOOLS if shutil.which(tool) is None]
    if "busybox" not in missing and _busybox() is None:
        missing.append("busybox (static)")
    return missing


def _busybox() -> Path | None:
    # The initramfs has no dynamic loader: only a static busybox works there.
    for candidate in (shutil.which("busybox"), *BUSYBOX_CANDIDATES):
        if candidate and _is_static(Path(candidate)):
            return Path(candidate)
    return None


def _is_static(path: Path) -> bool:
    try:
        data = path.read_bytes()
    except OSError:
        return False
    return data[:4] == b"\x7fELF" and b"/lib64/ld-linux" not in data[:4096]


def default_python() -> str:
    """The repo's `.venv/bin/python` when it exists, else the running interpreter."""
    venv = ROOT / ".venv" / "bin" / "python"
    return str(venv) if venv.exists() else sys.executable


def _check(
    argv: Sequence[str], *, cwd: Path | None = None, stdin: bytes | None = None
) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(argv, check=True, capture_output=True, cwd=cwd, input=stdin)
    except (OSError, subprocess.CalledProcessError) as e:
        stderr = getattr(e, "stderr", b"") or b""
        detail = stderr.decode(errors="replace")
        raise VmUnavailable(f"{shlex.join(argv)} failed: {e} {detail}") from e


def _kernel_package() -> str:
    """The versioned kernel package linux-image-amd64 currently depends on."""
    out = _check(["apt-cache", "depends", "linux-image-amd64"]).stdout.decode()
    for line in out.splitlines():
        name = line.split(":", 1)[-1].strip()
        if line.strip().startswith("Depends:") and name.startswith("linux-image-"):
            return name
    raise VmUnavailable("apt-cache names no kernel for linux-image-amd64; run apt-get update first")


def _unpack_vmlinuz(vmlinuz: bytes) -> bytes:
    """The ELF kernel inside a bzImage whose payload is xz (decompressing it under TCG is slow)."""
    start = vmlinuz.find(XZ_MAGIC)
    while start != -1:
        try:
            elf = lzma.LZMADecompressor().decompress(vmlinuz[start:])
        except lzma.LZMAError:
            elf = b""
        if elf[:4] == b"\x7fELF":
            return elf
        start = vmlinuz.find(XZ_MAGIC, start + 1)
    raise VmUnavailable("no xz-compressed ELF kernel found in vmlinuz")


def _prepare_kernel(cache: Path, package: str, stage: Stage) -> tuple[Path, Path, str]:
    """vmlinux and the module directory for `package`, downloading and unpacking once."""
    target = cache / package
    kernel, modules = target / "vmlinux", target / "modules"
    if (target / "release").exists():
        stage(f"v2vm: kernel {package}, unpacked earlier in {target}")
        return kernel, modules, (target / "release").read_text().strip()
    stage(f"v2vm: downloading {package} (~70 MB, once; apt-get download) into {cache}")
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="jigcmd-v2vm-", dir=cache) as scratch:
        work = Path(scratch)
        _check(["apt-get", "download", package], cwd=work)
        debs = list(work.glob(f"{package}_*.deb"))
        if len(debs) != 1:
            raise VmUnavailable(f"apt-get download {package} left {debs}")
        tar = _check(["dpkg-deb", "--fsys-tarfile", str(debs[0])]).stdout
        wanted = ["./boot/vmlinuz-*", *(f"./lib/modules/*/{m}.ko" for m in MODULES)]
        _check(["tar", "-x", "--wildcards", *wanted], cwd=work, stdin=tar)
        (vmlinuz,) = (work / "boot").glob("vmlinuz-*")
        release = vmlinuz.name.removeprefix("vmlinuz-")
        staged = work / "staged"
        (staged / "modules").mkdir(parents=True)
        (staged / "vmlinux").write_bytes(_unpack_vmlinuz(vmlinuz.read_bytes()))
        for name in MODULES:
            (found,) = (work / "lib" / "modules").glob(f"*/**/{name}.ko")
            shutil.copyfile(found, staged / "modules" / f"{name}.ko")
        (staged / "release").write_text(release + "\n")
        # Atomic: a concurrent preparation either wins the rename or reuses the winner's.
        try:
            staged.rename(target)
        except OSError:
            if not (target / "release").exists():
                raise
    return kernel, modules, release


def _cpio(entries: Iterable[tuple[str, int, bytes, int]]) -> bytes:
    """A newc cpio archive of (name, mode, data, rdev) entries, as the kernel unpacks it."""
    out = io.BytesIO()
    entries = [*entries, ("TRAILER!!!", 0, b"", 0)]
    for ino, (name, mode, data, rdev) in enumerate(entries, start=1):
        encoded = name.encode() + b"\0"
        fields = (ino, mode, 0, 0, 1, 0, len(data), 0, 0, rdev >> 8, rdev & 0xFF, len(encoded), 0)
        out.write(b"070701" + b"".join(b"%08X" % f for f in fields) + encoded)
        out.write(b"\0" * (-out.tell() % 4) + data)
        out.write(b"\0" * (-out.tell() % 4))
    return out.getvalue()


def _build_initramfs(cache: Path, modules: Path, busybox: Path) -> Path:
    init = (
        INIT.replace("@MODULES@", " ".join(MODULES))
        .replace("@HOST@", HOST_TAG)
        .replace("@OUT@", OUT_TAG)
        .replace("@BUSYBOX@", GUEST_BUSYBOX)
    )
    dirs = ["bin", "dev", "proc", "sys", "mnt", "mnt/lower", "mnt/rw", "newroot", "modules"]
    entries = [(d, 0o40755, b"", 0) for d in dirs]
    # The kernel opens /dev/console for init before anything is mounted.
    entries.append(("dev/console", 0o20600, b"", (5 << 8) | 1))
    entries.append(("init", 0o100755, init.encode(), 0))
    entries.append(("bin/busybox", 0o100755, busybox.read_bytes(), 0))
    for name in MODULES:
        entries.append((f"modules/{name}.ko", 0o100644, (modules / f"{name}.ko").read_bytes(), 0))
    archive = _cpio(entries)
    path = cache / f"initramfs-{hashlib.sha256(archive).hexdigest()[:16]}.cpio"
    if not path.exists():
        partial = path.with_suffix(f".{os.getpid()}.tmp")
        partial.write_bytes(archive)
        partial.rename(path)
    return path


def _silent(line: str) -> None:
    """A `Stage` that says nothing."""


def prepare(cache: Path = DEFAULT_CACHE, stage: Stage = _silent) -> Images:
    """Kernel and initramfs in `cache`, downloading the kernel package only the first time."""
    missing = missing_tools()
    if missing:
        raise VmUnavailable(
            f"missing {', '.join(missing)}: "
            "apt-get install --no-install-recommends qemu-system-x86 busybox-static"
        )
    busybox = _busybox()
    assert busybox is not None
    try:
        package = _kernel_package()
    except VmUnavailable:
        # Offline, or no apt lists: a kernel prepared earlier still boots.
        prepared = sorted(cache.glob("linux-image-*/release"))
        if not prepared:
            raise
        package = prepared[-1].parent.name
    kernel, modules, release = _prepare_kernel(cache, package, stage)
    return Images(kernel, _build_initramfs(cache, modules, busybox), release)


def _guest_script(argv: Sequence[str], cwd: Path, env: Mapping[str, str], out_dir: Path) -> str:
    assignments = [f"{k}={v}" for k, v in sorted(env.items())]
    command = shlex.join(["env", "-i", *assignments, *argv])
    out = shlex.quote(str(out_dir))
    mark = shlex.quote(f"{STAGE_MARK}guest up, running {shlex.join(argv)[:120]}")
    return (
        f"echo {mark}\n"
        f"cd {shlex.quote(str(cwd))} || exit 1\n"
        f"( {command}; echo $? > {out}/status.partial ) 2>&1"
        f" | {GUEST_BUSYBOX} tee {out}/guest.log\n"
        f'echo "{STAGE_MARK}command ended with status $(cat {out}/status.partial), powering off"\n'
        f"mv {out}/status.partial {out}/status\n"
        "sync\n"
        f"{GUEST_BUSYBOX} poweroff -f\n"
    )


def run_in_vm(
    argv: Sequence[str],
    *,
    out_dir: Path,
    cwd: Path = ROOT,
    python: str | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = 600.0,
    cache: Path = DEFAULT_CACHE,
    memory_mib: int = 1024,
    cpus: int = 2,
    echo: bool = False,
    stage: Stage = _silent,
) -> GuestRun:
    """Boot the VM, run `argv` in `cwd` as root, power off; kill qemu at `timeout` seconds.

    The command gets a clean environment: PATH (the python's bin directory first), HOME,
    LANG, `JIGCMD_IN_V2VM=1` and `env`. `out_dir` (created, must be empty) is writable in the
    guest at the same path; it receives status, guest.log and console.log. `stage` is told one
    line per stage: the kernel, the boot, the guest's own marks and pytest's progress, the end.
    """
    started = time.monotonic()
    images = prepare(cache, stage)
    out_dir = out_dir.resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    if any(out_dir.iterdir()):
        raise VmUnavailable(f"the output directory {out_dir} is not empty")
    bindir = os.path.dirname(python or default_python())
    guest_env = {
        "PATH": f"{bindir}:{GUEST_PATH}",
        "HOME": "/root",
        "LANG": "C.UTF-8",
        GUEST_ENV_MARK: "1",
        **(env or {}),
    }
    (out_dir / "guest.sh").write_text(_guest_script(argv, cwd, guest_env, out_dir))
    append = f"console=ttyS0 quiet loglevel=3 panic=-1 cgroup_no_v1=all v2vm.out={out_dir}"
    qemu = [
        "qemu-system-x86_64",
        "-accel", "tcg",
        "-cpu", "max",
        "-m", str(memory_mib),
        "-smp", str(cpus),
        "-nographic", "-no-reboot", "-vga", "none", "-nic", "none",
        "-kernel", str(images.kernel),
        "-initrd", str(images.initramfs),
        "-append", append,
        "-virtfs",
        f"local,path=/,mount_tag={HOST_TAG},security_model=none,readonly=on,multidevs=remap",
        "-virtfs", f"local,path={out_dir},mount_tag={OUT_TAG},security_model=none",
    ]  # fmt: skip
    timed_out = threading.Event()
    stage(
        f"v2vm: booting {images.release} under qemu (TCG, no KVM: emulated, minutes, not seconds)"
    )
    try:
        proc = subprocess.Popen(
            qemu, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
    except OSError as e:
        raise VmUnavailable(f"qemu did not start: {e}") from e

    def expire() -> None:
        timed_out.set()
        proc.kill()

    timer = threading.Timer(max(1.0, timeout - (time.monotonic() - started)), expire)
    timer.start()
    # Popen's context closes the pipe and waits; qemu is killed first if anything fails here.
    with proc, (out_dir / "console.log").open("wb") as console:
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                console.write(line)
                if echo:
                    sys.stderr.buffer.write(line)
                    sys.stderr.flush()
                said = stage_of(line)
                if said is not None:
                    stage(said)
        finally:
            timer.cancel()
            if proc.poll() is None:
                proc.kill()
    status_file = out_dir / "status"
    status = int(status_file.read_text()) if status_file.exists() else None
    seconds = time.monotonic() - started
    ended = "timed out" if timed_out.is_set() else f"status {status}"
    stage(f"v2vm: VM gone after {seconds:.0f} s ({ended}); traces in {out_dir}")
    return GuestRun(status, timed_out.is_set(), seconds, out_dir)


def stage_of(line: bytes) -> str | None:
    """The stage a console line reports (a guest mark or a pytest progress line), if any."""
    text = line.decode("utf-8", errors="replace").strip()
    if text.startswith(STAGE_MARK):
        return "v2vm: " + text.removeprefix(STAGE_MARK)
    if _PYTEST_PROGRESS.match(text):
        return f"v2vm: guest pytest {text}"
    return None


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="action", required=True)
    prep = sub.add_parser("prepare", help="download and unpack the kernel, build the initramfs")
    prep.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    for name, text in (("run", "run COMMAND in the VM"), ("pytest", "run pytest in the VM")):
        action = sub.add_parser(name, help=text)
        action.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
        action.add_argument(
            "--python", default=default_python(), help="the guest's python (default: %(default)s)"
        )
        action.add_argument("--out", type=Path, help="output directory (default: a fresh one)")
        action.add_argument("--timeout", type=float, default=600.0, help="seconds for everything")
        action.add_argument("--memory", type=int, default=1024, help="guest memory in MiB")
        action.add_argument("--cpus", type=int, default=2, help="guest vCPUs (default: 2)")
        action.add_argument("--env", action="append", default=[], help="KEY=VALUE for the guest")
        action.add_argument("argv", nargs=argparse.REMAINDER)
    return parser


def main(argv: list[str] | None = None) -> int:
    """The command line; exits with the guest command's status (125 when it never reported)."""
    args = _parser().parse_args(argv)
    try:
        if args.action == "prepare":
            images = prepare(args.cache)
            print(f"kernel {images.release}: {images.kernel}\ninitramfs: {images.initramfs}")
            return 0
        command = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
        out = args.out or Path(tempfile.mkdtemp(prefix="jigcmd-v2vm-out-", dir="/var/tmp"))
        if args.action == "pytest":
            # Not the shared /tmp: pytest's clean-up of old numbered directories there could
            # reach into the output share, which is mounted under the same tree.
            junit = f"--junitxml={out / 'junit.xml'}"
            base = f"--basetemp={GUEST_BASETEMP}"
            command = [args.python, "-m", "pytest", base, junit, *command]
        env = dict(item.split("=", 1) for item in args.env)
        result = run_in_vm(
            command,
            out_dir=out,
            python=args.python,
            env=env,
            timeout=args.timeout,
            cache=args.cache,
            memory_mib=args.memory,
            cpus=args.cpus,
            echo=True,
        )
    except VmUnavailable as e:
        print(f"v2vm: {e}", file=sys.stderr)
        return 125
    verdict = "timed out" if result.timed_out else f"status {result.status}"
    print(f"v2vm: {verdict} after {result.seconds:.1f} s; traces in {out}", file=sys.stderr)
    return 125 if result.status is None else result.status


if __name__ == "__main__":
    sys.exit(main())
