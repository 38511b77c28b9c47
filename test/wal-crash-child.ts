// Child of the write-ahead log crash test: acknowledges span rows while every ClickHouse insert fails, printing the
// number of acknowledged rows after each request, until it is killed. Args: <dataDir> <walDir> <organizationId>.
import { loadConfig } from "../src/config";
import { openClickHouse } from "../src/db/clickhouse";
import { migrateClickHouse } from "../src/db/migrate";
import { spanWriterOptions, startSpanWriter } from "../src/ingest/write";
import { createLogger } from "../src/lib/log";
import { chatSpanRow } from "./span-row-fixtures";

const [dataDir, walDir, organization] = process.argv.slice(2);
const log = createLogger("silent");
const config = loadConfig({ DATA_DIR: dataDir, CLICKHOUSE_DATABASE: "crash" });
const ch = openClickHouse(config);
await migrateClickHouse(ch, null, log);
const down = new Proxy(ch.client, {
  get(target, key) {
    if (key === "command") return () => Promise.reject(new Error("injected: ClickHouse is down"));
    const value = Reflect.get(target, key, target);
    return typeof value === "function" ? value.bind(target) : value;
  },
});
const writer = await startSpanWriter({ ...spanWriterOptions(config, { ...ch, client: down }, log), walDir, retryDelayMs: 5, maxRetryDelayMs: 20 });

const ROWS_PER_REQUEST = 50;
for (let acknowledged = 0; ; acknowledged += ROWS_PER_REQUEST) {
  const rows = Array.from({ length: ROWS_PER_REQUEST }, (_, index) => chatSpanRow(acknowledged + index, { organization_id: organization }, 1024));
  await writer.accept(rows, ROWS_PER_REQUEST * 1024);
  process.stdout.write(`acknowledged ${acknowledged + ROWS_PER_REQUEST}\n`);
}
