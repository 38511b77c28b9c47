import { mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import postgres from "postgres";
import { LatitudeClient } from "@latitude-data/sdk";
import { loadConfig } from "../src/config";
import { startEmbeddedPostgres } from "../src/db/postgres";
import { createLogger } from "../src/lib/log";
import { startVigil, type Vigil } from "../src/server";

export const testRoot = join(import.meta.dir, "..", ".vigil-test", String(process.pid));
const quiet = createLogger((process.env.TEST_LOG_LEVEL as "info") || "silent");

let embedded: Promise<{ url: string; stop: () => Promise<void> }> | null = null;
const running = new Set<Vigil>();

function adminUrl() {
  embedded ??= (async () => {
    rmSync(testRoot, { recursive: true, force: true });
    mkdirSync(testRoot, { recursive: true });
    return startEmbeddedPostgres(testRoot, quiet);
  })();
  return embedded;
}

const suffix = () => Math.random().toString(36).slice(2, 10);

/**
 * Starts a Vigil on a loopback port with its own PostgreSQL database, ClickHouse database and
 * data directory, on the process-wide embedded PostgreSQL server and chdb engine.
 */
export async function startTestVigil(env: Record<string, string> = {}): Promise<Vigil> {
  const { url } = await adminUrl();
  const name = `t_${suffix()}`;
  const admin = postgres(url, { max: 1, onnotice: () => {} });
  await admin.unsafe(`CREATE DATABASE ${name}`);
  await admin.end();
  const dataDir = join(testRoot, name);
  mkdirSync(dataDir, { recursive: true });
  const config = loadConfig({
    PORT: "0",
    OTLP_GRPC_PORT: "0",
    DATA_DIR: dataDir,
    CHDB_PATH: join(testRoot, "ch"),
    DATABASE_URL: url.replace(/\/postgres$/, `/${name}`),
    CLICKHOUSE_DATABASE: name,
    BOOTSTRAP_RATE_LIMIT: "100000",
    ...env,
  });
  const vigil = await startVigil(config, quiet);
  running.add(vigil);
  const stop = vigil.stop;
  vigil.stop = async () => {
    running.delete(vigil);
    await stop();
  };
  return vigil;
}

let shared: Promise<Vigil> | null = null;
/** One default-configured Vigil shared by the test files that need nothing special. */
export const sharedVigil = () => (shared ??= startTestVigil());

export async function stopTestStores() {
  for (const vigil of [...running]) await vigil.stop();
  if (embedded) await (await embedded).stop();
}

/** A fresh temporary organization with its project and key, through the official SDK. */
export async function bootstrapAccount(baseUrl: string, body: { organizationName?: string; projectName?: string; userEmail?: string } = {}) {
  const anonymous = new LatitudeClient({ baseUrl, apiKey: "none" } as never);
  const account = await anonymous.account.bootstrap(body as never);
  const client = new LatitudeClient({ baseUrl, apiKey: account.apiKey } as never);
  return { account, client };
}

export async function json(res: Response) {
  const text = await res.text();
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}
