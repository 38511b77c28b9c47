import { beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import type { LatitudeClient } from "@latitude-data/sdk";
import type { Vigil } from "../src/server";
import { insertSpans, newTraceId, spanRow, tenantOf, textMessages, type Tenant } from "./fixtures/spans";
import { bootstrapAccount, sharedVigil } from "./helpers";
import { sdkFailure } from "./sdk";

setDefaultTimeout(60_000);

let vigil: Vigil;
let client: LatitudeClient;
let slug: string;
let tenant: Tenant;

const start = Date.now() - 3600_000;
const earlier = newTraceId();
const first = newTraceId();
const second = newTraceId();
const spans = { update: "2000000000000001", deleteRecord: "2000000000000002", note: "2000000000000003", unsaved: "2000000000000004", same: "2000000000000005", dropStore: "2000000000000006" };
const records = (...list: { id?: string; content: unknown }[]) => ({ "gen_ai.memory.records": JSON.stringify(list) });

beforeAll(async () => {
  vigil = await sharedVigil();
  const created = await bootstrapAccount(vigil.url, { projectName: "Memory" });
  client = created.client;
  slug = created.account.projectSlug;
  tenant = await tenantOf(vigil.ctx, created.account.apiKey, slug);
  const memorySpan = (trace_id: string, session_id: string, at: number, operation: string, store: string, fields: Partial<Parameters<typeof spanRow>[1]> = {}) =>
    spanRow(tenant, { trace_id, session_id, startMs: start + at, durationMs: 10, operation, memory_store_id: store, name: operation, ...fields });
  await insertSpans(vigil.ctx, [
    // What another session left in the stores earlier.
    memorySpan(earlier, "other-session", 0, "update_memory", "prefs", { memory_record_id: "r1", attr_string: records({ content: "likes tea" }) }),
    memorySpan(earlier, "other-session", 1, "update_memory", "prefs", { attr_string: records({ id: "r3", content: "old address" }, { id: "r5", content: "same" }) }),
    memorySpan(earlier, "other-session", 2, "update_memory", "scratch", { memory_record_id: "tmp", input_messages: textMessages(["user", "draft"]) }),
    // The session: a read and an edit in its first trace…
    memorySpan(first, "session-m", 1000, "search_memory", "prefs", { attr_string: { ...records({ id: "r1", content: "likes tea" }), "gen_ai.memory.query.text": "drinks" } }),
    memorySpan(first, "session-m", 1100, "update_memory", "prefs", { span_id: spans.update, memory_record_id: "r1", attr_string: records({ content: "likes tea and coffee" }) }),
    // …then, in its second trace, a note in the unattributed store, a deletion, a write whose body was
    // not captured, a write that changes nothing and a dropped store.
    memorySpan(second, "session-m", 2000, "update_memory", "", { span_id: spans.note, memory_record_id: "r2", input_messages: textMessages(["user", "note: call back"]) }),
    memorySpan(second, "session-m", 2100, "delete_memory", "prefs", { span_id: spans.deleteRecord, memory_record_id: "r3" }),
    memorySpan(second, "session-m", 2200, "update_memory", "prefs", { span_id: spans.unsaved, memory_record_id: "r4" }),
    memorySpan(second, "session-m", 2300, "update_memory", "prefs", { span_id: spans.same, attr_string: records({ id: "r5", content: "same" }) }),
    memorySpan(second, "session-m", 2400, "search_memory", "", { memory_record_id: "r2", output_messages: textMessages(["tool", "note: call back"]) }),
    memorySpan(second, "session-m", 2500, "delete_memory_store", "scratch", { span_id: spans.dropStore }),
    memorySpan(second, "session-m", 2600, "chat", ""),
  ]);
});

describe("session memory", () => {
  test("the summary has each record's read and written tokens and the session's totals", async () => {
    const summary = await client.sessions.getMemory(slug, "session-m");
    expect(summary).toEqual({
      records: [
        { storeId: "", recordId: "r2", readTokens: 4, tokensAdded: 4, tokensRemoved: 0 },
        { storeId: "prefs", recordId: "r1", readTokens: 3, tokensAdded: 3, tokensRemoved: 0 },
        { storeId: "prefs", recordId: "r3", readTokens: 0, tokensAdded: 0, tokensRemoved: 3 },
        { storeId: "prefs", recordId: "r4", readTokens: 0, tokensAdded: 0, tokensRemoved: 0 },
        { storeId: "prefs", recordId: "r5", readTokens: 0, tokensAdded: 0, tokensRemoved: 0 },
        { storeId: "scratch", recordId: "tmp", readTokens: 0, tokensAdded: 0, tokensRemoved: 2 },
      ],
      total: { readTokens: 7, tokensAdded: 7, tokensRemoved: 5, writeRecords: 6 },
    });
  });

  test("the changes are before/after diffs; a write that changed nothing is left out", async () => {
    const { records: changes } = await client.sessions.getMemoryChanges(slug, "session-m");
    expect(changes).toEqual([
      { storeId: "", recordId: "r2", kind: "added", beforeBody: null, afterBody: "note: call back", tokensAdded: 4, tokensRemoved: 0, degraded: false, lastChangeSpanId: spans.note },
      { storeId: "prefs", recordId: "r1", kind: "updated", beforeBody: "likes tea", afterBody: "likes tea and coffee", tokensAdded: 3, tokensRemoved: 0, degraded: false, lastChangeSpanId: spans.update },
      { storeId: "prefs", recordId: "r3", kind: "removed", beforeBody: "old address", afterBody: null, tokensAdded: 0, tokensRemoved: 3, degraded: false, lastChangeSpanId: spans.deleteRecord },
      { storeId: "prefs", recordId: "r4", kind: "added", beforeBody: null, afterBody: null, tokensAdded: 0, tokensRemoved: 0, degraded: true, lastChangeSpanId: spans.unsaved },
      { storeId: "scratch", recordId: "tmp", kind: "removed", beforeBody: "draft", afterBody: null, tokensAdded: 0, tokensRemoved: 2, degraded: false, lastChangeSpanId: spans.dropStore },
    ]);
  });

  test("traceId restricts the session to one of its traces", async () => {
    const summary = await client.sessions.getMemory(slug, "session-m", { traceId: first });
    expect(summary).toEqual({
      records: [{ storeId: "prefs", recordId: "r1", readTokens: 3, tokensAdded: 3, tokensRemoved: 0 }],
      total: { readTokens: 3, tokensAdded: 3, tokensRemoved: 0, writeRecords: 1 },
    });
    const changes = await client.sessions.getMemoryChanges(slug, "session-m", { traceId: second });
    expect(changes.records.map((change) => `${change.storeId}/${change.recordId}:${change.kind}`)).toEqual(["/r2:added", "prefs/r3:removed", "prefs/r4:added", "scratch/tmp:removed"]);
    expect((await sdkFailure(client.sessions.getMemory(slug, "session-m", { traceId: earlier }))).statusCode).toBe(404);
  });

  test("the trace-scoped twins answer for one trace; a trace's earlier body comes from before it", async () => {
    const summary = await client.traces.getMemory(slug, first);
    expect(summary.total).toEqual({ readTokens: 3, tokensAdded: 3, tokensRemoved: 0, writeRecords: 1 });
    const changes = await client.traces.getMemoryChanges(slug, second);
    expect(changes.records.find((change) => change.recordId === "r3")).toMatchObject({ beforeBody: "old address", kind: "removed" });
    const quiet = await client.traces.getMemory(slug, earlier);
    expect(quiet.total.writeRecords).toBe(4);
  });

  test("a record's earlier body is found however many other writes came after it", async () => {
    const other = await bootstrapAccount(vigil.url);
    const otherTenant = await tenantOf(vigil.ctx, other.account.apiKey, other.account.projectSlug);
    const write = (session_id: string, at: number, recordId: string, content: string, span_id?: string) =>
      spanRow(otherTenant, {
        trace_id: newTraceId(),
        ...(span_id ? { span_id } : {}),
        session_id,
        startMs: start + at,
        durationMs: 1,
        operation: "update_memory",
        name: "update_memory",
        memory_store_id: "notes",
        memory_record_id: recordId,
        attr_string: records({ content }),
      });
    await insertSpans(vigil.ctx, [
      write("writer", 0, "kept", "first body"),
      // More writes to the same store by others than one page of history holds.
      ...Array.from({ length: 5001 }, (_, i) => write("others", 1 + i, `other-${i}`, `note ${i}`)),
      write("editor", 10_000, "kept", "first body, edited", "2000000000000099"),
    ]);
    const { records: changes } = await other.client.sessions.getMemoryChanges(other.account.projectSlug, "editor");
    expect(changes).toEqual([
      { storeId: "notes", recordId: "kept", kind: "updated", beforeBody: "first body", afterBody: "first body, edited", tokensAdded: 2, tokensRemoved: 0, degraded: false, lastChangeSpanId: "2000000000000099" },
    ]);
  }, 60_000);

  test("an unknown session or trace is a 404", async () => {
    expect((await sdkFailure(client.sessions.getMemory(slug, "no-such-session"))).statusCode).toBe(404);
    expect((await sdkFailure(client.traces.getMemoryChanges(slug, newTraceId()))).statusCode).toBe(404);
    const stranger = await bootstrapAccount(vigil.url);
    expect((await sdkFailure(stranger.client.sessions.getMemory(stranger.account.projectSlug, "session-m"))).statusCode).toBe(404);
  });
});
