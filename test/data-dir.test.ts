import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { DataDirInUseError, lockDataDir } from "../src/db/data-dir";
import { testRoot } from "./helpers";

setDefaultTimeout(60_000);

let dirs = 0;
function freshDir() {
  const dir = join(testRoot, "data-dir-lock", String(++dirs));
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  return dir;
}

const lockFile = (dir: string) => join(dir, "vigil.lock");

/** A child process that takes the lock (waiting at most `waitMs`) and holds it `holdMs`; resolves once it printed its outcome. */
async function lockInChild(dir: string, waitMs: number, holdMs: number | "forever", startAt = Date.now()) {
  const child = Bun.spawn(["bun", join(import.meta.dir, "data-dir-lock-child.ts"), dir, String(startAt), String(waitMs), String(holdMs)], { stdout: "pipe", stderr: "inherit" });
  const reader = child.stdout.getReader();
  const { value } = await reader.read();
  reader.releaseLock();
  return { child, outcome: new TextDecoder().decode(value).trim() };
}

describe("data directory lock", () => {
  test("refuses a second holder while the first lives, naming it, and frees the directory on unlock", async () => {
    const dir = freshDir();
    const unlock = await lockDataDir(dir);
    expect(JSON.parse(readFileSync(lockFile(dir), "utf8"))).toEqual({ pid: process.pid });
    const refused = await lockDataDir(dir, 300).catch((error) => error);
    expect(refused).toBeInstanceOf(DataDirInUseError);
    expect(refused.message).toBe(`DATA_DIR ${dir} is in use by another Vigil process (pid ${process.pid})`);
    unlock();
    expect(readdirSync(dir)).toEqual([]);
    (await lockDataDir(dir, 0))();
  });

  test("a lock file left by a process that is gone, whatever it holds, is taken at once", async () => {
    const dir = freshDir();
    writeFileSync(lockFile(dir), JSON.stringify({ pid: 1, startTime: "1", instance: "crashed" }));
    (await lockDataDir(dir, 0))();
    writeFileSync(lockFile(dir), "12345");
    (await lockDataDir(dir, 0))();
  });

  test("a holder killed with SIGKILL, reaped or not, does not block the next start", async () => {
    const dir = freshDir();
    const { child, outcome } = await lockInChild(dir, 0, "forever");
    expect(outcome).toBe("locked");
    child.kill("SIGKILL");
    // Not awaiting child.exited: the killed holder may still be a zombie, as right after a supervisor's SIGKILL.
    const unlock = await lockDataDir(dir);
    expect(JSON.parse(readFileSync(lockFile(dir), "utf8"))).toEqual({ pid: process.pid });
    unlock();
  });

  test("a live holder that lets go within the wait is waited for", async () => {
    const dir = freshDir();
    const { outcome } = await lockInChild(dir, 0, 1_500);
    expect(outcome).toBe("locked");
    const unlock = await lockDataDir(dir, 10_000);
    unlock();
  });

  test("of processes racing for the lock, exactly one wins", async () => {
    const dir = freshDir();
    writeFileSync(lockFile(dir), JSON.stringify({ pid: 1, instance: "crashed" }));
    const startAt = Date.now() + 1_000;
    const outcomes = await Promise.all(Array.from({ length: 4 }, () => lockInChild(dir, 0, 1_500, startAt)));
    expect(outcomes.map(({ outcome }) => outcome).sort()).toEqual(["locked", "refused", "refused", "refused"]);
    await Promise.all(outcomes.map(({ child }) => child.exited));
    expect(readdirSync(dir)).toEqual([]);
  });
});
