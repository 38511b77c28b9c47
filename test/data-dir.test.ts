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
const holder = (dir: string) => JSON.parse(readFileSync(lockFile(dir), "utf8")) as { pid: number; startTime: string | null; instance: string };

/** The pid of a process that has exited. */
async function deadPid() {
  const proc = Bun.spawn(["true"]);
  await proc.exited;
  return proc.pid;
}

/** Start time of a process as /proc/<pid>/stat has it (field 22). */
function startTime(pid: number) {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19]!;
}

describe("data directory lock", () => {
  test("refuses a second holder while the first lives, and frees the directory on unlock", () => {
    const dir = freshDir();
    const unlock = lockDataDir(dir);
    expect(holder(dir).pid).toBe(process.pid);
    expect(() => lockDataDir(dir)).toThrow(DataDirInUseError);
    unlock();
    expect(readdirSync(dir)).toEqual([]);
    lockDataDir(dir)();
  });

  test("takes over the lock of a process that is gone", async () => {
    const dir = freshDir();
    writeFileSync(lockFile(dir), JSON.stringify({ pid: await deadPid(), startTime: "1", instance: "crashed" }));
    const unlock = lockDataDir(dir);
    expect(holder(dir)).toMatchObject({ pid: process.pid, startTime: startTime(process.pid) });
    unlock();
  });

  test("a live process with the holder's pid but another start time is not the holder", () => {
    const dir = freshDir();
    // Any command line will do: what identifies the holder is its pid and start time, not its name.
    writeFileSync(lockFile(dir), JSON.stringify({ pid: 1, startTime: `${Number(startTime(1)) + 1}`, instance: "reused pid" }));
    lockDataDir(dir)();
    writeFileSync(lockFile(dir), JSON.stringify({ pid: 1, startTime: startTime(1), instance: "alive" }));
    expect(() => lockDataDir(dir)).toThrow(DataDirInUseError);
  });

  test("a lock file that is not one of ours is stale", () => {
    const dir = freshDir();
    writeFileSync(lockFile(dir), "12345");
    lockDataDir(dir)();
  });

  test("unlocking leaves alone a lock taken over since", () => {
    const dir = freshDir();
    const unlock = lockDataDir(dir);
    const successor = { pid: 1, startTime: startTime(1), instance: "successor" };
    writeFileSync(lockFile(dir), JSON.stringify(successor));
    unlock();
    expect(holder(dir)).toEqual(successor);
  });

  test("of processes racing for a stale lock, exactly one wins", async () => {
    const dir = freshDir();
    writeFileSync(lockFile(dir), JSON.stringify({ pid: await deadPid(), startTime: "1", instance: "crashed" }));
    const startAt = Date.now() + 1_000;
    const racers = Array.from({ length: 4 }, () =>
      Bun.spawn(["bun", join(import.meta.dir, "data-dir-lock-child.ts"), dir, String(startAt)], { stdout: "pipe", stderr: "inherit" }),
    );
    const outcomes = await Promise.all(racers.map(async (racer) => (await new Response(racer.stdout).text()).trim()));
    expect(outcomes.sort()).toEqual(["locked", "refused", "refused", "refused"]);
    expect(readdirSync(dir)).toEqual([]);
  });
});
