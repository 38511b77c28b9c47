import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";

export class DataDirInUseError extends Error {}

/** A live Bun process: after a crash the pid may have been reused by something else. */
function isRunningBun(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").includes("bun");
  } catch {
    return false;
  }
}

/**
 * Claims DATA_DIR for this process. A second Vigil on the same directory would take over the first
 * one's embedded PostgreSQL (it looks orphaned) and replay its write-ahead log, so it must refuse.
 */
export function lockDataDir(dataDir: string): () => void {
  mkdirSync(dataDir, { recursive: true });
  const lockFile = join(dataDir, "vigil.pid");
  let holder = 0;
  try {
    holder = Number(readFileSync(lockFile, "utf8").trim());
  } catch {}
  if (holder > 0 && holder !== process.pid && isRunningBun(holder)) {
    throw new DataDirInUseError(`DATA_DIR ${dataDir} is in use by another Vigil process (pid ${holder})`);
  }
  writeFileSync(lockFile, String(process.pid));
  return () => rmSync(lockFile, { force: true });
}
