import { createClient, type ClickHouseClient } from "@clickhouse/client";
import { createChdbConnection } from "chdb/connection";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import type { Config } from "../config";
import { badRequest, tooManyRequests, unavailable } from "../lib/errors";

export interface ClickHouseStore {
  client: ClickHouseClient;
  /** Database holding Vigil's tables; tests use one per suite on the shared chdb engine. */
  database: string;
  /** True for the in-process chdb engine. */
  embedded: boolean;
  /** Directory for staging files the embedded engine reads with file(). */
  stagingDir: string | null;
  /**
   * Rows of a SELECT run with the read limits (time and memory, per query), within the organization's
   * share of concurrent reads. Limit errors become a 503 (too slow) or a 400 (too much memory) `{error}`.
   * `settings` are added to the query's own (e.g. `optimize_use_projections: 0`).
   */
  read<T>(organizationId: string, query: string, params?: Record<string, unknown>, settings?: Record<string, number>): Promise<T[]>;
  close(): Promise<void>;
}

export interface ReadLimits {
  /** ClickHouse `max_execution_time` of every read, seconds. */
  timeoutSeconds: number;
  /** ClickHouse `max_memory_usage` of every read, bytes. */
  maxMemoryBytes: number;
  /**
   * Reads of one organization running at once; more wait for a slot. Unset: 1 on the embedded engine,
   * which runs one statement at a time (a second read of one organization would only queue ahead of
   * other organizations'), 4 against a ClickHouse server.
   */
  concurrencyPerOrganization: number | null;
}

/** Reads of one organization waiting for a slot; past this, or after `slotWaitMs`, a request is refused. */
const maxWaitingPerOrganization = 16;
const slotWaitMs = 5_000;

/**
 * Per-organization concurrency of reads, in this process: one organization's heavy reads wait for
 * each other rather than fill the engine, so another organization's reads find it free. Fairness
 * holds per process; with several Vigil processes each grants its own share.
 */
export class OrganizationReadGate {
  private readonly running = new Map<string, number>();
  private readonly waiting = new Map<string, (() => void)[]>();

  constructor(private readonly perOrganization: number) {}

  async run<T>(organizationId: string, read: () => Promise<T>): Promise<T> {
    await this.acquire(organizationId);
    try {
      return await read();
    } finally {
      this.release(organizationId);
    }
  }

  private async acquire(organizationId: string): Promise<void> {
    const running = this.running.get(organizationId) ?? 0;
    if (running < this.perOrganization) {
      this.running.set(organizationId, running + 1);
      return;
    }
    const queue = this.waiting.get(organizationId) ?? [];
    if (queue.length >= maxWaitingPerOrganization) throw tooManyRequests(1, "Too many concurrent reads for this organization; retry later");
    this.waiting.set(organizationId, queue);
    await new Promise<void>((resolve, reject) => {
      const granted = () => {
        clearTimeout(timer);
        resolve();
      };
      const timer = setTimeout(() => {
        queue.splice(queue.indexOf(granted), 1);
        reject(tooManyRequests(1, "Too many concurrent reads for this organization; retry later"));
      }, slotWaitMs);
      queue.push(granted);
    });
  }

  /** Hands the slot to the next waiter of the organization, if any, else frees it. */
  private release(organizationId: string): void {
    const next = this.waiting.get(organizationId)?.shift();
    if (next) return next();
    if (this.waiting.get(organizationId)?.length === 0) this.waiting.delete(organizationId);
    const running = (this.running.get(organizationId) ?? 1) - 1;
    if (running > 0) this.running.set(organizationId, running);
    else this.running.delete(organizationId);
  }
}

/** ClickHouse's own error names of the read limits. */
const timeoutErrors = new Set(["TIMEOUT_EXCEEDED", "TOO_SLOW"]);
const memoryErrors = new Set(["MEMORY_LIMIT_EXCEEDED"]);

