// Opens a stopped Vigil's chdb data directly and prints, as one JSON line, what `spans` and each roll-up hold per
// trace and per session. A child process: chdb binds one data directory per process. Args: <chdbPath> <database>.
import { createClient } from "@clickhouse/client";
import { createChdbConnection } from "chdb/connection";

const [path, database] = process.argv.slice(2);
const client = createClient({ connection: createChdbConnection({ path: path! }) as never, clickhouse_settings: { output_format_json_quote_64bit_integers: 0 } });
const rows = async (query: string) => (await client.query({ query, format: "JSONEachRow" })).json<Record<string, number | string>>();
const result = {
  spanRows: await rows(`SELECT trace_id, count() AS rows, uniqExact(span_id) AS spans FROM ${database}.spans GROUP BY trace_id`),
  traces: await rows(`SELECT trace_id, sum(span_count) AS spans FROM ${database}.traces GROUP BY trace_id`),
  sessions: await rows(`SELECT session_id, sum(span_count) AS spans FROM ${database}.sessions GROUP BY session_id`),
};
console.log(JSON.stringify(result));
await client.close();
