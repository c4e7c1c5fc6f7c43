"""The hostile candidates of `test_hostile.py`: TypeScript that tries to escape (`bun ./main.ts`).

Each imports `./probe.ts` (see `hostile_harness.PROBE_TS`) and reports every attempt as one JSON
line; the tests read those lines and the evidence. Arguments carry what only the test knows
(ports, socket names, secret tokens).
"""

from __future__ import annotations

__all__ = [
    "BUSY_ORPHAN_MAIN",
    "BUSY_ORPHAN_TS",
    "DAEMON",
    "DAEMON_TS",
    "DEVICE_TIMES",
    "DEVICE_WATCH",
    "DOUBLE_FORK",
    "FORK_BOMB",
    "HOST_LOOPBACK",
    "MIDDLE_TS",
    "MOUNT_TABLES",
    "OOM_SCORE",
    "READ_SECRETS",
    "SOCKET_FAMILIES",
    "SYSCALL",
    "WRITE_OUTSIDE",
]

# args: port of the host's TCP listener, name of its abstract socket, path of its unix socket.
HOST_LOOPBACK = """
import { attemptAsync, connectInet, connectInet6, connectUnix } from "./probe.ts";
import { connect } from "node:net";
const [port, abstract, path] = process.argv.slice(2);
connectInet("tcp 127.0.0.1", "127.0.0.1", Number(port));
connectInet6("tcp [::1]", [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1], Number(port));
connectUnix("abstract unix socket", "@" + abstract);
connectUnix("unix socket path", path);
await attemptAsync("node:net 127.0.0.1", () => new Promise((resolve, reject) => {
  const socket = connect({ host: "127.0.0.1", port: Number(port) });
  socket.on("connect", () => resolve("connected"));
  socket.on("error", reject);
}));
"""

# args: the secret token, then paths of host files that hold it.
READ_SECRETS = """
import { attempt, emit } from "./probe.ts";
import { lstatSync, readdirSync, readFileSync } from "node:fs";
const [token, ...paths] = process.argv.slice(2);
for (const path of paths) {
  for (const prefix of ["", "/oldroot", "/proc/1/root", "/proc/self/root", "/proc/1/cwd/.."]) {
    attempt("read " + prefix + path, () => readFileSync(prefix + path, "utf8"));
  }
}
// pid 1 is not even listed (hidepid hides what we may not ptrace-read); try it all the same.
// Our own /proc/<pid> holds the token as an argument: it is not a host secret.
const pids = new Set(["1", ...readdirSync("/proc").filter((name) => /^[0-9]+$/.test(name))]);
pids.delete(String(process.pid));
for (const pid of pids) {
  for (const file of ["environ", "cmdline", "maps", "mem"]) {
    attempt(`read /proc/${pid}/${file}`, () => readFileSync(`/proc/${pid}/${file}`, "latin1"));
  }
}
// Search everything visible (the Bun binary excepted for size) for the token.
let seen = 0;
function walk(dir: string): void {
  let names: string[] = [];
  try { names = readdirSync(dir); } catch { return; }
  for (const name of names) {
    const path = (dir === "/" ? "" : dir) + "/" + name;
    // /proc holds the candidate's own arguments (the token); its files are tried above.
    if (path === "/proc") continue;
    let stat;
    try { stat = lstatSync(path); } catch { continue; }
    if (stat.isDirectory()) walk(path);
    else if (stat.isFile() && stat.size < 8 << 20) {
      try {
        seen++;
        if (readFileSync(path, "latin1").includes(token)) emit("found " + path, true, path);
      } catch { /* unreadable */ }
    }
  }
}
walk("/");
emit("files searched", true, String(seen));
emit("environment", true, JSON.stringify(process.env));
"""

# No args: every way of writing outside /tmp, or of changing the candidate or the runtime.
WRITE_OUTSIDE = """
import { attempt } from "./probe.ts";
import * as fs from "node:fs";
const targets = ["/x", "/work/x", "/work/main.ts", "/opt/x", "/opt/bun/bin/bun", "/dev/x",
  "/dev/null2", "/sys/fs/cgroup/memory.max", "/proc/sys/kernel/hostname", "/proc/sysrq-trigger",
  "/lib/x", "/lib64/x", "/proc/1/oom_score_adj"];
for (const path of targets) attempt("write " + path, () => fs.writeFileSync(path, "pwned"));
for (const path of ["/work/main.ts", "/opt/bun/bin/bun"]) {
  attempt("open for write " + path, () => fs.openSync(path, "r+"));
  attempt("truncate " + path, () => fs.truncateSync(path, 0));
  attempt("unlink " + path, () => fs.unlinkSync(path));
  attempt("rename " + path, () => fs.renameSync(path, "/tmp/moved"));
  attempt("chmod " + path, () => fs.chmodSync(path, 0o777));
  attempt("link " + path, () => fs.linkSync(path, "/tmp/hard"));
}
const libc = fs.readdirSync("/lib/x86_64-linux-gnu").find((name) => name.startsWith("libc."));
attempt("overwrite libc", () => fs.writeFileSync("/lib/x86_64-linux-gnu/" + libc, "pwned"));
attempt("mkdir /work/dir", () => fs.mkdirSync("/work/dir"));
attempt("write /tmp/ok", () => fs.writeFileSync("/tmp/ok", "scratch is fine"));
attempt("hash main.ts", () =>
  new Bun.CryptoHasher("sha256").update(fs.readFileSync("/work/main.ts")).digest("hex"));
"""

