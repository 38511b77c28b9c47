// The `spans` table and its roll-ups as the storage design asks for them: retention by TTL per row, the
// tenant-first sort key, monthly partitions and compressed message columns.
import { beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import type { Vigil } from "../src/server";
import { insertSpans, newTraceId, spanRow, tenantOf, type Tenant } from "./fixtures/spans";
import { bootstrapAccount, sharedVigil } from "./helpers";

setDefaultTimeout(60_000);

let vigil: Vigil;
let tenant: Tenant;
const day = 86_400_000;

beforeAll(async () => {
  vigil = await sharedVigil();
  const { account } = await bootstrapAccount(vigil.url, { projectName: `Storage ${Math.random().toString(36).slice(2, 8)}` });
  tenant = await tenantOf(vigil.ctx, account.apiKey, account.projectSlug);
});

async function rows<T>(query: string, params: Record<string, unknown> = {}): Promise<T[]> {
  const result = await vigil.ctx.ch.client.query({ query, query_params: params, format: "JSONEachRow" });
  return result.json<T>();
}

describe("retention", () => {
  test("spans and their roll-ups past their retention are deleted; the default is 90 days, retention_days overrides it", async () => {
    const traces = { recent: newTraceId(), expired: newTraceId(), keptLonger: newTraceId(), expiredShort: newTraceId() };
    await insertSpans(vigil.ctx, [
      spanRow(tenant, { trace_id: traces.recent, startMs: Date.now() - day }),
      spanRow(tenant, { trace_id: traces.expired, startMs: Date.now() - 100 * day }),
      spanRow(tenant, { trace_id: traces.keptLonger, startMs: Date.now() - 100 * day, retention_days: 365 }),
      spanRow(tenant, { trace_id: traces.expiredShort, startMs: Date.now() - 10 * day, retention_days: 7 }),
    ]);
    const { database } = vigil.ctx.ch;
    for (const table of ["spans", "traces"]) {
      await vigil.ctx.ch.client.command({ query: `ALTER TABLE ${database}.${table} MATERIALIZE TTL SETTINGS mutations_sync = 2` });
      const kept = await rows<{ trace_id: string }>(`SELECT DISTINCT trace_id FROM ${database}.${table} WHERE project_id = {project:String} ORDER BY trace_id`, {
        project: tenant.projectId,
      });
      expect(kept.map((row) => row.trace_id)).toEqual([traces.recent, traces.keptLonger].sort());
    }
  });
});

describe("layout", () => {
  test("tenant first, then time, then trace in the sort key; monthly partitions; ZSTD on message columns", async () => {
    const [table] = await rows<{ sorting_key: string; partition_key: string }>(
      "SELECT sorting_key, partition_key FROM system.tables WHERE database = {database:String} AND name = 'spans'",
      { database: vigil.ctx.ch.database },
    );
    expect(table).toEqual({ sorting_key: "organization_id, project_id, start_time, trace_id, span_id", partition_key: "toYYYYMM(start_time)" });
    const columns = await rows<{ name: string; compression_codec: string }>(
      "SELECT name, compression_codec FROM system.columns WHERE database = {database:String} AND table = 'spans' AND compression_codec != ''",
      { database: vigil.ctx.ch.database },
    );
    const zstd = columns.filter((column) => column.compression_codec.includes("ZSTD")).map((column) => column.name);
    expect(zstd).toEqual(expect.arrayContaining(["input_messages", "output_messages", "system_instructions", "tool_input", "tool_output", "message_text"]));
  });
});
