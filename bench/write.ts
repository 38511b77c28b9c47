// Span write throughput into chdb: the WAL writer (RowBinary segments + INSERT … SELECT FROM file()) against inline
// JSONEachRow through `client.insert`. `bun run bench/write.ts [rows]`; uses a temporary data directory.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadConfig } from "../src/config";
import { openClickHouse, type ClickHouseStore } from "../src/db/clickhouse";
import { migrateClickHouse } from "../src/db/migrate";
import { BackpressureError } from "../src/ingest/batch";
import type { SpanRow } from "../src/ingest/row";
import { encodeSpanRows } from "../src/ingest/rowbinary";
import { spanWriterOptions, startSpanWriter } from "../src/ingest/write";
import { createLogger } from "../src/lib/log";
import { chatSpanRow } from "../test/span-row-fixtures";

const ROWS = Number(process.argv[2] ?? 200_000);
const ROWS_PER_REQUEST = 100;
const CONCURRENT_REQUESTS = 16;
const JSON_BATCH_ROWS = 10_000;

const dataDir = mkdtempSync(join(tmpdir(), "vigil-bench-write-"));
const log = createLogger("warn");
// INGEST_FLUSH_ROWS, INGEST_FLUSH_MS and the rest apply; CLICKHOUSE_URL benchmarks a server instead of chdb.
const config = loadConfig({ ...process.env, DATA_DIR: dataDir, CHDB_PATH: "", LOG_LEVEL: "warn" });

const engine = openClickHouse(config);

async function freshStore(database: string): Promise<ClickHouseStore> {
  const store = { ...engine, database };
  await migrateClickHouse(store, null, log);
  return store;
}

async function countSpans(store: ClickHouseStore) {
  const result = await store.client.query({ query: `SELECT count() AS n FROM ${store.database}.spans`, format: "JSONEachRow" });
  return (await result.json<{ n: number }>())[0].n;
}

const rate = (rows: number, ms: number) => `${Math.round(rows / (ms / 1000)).toLocaleString("en").padStart(8)} rows/s`;

const rows: SpanRow[] = Array.from({ length: ROWS }, (_, index) => chatSpanRow(index, {}, 3_400));
const requests = Array.from({ length: Math.ceil(ROWS / ROWS_PER_REQUEST) }, (_, index) => rows.slice(index * ROWS_PER_REQUEST, (index + 1) * ROWS_PER_REQUEST));
const bytesPerRow = encodeSpanRows(rows.slice(0, 1000)).byteLength / 1000;
console.log(`${ROWS.toLocaleString("en")} rows of ~${Math.round(bytesPerRow)} B RowBinary, ${ROWS_PER_REQUEST} per request, ${CONCURRENT_REQUESTS} requests in flight`);

async function benchWriter() {
  const store = await freshStore("bench_wal");
  const writer = await startSpanWriter({ ...spanWriterOptions(config, store, log), walDir: join(dataDir, "wal") });
  const started = performance.now();
  let next = 0;
  let refusals = 0;
  const client = async () => {
    for (let index = next++; index < requests.length; index = next++) {
      const request = requests[index];
      for (;;) {
        try {
          await writer.accept(request, request.length * bytesPerRow);
          break;
        } catch (error) {
          if (!(error instanceof BackpressureError)) throw error;
          refusals++;
          await Bun.sleep(50);
        }
      }
    }
  };
  await Promise.all(Array.from({ length: CONCURRENT_REQUESTS }, client));
  const acknowledged = performance.now() - started;
  await writer.flush();
  const inserted = performance.now() - started;
  const { inserts } = writer.stats();
  await writer.close();
  if ((await countSpans(store)) !== ROWS) throw new Error("writer lost or doubled rows");
  console.log(`writer, acknowledged (fsynced in the WAL) ${rate(ROWS, acknowledged)}`);
  console.log(`writer, inserted into ClickHouse         ${rate(ROWS, inserted)}  (${inserts} inserts, ${refusals} 503s)`);
}

async function benchJsonEachRow() {
  const store = await freshStore("bench_json");
  const started = performance.now();
  for (let first = 0; first < ROWS; first += JSON_BATCH_ROWS) {
    await store.client.insert({ table: `${store.database}.spans`, values: rows.slice(first, first + JSON_BATCH_ROWS), format: "JSONEachRow" });
  }
  const elapsed = performance.now() - started;
  if ((await countSpans(store)) !== ROWS) throw new Error("JSONEachRow lost or doubled rows");
  console.log(`client.insert JSONEachRow, ${JSON_BATCH_ROWS} per insert ${rate(ROWS, elapsed)}`);
}

try {
  await benchWriter();
  await benchJsonEachRow();
} finally {
  await engine.close();
  rmSync(dataDir, { recursive: true, force: true });
}