# args: syscall number, then arguments: integers, or "s:<text>" for a C string, "b:<n>" for n
# zero bytes.
SYSCALL = """
import { attemptSys, cstr, type Arg } from "./probe.ts";
const [nr, ...rest] = process.argv.slice(2);
const args: Arg[] = rest.map((arg) => {
  if (arg.startsWith("s:")) return cstr(arg.slice(2));
  if (arg.startsWith("b:")) return Buffer.alloc(Number(arg.slice(2)));
  return Number(arg);
});
attemptSys("syscall", Number(nr), ...args);
"""

# args: "family:type:protocol" triples. Each is tried with socket(2) and socketpair(2) (x86_64
# numbers 41 and 53); a descriptor that came back is closed at once.
SOCKET_FAMILIES = """
import { attempt, attemptSys, sys } from "./probe.ts";
import { networkInterfaces } from "node:os";
for (const triple of process.argv.slice(2)) {
  const [family, type, protocol] = triple.split(":").map(Number);
  const fd = attemptSys("socket " + triple, 41, family, type, protocol);
  if (fd >= 0) sys(3, fd);
  const pair = Buffer.alloc(8);
  if (attemptSys("socketpair " + triple, 53, family, type, protocol, pair) === 0) {
    sys(3, pair.readInt32LE(0));
    sys(3, pair.readInt32LE(4));
  }
}
attempt("networkInterfaces", () => Object.keys(networkInterfaces()).join(","));
"""

# Reads its OOM score adjustment, tries to lower it (as itself and as a child process), and
# reads it again.
OOM_SCORE = """
import { attempt } from "./probe.ts";
import { readFileSync, writeFileSync } from "node:fs";
const path = "/proc/self/oom_score_adj";
attempt("read before", () => readFileSync(path, "ascii").trim());
for (const value of ["0", "-1000", "999"]) {
  attempt("lower to " + value, () => writeFileSync(path, value));
}
attempt("raise to 1000", () => writeFileSync(path, "1000"));
const child = Bun.spawnSync([process.execPath, "-e",
  `require("fs").writeFileSync("${path}", "0")`]);
attempt("child lowers", () => {
  if (child.exitCode !== 0) throw new Error(child.stderr.toString().match(/E[A-Z]+/)?.[0]);
  return "lowered";
});
attempt("read after", () => readFileSync(path, "ascii").trim());
"""

# Reports the mount tables a process can see, a line each: its own, its thread's and pid 1's
# (hidden from it).
MOUNT_TABLES = """
import { attempt, emit } from "./probe.ts";
import { readFileSync, readlinkSync } from "node:fs";
for (const who of ["self", "thread-self", "1"]) {
  attempt("mountinfo " + who, () => {
    const lines = readFileSync(`/proc/${who}/mountinfo`, "utf8").trimEnd().split("\\n");
    lines.forEach((line, index) => emit(`mountinfo ${who} ${index}`, true, line));
    return lines.length;
  });
}
attempt("exe", () => readlinkSync("/proc/self/exe"));
"""

# args: how many times to write /dev/null itself. Reports each device's identity, then watches
# /dev/null (inotify through bun:ffi) while it writes it that many times, and reports how many
# writes the watch saw: its own, and any other process's that shares the node.
DEVICE_WATCH = """
import { emit, sys, cstr } from "./probe.ts";
import { closeSync, openSync, statSync, writeSync } from "node:fs";
for (const name of ["null", "zero", "urandom"]) {
  const found = statSync("/dev/" + name);
  emit("identity " + name, true, `${found.dev}:${found.ino}`);
}
const own = Number(process.argv[2]);
const watch = sys(294, 0o4000).ret;  // inotify_init1(IN_NONBLOCK)
// IN_OPEN | IN_MODIFY | IN_CLOSE_WRITE: alternating events, so none is coalesced.
sys(254, watch, cstr("/dev/null"), 0x20 | 0x2 | 0x8);
for (let i = 0; i < own; i++) {
  const fd = openSync("/dev/null", "w");
  writeSync(fd, "x");
  closeSync(fd);
  await Bun.sleep(1);
}
const events = Buffer.alloc(1 << 16);
let writes = 0;
for (;;) {
  const got = sys(0, watch, events, events.length).ret;
  if (got <= 0) break;
  for (let at = 0; at < got; at += 16 + events.readUInt32LE(at + 12)) {
    if (events.readUInt32LE(at + 4) & 0x2) writes++;
  }
}
emit("writes seen", true, String(writes));
"""

