import { dlopen, FFIType } from "bun:ffi";
import { closeSync, fstatSync, ftruncateSync, mkdirSync, openSync, readFileSync, rmSync, statSync, writeSync } from "node:fs";
import { join } from "node:path";

/** DATA_DIR cannot be used; the message is the one line to print. */
export class DataDirError extends Error {}
export class DataDirInUseError extends DataDirError {}

const LOCK_EX = 2;
const LOCK_NB = 4;
const LOCK_UN = 8;

/**
 * flock(2) from the C library: Bun has no file-lock API. The kernel releases the lock when the last descriptor of
 * its open file goes away, so a holder that dies, however it dies, never blocks the next start. Vigil's descriptors
 * are close-on-exec, so processes it spawns (the embedded PostgreSQL) do not keep the lock alive.
 */
const libc = (() => {
  const names = process.platform === "darwin" ? ["libc.dylib"] : ["libc.so.6", "libc.so"];
  for (const name of names) {
    try {
      return dlopen(name, { flock: { args: [FFIType.i32, FFIType.i32], returns: FFIType.i32 } }).symbols;
    } catch {}
  }
  throw new Error(`cannot load the C library (tried ${names.join(", ")}) to lock DATA_DIR`);
})();

function holderPid(lockFile: string): string {
  try {
    const pid = (JSON.parse(readFileSync(lockFile, "utf8")) as { pid?: unknown }).pid;
    return Number.isInteger(pid) ? String(pid) : "unknown";
  } catch {
    return "unknown";
  }
}

/** The lock file still names the locked open file: an unlock may have removed it between our open and our lock. */
function stillNamed(fd: number, lockFile: string) {
  try {
    return statSync(lockFile).ino === fstatSync(fd).ino;
  } catch {
    return false;
  }
}

/**
 * Claims DATA_DIR for this process with an exclusive flock on `DATA_DIR/vigil.lock`. A second Vigil on the same
 * directory would take over the first one's embedded PostgreSQL (it looks orphaned) and replay its write-ahead
 * log, so it must refuse. A live holder is given `waitMs` to go away (a supervisor restarting Vigil while the old
 * process still shuts down) before the refusal. The file names the holder's pid for that message; unlocking
 * removes it.
 */
export async function lockDataDir(dataDir: string, waitMs = 5_000): Promise<() => void> {
  mkdirSync(dataDir, { recursive: true });
  const lockFile = join(dataDir, "vigil.lock");
  const deadline = performance.now() + waitMs;
  for (;;) {
    const fd = openSync(lockFile, "a+", 0o600);
    if (libc.flock(fd, LOCK_EX | LOCK_NB) === 0) {
      if (!stillNamed(fd, lockFile)) {
        closeSync(fd);
        continue;
      }
      ftruncateSync(fd, 0);
      writeSync(fd, JSON.stringify({ pid: process.pid }));
      let locked = true;
      return () => {
        if (!locked) return;
        locked = false;
        rmSync(lockFile, { force: true });
        libc.flock(fd, LOCK_UN);
        closeSync(fd);
      };
    }
    closeSync(fd);
    if (performance.now() >= deadline) throw new DataDirInUseError(`DATA_DIR ${dataDir} is in use by another Vigil process (pid ${holderPid(lockFile)})`);
    await Bun.sleep(100);
  }
}
