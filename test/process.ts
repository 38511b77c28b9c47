import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import { freeLoopbackPort } from "../src/lib/net";
import { join } from "node:path";

const root = join(import.meta.dir, "..");

export { freeLoopbackPort as freePort };

export interface VigilProcess {
  url: string;
  dataDir: string;
  child: ChildProcess;
  output(): string;
  /** Waits for the process to exit and returns its exit code (null when killed by a signal). */
  exited: Promise<number | null>;
}

/** Runs `bun run src/index.ts` (or `command`) as its own process group, the way an operator starts Vigil. */
export async function spawnVigil(dataDir: string, env: Record<string, string> = {}, timeoutMs = 60_000, command = ["run", "src/index.ts"]): Promise<VigilProcess> {
  const port = await freeLoopbackPort();
  const child = spawn("bun", command, {
    cwd: root,
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
    // The crash tests verify hundreds of traces with parallel reads: the per-organization read cap (tested in
    // limits-reads.test.ts) would refuse them on a loaded machine.
    env: { ...process.env, DATA_DIR: dataDir, PORT: String(port), OTLP_GRPC_PORT: "0", LOG_LEVEL: "info", READ_CONCURRENCY_PER_ORGANIZATION: "1000", ...env },
  });
  let output = "";
  child.stdout!.on("data", (chunk) => (output += chunk));
  child.stderr!.on("data", (chunk) => (output += chunk));
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + timeoutMs;
  let ready = false;
  while (!ready && Date.now() < deadline && child.exitCode === null && child.signalCode === null) {
    ready = await fetch(`${url}/health`).then((res) => res.ok, () => false);
    if (!ready) await Bun.sleep(100);
  }
  if (!ready) {
    killGroup(child, "SIGKILL");
    throw new Error(`vigil did not become healthy:\n${output}`);
  }
  return { url, dataDir, child, output: () => output, exited };
}

export function killGroup(child: ChildProcess, signal: NodeJS.Signals) {
  try {
    process.kill(-child.pid!, signal);
  } catch {}
}

export function isAlive(pid: number) {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** The embedded PostgreSQL's pid, from the postmaster.pid it keeps in `$DATA_DIR/pg`. */
export const postmasterPid = (dataDir: string) => Number(readFileSync(join(dataDir, "pg", "postmaster.pid"), "utf8").split("\n")[0]);

/** SIGKILLs Vigil's process group and its embedded PostgreSQL, which runs in a process group of its own. */
export function killWithPostgres(vigil: VigilProcess) {
  killGroup(vigil.child, "SIGKILL");
  try {
    const postgresPid = postmasterPid(vigil.dataDir);
    // A stale postmaster.pid may name a pid reused since.
    if (postgresPid > 0 && readFileSync(`/proc/${postgresPid}/cmdline`, "utf8").includes("postgres")) process.kill(-postgresPid, "SIGKILL");
  } catch {}
}