# No args. Reports /dev/null's identity, tries to set its times and mode (the host's inode,
# where /dev is a bind of the host's), then uses the three devices as a program does.
DEVICE_TIMES = """
import { attempt, attemptSys, cstr, emit } from "./probe.ts";
import { closeSync, openSync, readSync, statSync, writeSync } from "node:fs";
const found = statSync("/dev/null");
emit("identity null", true, `${found.dev}:${found.ino}`);
attemptSys("utimensat /dev/null", 280, -100, cstr("/dev/null"), 0, 0);
attemptSys("chmod /dev/null", 90, cstr("/dev/null"), 0o600);
attempt("write /dev/null", () => {
  const fd = openSync("/dev/null", "w");
  writeSync(fd, "x");
  closeSync(fd);
  return "written";
});
for (const name of ["zero", "urandom"]) {
  attempt("read /dev/" + name, () => {
    const fd = openSync("/dev/" + name, "r");
    const got = readSync(fd, Buffer.alloc(16));
    closeSync(fd);
    return String(got);
  });
}
"""

# A self-replicating spawner: every copy starts two more, forever.
FORK_BOMB = """
for (;;) {
  try {
    Bun.spawn([process.execPath, "main.ts"], { stdio: ["ignore", "ignore", "ignore"] });
    Bun.spawn([process.execPath, "main.ts"], { stdio: ["ignore", "ignore", "ignore"] });
  } catch { /* keep trying */ }
  await Bun.sleep(1);
}
"""

# args: port of the host's TCP listener. The daemon waits for the main process to end, then
# writes a marker to the stdout it inherited and knocks on the host listener, again and again.
DAEMON_TS = """
import { connectInet } from "./probe.ts";
import { writeSync } from "node:fs";
const [mainPid, port] = process.argv.slice(2);
process.on("SIGTERM", () => {});
process.on("SIGHUP", () => {});
for (;;) {
  try { process.kill(Number(mainPid), 0); } catch { break; }
  await Bun.sleep(5);
}
for (let i = 0; i < 200; i++) {
  try { writeSync(1, "LATE daemon output\\n"); } catch { /* closed */ }
  connectInet("late connect", "127.0.0.1", Number(port));
  await Bun.sleep(10);
}
"""

DAEMON = """
const daemon = Bun.spawn([process.execPath, "daemon.ts", String(process.pid), process.argv[2]], {
  stdio: ["ignore", "inherit", "inherit"],
  detached: true,
});
daemon.unref();
console.log("main exits, daemon", daemon.pid);
"""

# The middle process starts the daemon detached and exits at once; the daemon is orphaned.
DOUBLE_FORK = """
const middle = Bun.spawn([process.execPath, "middle.ts", String(process.pid), process.argv[2]], {
  stdio: ["ignore", "inherit", "inherit"],
});
console.log("middle exited", await middle.exited);
"""

MIDDLE_TS = """
const [mainPid, port] = process.argv.slice(2);
const daemon = Bun.spawn([process.execPath, "daemon.ts", mainPid, port], {
  stdio: ["ignore", "inherit", "inherit"],
  detached: true,
});
daemon.unref();
"""

# An orphan that spins on kill(main, 0) and writes the instant the main process is gone: it
# loses only if pid 1 kills the namespace before it reaps the main process (a zombie still
# "exists" for kill). Measured without that ordering: it wrote in 12 of 15 runs.
BUSY_ORPHAN_TS = """
import { writeSync } from "node:fs";
const [mainPid] = process.argv.slice(2);
for (;;) { try { process.kill(Number(mainPid), 0); } catch { break; } }
writeSync(1, "LATE orphan output\\n");
"""

BUSY_ORPHAN_MAIN = """
const orphan = Bun.spawn([process.execPath, "orphan.ts", String(process.pid)], {
  stdio: ["ignore", "inherit", "inherit"],
  detached: true,
});
orphan.unref();
await Bun.sleep(200);
console.log("main exits");
"""