function readError(error: unknown, limits: ReadLimits): unknown {
  const type = (error as { type?: string }).type ?? "";
  const message = (error as Error).message ?? "";
  if (timeoutErrors.has(type) || /TIMEOUT_EXCEEDED|Timeout exceeded/.test(message)) {
    return unavailable(5, `The query took longer than ${limits.timeoutSeconds} s; narrow the filters or the time range and retry`);
  }
  if (memoryErrors.has(type) || /MEMORY_LIMIT_EXCEEDED/.test(message)) {
    return badRequest(`The query needs more than ${limits.maxMemoryBytes} bytes of memory; narrow the filters or the time range`);
  }
  return error;
}

/**
 * The chdb session keeps the rows a statement wrote before it failed (a read past its time limit, any
 * error mid-stream) and hands them to the next statement as the start of its result, whichever
 * organization's read that is. On chdb, reads therefore run one after another (the engine runs one
 * statement at a time anyway), and after a failed one a throwaway statement takes the leftover rows
 * before the next read runs.
 */
function drainingReads(client: ClickHouseClient) {
  let queue: Promise<unknown> = Promise.resolve();
  return <T>(read: () => Promise<T>): Promise<T> => {
    const result = queue.then(async () => {
      try {
        return await read();
      } catch (error) {
        await client.query({ query: "SELECT 1", format: "JSONEachRow" }).then((drained) => drained.text(), () => {});
        throw error;
      }
    });
    queue = result.catch(() => {});
    return result;
  };
}

/** The store's `read`: the limits as a SETTINGS clause, which both engines apply to that query alone. */
function readerOf(client: ClickHouseClient, limits: ReadLimits, embedded: boolean): ClickHouseStore["read"] {
  const gate = new OrganizationReadGate(limits.concurrencyPerOrganization ?? (embedded ? 1 : 4));
  const clause = `\nSETTINGS max_execution_time = ${limits.timeoutSeconds}, timeout_overflow_mode = 'throw', max_memory_usage = ${limits.maxMemoryBytes}`;
  const inTurn = embedded ? drainingReads(client) : <T>(read: () => Promise<T>) => read();
  return (organizationId, query, params = {}, settings = {}) =>
    gate.run(organizationId, () =>
      inTurn(async () => {
        const extra = Object.entries(settings).map(([name, value]) => `, ${name} = ${value}`);
        try {
          const result = await client.query({ query: `${query}${clause}${extra.join("")}`, query_params: params, format: "JSONEachRow" });
          return await result.json();
        } catch (error) {
          throw readError(error, limits);
        }
      }),
    );
}

const settings = {
  output_format_json_quote_64bit_integers: 0,
  date_time_output_format: "iso",
} as const;

let sharedChdb: { path: string; client: ClickHouseClient; users: number } | null = null;

/**
 * `@clickhouse/client` against CLICKHOUSE_URL, or against chdb in `CHDB_PATH` (default `$DATA_DIR/ch`). chdb binds one
 * data directory per process, so every store opened in this process shares one engine.
 */
export function openClickHouse(config: Config): ClickHouseStore {
  const { clickhouse, dataDir, chdbPath: path } = config;
  if (clickhouse.url) {
    const client = createClient({
      url: clickhouse.url,
      username: clickhouse.user,
      password: clickhouse.password,
      clickhouse_settings: settings,
      max_open_connections: 20,
      request_timeout: 120_000,
    });
    return { client, database: clickhouse.database, embedded: false, stagingDir: null, read: readerOf(client, config.reads, false), close: () => client.close() };
  }
  if (sharedChdb && sharedChdb.path !== path) {
    throw new Error(`chdb is already open on ${sharedChdb.path}; one data directory per process`);
  }
  if (!sharedChdb) {
    mkdirSync(path, { recursive: true });
    const client = createClient({ connection: createChdbConnection({ path }) as never, clickhouse_settings: settings });
    sharedChdb = { path, client, users: 0 };
  }
  const engine = sharedChdb;
  engine.users++;
  const stagingDir = join(dataDir, "ch-staging");
  mkdirSync(stagingDir, { recursive: true });
  return {
    client: engine.client,
    database: clickhouse.database,
    embedded: true,
    stagingDir,
    read: readerOf(engine.client, config.reads, true),
    async close() {
      if (--engine.users > 0) return;
      sharedChdb = null;
      await engine.client.close();
    },
  };
}
