import { randomBytes } from "node:crypto";
import { linkSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";

export class DataDirInUseError extends Error {}

interface LockHolder {
  pid: number;
  /** When the process started (clock ticks since boot), so a reused pid is not taken for the holder; null without /proc. */
  startTime: string | null;
  /** Tells this process's lock from a later one's when it unlocks. */
  instance: string;
}

function processStartTime(pid: number | "self"): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // Field 22; the command name before it (field 2, in parentheses) may contain spaces.
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19] ?? null;
  } catch {
    return null;
  }
}

function isRunning(holder: LockHolder): boolean {
  try {
    process.kill(holder.pid, 0);
  } catch (error) {
    // EPERM: the process exists but belongs to another user.
    if ((error as NodeJS.ErrnoException).code !== "EPERM") return false;
  }
  return holder.startTime === null || processStartTime(holder.pid) === holder.startTime;
}

function readHolder(path: string): { text: string; holder: LockHolder | null } | null {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return null;
    throw error;
  }
  try {
    const holder = JSON.parse(text) as LockHolder;
    return { text, holder: Number.isInteger(holder.pid) && typeof holder.instance === "string" ? holder : null };
  } catch {
    return { text, holder: null };
  }
}

const errorCode = (error: unknown) => (error as NodeJS.ErrnoException).code;

/**
 * Claims DATA_DIR for this process. A second Vigil on the same directory would take over the first
 * one's embedded PostgreSQL (it looks orphaned) and replay its write-ahead log, so it must refuse.
 *
 * The lock file is created whole and atomically (a hard link of a written file fails when the name
 * exists). A lock whose holder is gone, e.g. after SIGKILL, is moved aside and checked to be the one
 * judged stale before another claim, so two processes starting at once cannot both win.
 */
export function lockDataDir(dataDir: string): () => void {
  mkdirSync(dataDir, { recursive: true });
  const lockFile = join(dataDir, "vigil.lock");
  const me: LockHolder = { pid: process.pid, startTime: processStartTime("self"), instance: randomBytes(16).toString("hex") };
  const draft = join(dataDir, `.vigil.lock.${me.instance}`);
  writeFileSync(draft, JSON.stringify(me));
  try {
    for (let attempt = 0; attempt < 10; attempt++) {
      try {
        linkSync(draft, lockFile);
        return () => {
          if (readHolder(lockFile)?.holder?.instance === me.instance) rmSync(lockFile, { force: true });
        };
      } catch (error) {
        if (errorCode(error) !== "EEXIST") throw error;
      }
      const current = readHolder(lockFile);
      if (!current) continue;
      if (current.holder && isRunning(current.holder)) {
        throw new DataDirInUseError(`DATA_DIR ${dataDir} is in use by another Vigil process (pid ${current.holder.pid})`);
      }
      const stale = join(dataDir, `.vigil.lock.stale.${me.instance}`);
      try {
        renameSync(lockFile, stale);
      } catch (error) {
        if (errorCode(error) === "ENOENT") continue;
        throw error;
      }
      // Another process may have replaced the stale lock between the read and the rename: give its lock back.
      if (readFileSync(stale, "utf8") !== current.text) {
        try {
          linkSync(stale, lockFile);
        } catch (error) {
          if (errorCode(error) !== "EEXIST") throw error;
        }
      }
      rmSync(stale, { force: true });
    }
    throw new DataDirInUseError(`DATA_DIR ${dataDir} is in use: could not take its lock file ${lockFile}`);
  } finally {
    rmSync(draft, { force: true });
  }
}
