import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { createClient } from "@clickhouse/client";
import { appendFileSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { ClickHouseStore } from "../src/db/clickhouse";
import { BackpressureError, type BatchLimits } from "../src/ingest/batch";
import type { SpanRow } from "../src/ingest/row";
import { completeRows, encodeSpanRows, spanStructure } from "../src/ingest/rowbinary";
import { assertSpanColumns, segmentInserter, spanWriterOptions, startSpanWriter, type SpanWriterOptions } from "../src/ingest/write";
import { migrateClickHouse } from "../src/db/migrate";
import { createLogger } from "../src/lib/log";
import { sharedVigil, testRoot } from "./helpers";
import { chatSpanRow } from "./span-row-fixtures";

setDefaultTimeout(60_000);

type Store = Pick<ClickHouseStore, "client" | "database" | "embedded">;

const silent = createLogger((process.env.TEST_LOG_LEVEL as "info") || "silent");
let dirs = 0;
const freshDir = (label: string) => join(testRoot, "ingest-write", `${label}-${++dirs}`);
const sqlString = (value: string) => `'${value.replaceAll("\\", "\\\\").replaceAll("'", "\\'")}'`;

/** The shared Vigil's real chdb store, with inserts counted, slowed by `delayMs` and, while `down`, failing like an unreachable server. */
async function flakyStore() {
  const { ch } = (await sharedVigil()).ctx;
  const state = { down: false, delayMs: 0, inserts: 0, failures: 0 };
  const client = new Proxy(ch.client, {
    get(target, key) {
      if (key === "command") {
        return async (params: { query: string }) => {
          if (params.query.startsWith("INSERT")) {
            if (state.down) {
              state.failures++;
              throw new Error("injected: connect ECONNREFUSED");
            }
            state.inserts++;
            await Bun.sleep(state.delayMs);
          }
          return target.command(params);
        };
      }
      const value = Reflect.get(target, key, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
  const store: Store = { client, database: ch.database, embedded: true };
  return { store, state };
}

async function openWriter(store: Store, walDir: string, limits: Partial<BatchLimits> = {}, options: Partial<SpanWriterOptions> = {}) {
  const vigil = await sharedVigil();
  const base = spanWriterOptions(vigil.ctx.config, vigil.ctx.ch, silent);
  return startSpanWriter({
    ...base,
    store,
    walDir,
    retryDelayMs: 5,
    maxRetryDelayMs: 40,
    closeTimeoutMs: 2_000,
    ...options,
    limits: { ...base.limits, flushIntervalMs: 60_000, ...limits },
  });
}

/** Rows of a fresh organization, so each test reads back only its own. */
function rowsOf(count: number, overrides: Partial<SpanRow> = {}, approxBytes = 2048) {
  const organization = `org_${Math.random().toString(36).slice(2, 12)}`;
  const rows = Array.from({ length: count }, (_, index) => chatSpanRow(index, { organization_id: organization, ...overrides }, approxBytes));
  return { organization, rows };
}

async function select<T>(store: Store, query: string): Promise<T[]> {
  const result = await store.client.query({ query, format: "JSONEachRow" });
  return result.json<T>();
}

async function spanCount(store: Store, organization: string) {
  const [row] = await select<{ n: number }>(store, `SELECT count() AS n FROM ${store.database}.spans WHERE organization_id = ${sqlString(organization)}`);
  return row.n;
}

async function traceTotals(store: Store, organization: string) {
  const [row] = await select<{ traces: number; spans: number; tokens: number }>(
    store,
    `SELECT count() AS traces, sum(spans) AS spans, sum(tokens) AS tokens FROM (
       SELECT trace_id, sum(span_count) AS spans, sum(tokens_input) AS tokens FROM ${store.database}.traces
       WHERE organization_id = ${sqlString(organization)} GROUP BY trace_id)`,
  );
  return row;
}

const walFiles = (dir: string) => readdirSync(dir).filter((file) => file.endsWith(".rowbinary"));
const sum = (values: number[]) => values.reduce((total, value) => total + value, 0);

describe("span writer", () => {
  test("a span sent again, in the same segment or a later one, is stored and rolled up once", async () => {
    const { store } = await flakyStore();
    const writer = await openWriter(store, freshDir("duplicates"));
    const { organization, rows } = rowsOf(60);
    // Twice into one segment, then part of it again once that segment is in ClickHouse.
    await Promise.all([writer.accept(rows, 60 * 2048), writer.accept(rows.slice(0, 30), 30 * 2048)]);
    await writer.flush();
    await writer.accept(rows.slice(20, 60), 40 * 2048);
    await writer.flush();
    expect(writer.stats().inserts).toBe(2);
    expect(await spanCount(store, organization)).toBe(60);
    expect(await traceTotals(store, organization)).toEqual({ traces: new Set(rows.map((row) => row.trace_id)).size, spans: 60, tokens: sum(rows.map((row) => row.tokens_input)) });
    // The same span id in another trace or project is another span.
    await writer.accept([{ ...rows[0], trace_id: "f".repeat(32) }, { ...rows[0], project_id: "another-project" }], 2 * 2048);
    await writer.flush();
    expect(await spanCount(store, organization)).toBe(62);
    await writer.close();
  });

  test("inserts leave the message words index to merges, which build it", async () => {
    const { ch } = (await sharedVigil()).ctx;
    const store = { ...ch, database: `words_${Math.random().toString(36).slice(2, 8)}` };
    await migrateClickHouse(store, null, silent);
    const partsWithWordsIndex = async () => {
      const parts = await select<{ path: string }>(store, `SELECT path FROM system.parts WHERE database = ${sqlString(store.database)} AND table = 'spans' AND active`);
      return parts.map(({ path }) => readdirSync(path).some((file) => file.startsWith("skp_idx_message_words_idx")));
    };
    try {
      await ch.client.command({ query: `SYSTEM STOP MERGES ${store.database}.spans` });
      const writer = await openWriter(store, freshDir("words-index"));
      for (const batch of [rowsOf(20), rowsOf(20)]) {
        await writer.accept(batch.rows, 20 * 2048);
        await writer.flush();
      }
      await writer.close();
      expect(await partsWithWordsIndex()).toEqual([false, false]);
      await ch.client.command({ query: `SYSTEM START MERGES ${store.database}.spans` });
      await ch.client.command({ query: `OPTIMIZE TABLE ${store.database}.spans FINAL` });
      expect(await partsWithWordsIndex()).toEqual([true]);
    } finally {
      await ch.client.command({ query: `DROP DATABASE ${store.database}` });
    }
  });

  test("rows arrive exactly in spans and in the trace roll-up", async () => {
    const { store } = await flakyStore();
    const writer = await openWriter(store, freshDir("exact"));
    const { organization, rows } = rowsOf(500);
    await Promise.all([writer.accept(rows.slice(0, 250), 250 * 2048), writer.accept(rows.slice(250), 250 * 2048)]);
    await writer.flush();

    const stored = await select<Record<string, unknown>>(
      store,
      `SELECT * EXCEPT (start_time, end_time, ingested_at, wal_segment), toString(toUnixTimestamp64Nano(start_time)) AS start_time, toString(toUnixTimestamp64Nano(end_time)) AS end_time
       FROM ${store.database}.spans WHERE organization_id = ${sqlString(organization)} ORDER BY span_id`,
    );
    expect(stored).toEqual([...rows].sort((a, b) => a.span_id.localeCompare(b.span_id)) as unknown as Record<string, unknown>[]);

    const traces = await select<Record<string, unknown>>(
      store,
      `SELECT trace_id, sum(span_count) AS span_count, sum(error_count) AS error_count, sum(tokens_input) AS tokens_input,
              sum(cost_total_microcents) AS cost, toString(toUnixTimestamp64Nano(min(start_time))) AS start_time,
              toString(toUnixTimestamp64Nano(max(end_time))) AS end_time, any(root_span_id) AS root_span_id,
              toString(toUnixTimestamp64Nano(min(first_token_at))) AS first_token_at, argMaxMerge(last_llm_span_id) AS last_llm_span_id,
              arraySort(groupUniqArrayArray(tags)) AS tags
       FROM ${store.database}.traces WHERE organization_id = ${sqlString(organization)} GROUP BY trace_id ORDER BY trace_id`,
    );
    const byTrace = Map.groupBy(rows, (row) => row.trace_id);
    const expected = [...byTrace.entries()]
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([traceId, spans]) => {
        const firstStarted = spans.reduce((a, b) => (BigInt(b.start_time) < BigInt(a.start_time) ? b : a));
        const lastEnded = spans.reduce((a, b) => (BigInt(b.end_time) > BigInt(a.end_time) ? b : a));
        return {
          trace_id: traceId,
          span_count: spans.length,
          error_count: spans.filter((span) => span.status_code === "error").length,
          tokens_input: sum(spans.map((span) => span.tokens_input)),
          cost: sum(spans.map((span) => span.cost_total_microcents)),
          start_time: firstStarted.start_time,
          end_time: lastEnded.end_time,
          root_span_id: spans.find((span) => span.parent_span_id === "")!.span_id,
          first_token_at: String(
            spans
              .filter((span) => ["chat", "text_completion", "generate_content"].includes(span.operation) && !span.is_usage_wrapper && span.time_to_first_token_ns > 0)
              .map((span) => BigInt(span.start_time) + BigInt(span.time_to_first_token_ns))
              .reduce((a, b) => (b < a ? b : a)),
          ),
          last_llm_span_id: lastEnded.span_id,
          tags: [...new Set(spans.flatMap((span) => span.tags))].sort(),
        };
      });
    expect(traces).toEqual(expected);
    expect(writer.stats()).toMatchObject({ walBytes: 0, heldBytes: 0, pendingSegments: 0, insertedRows: 500 });
    await writer.close();
  });

  test("concurrent requests are batched into one segment and one insert", async () => {
    const { store, state } = await flakyStore();
    const walDir = freshDir("concurrent");
    const writer = await openWriter(store, walDir, { flushRows: 100_000 });
    const { organization, rows } = rowsOf(10_000, {}, 512);
    const requests: Promise<void>[] = [];
    for (let wave = 0; wave < 20; wave++) {
      for (let request = 0; request < 10; request++) {
        const first = (wave * 10 + request) * 50;
        requests.push(writer.accept(rows.slice(first, first + 50), 50 * 512));
      }
      await Bun.sleep(2);
    }
    await Promise.all(requests);
    expect(walFiles(walDir)).toHaveLength(1);
    expect(state.inserts).toBe(0);
    await writer.flush();
    expect(state.inserts).toBe(1);
    expect(await spanCount(store, organization)).toBe(10_000);
    expect(walFiles(walDir)).toHaveLength(0);
    await writer.close();
  });

  test("a free inserter takes the open segment at flushRows rows without waiting for the interval", async () => {
    const { store, state } = await flakyStore();
    const writer = await openWriter(store, freshDir("rows"), { flushRows: 1_000 });
    const { organization, rows } = rowsOf(1_000, {}, 256);
    await writer.accept(rows, 1_000 * 256);
    const deadline = performance.now() + 5_000;
    while ((await spanCount(store, organization)) < 1_000 && performance.now() < deadline) await Bun.sleep(10);
    expect(await spanCount(store, organization)).toBe(1_000);
    expect(state.inserts).toBe(1);
    await writer.close();
  });

  test("while an insert is slow, the rows arriving meanwhile gather into one larger insert", async () => {
    const { store, state } = await flakyStore();
    state.delayMs = 300;
    const writer = await openWriter(store, freshDir("slow"), { flushRows: 100 });
    const { organization, rows } = rowsOf(1_000, {}, 256);
    for (let first = 0; first < rows.length; first += 100) await writer.accept(rows.slice(first, first + 100), 100 * 256);
    await writer.flush();
    expect(state.inserts).toBeGreaterThanOrEqual(2);
    expect(state.inserts).toBeLessThanOrEqual(3);
    expect(await spanCount(store, organization)).toBe(1_000);
    await writer.close();
  });

  test("without flush, rows reach ClickHouse within the flush interval", async () => {
    const { store } = await flakyStore();
    const writer = await openWriter(store, freshDir("interval"), { flushIntervalMs: 100 });
    const { organization, rows } = rowsOf(20);
    await writer.accept(rows, 20 * 2048);
    const deadline = performance.now() + 5_000;
    while ((await spanCount(store, organization)) < 20 && performance.now() < deadline) await Bun.sleep(25);
    expect(await spanCount(store, organization)).toBe(20);
    await writer.close();
  });

  test("an insert failure is retried until ClickHouse is back, and nothing is lost or doubled", async () => {
    const { store, state } = await flakyStore();
    const writer = await openWriter(store, freshDir("retry"));
    const { organization, rows } = rowsOf(300);
    state.down = true;
    await writer.accept(rows.slice(0, 100), 100 * 2048);
    const flushed = writer.flush();
    await writer.accept(rows.slice(100), 200 * 2048);
    while (state.failures < 3) await Bun.sleep(5);
    expect(await spanCount(store, organization)).toBe(0);
    expect(writer.stats().pendingSegments).toBeGreaterThan(0);
    state.down = false;
    await flushed;
    await writer.flush();
    expect(await spanCount(store, organization)).toBe(300);
    expect(await traceTotals(store, organization)).toEqual({ traces: 60, spans: 300, tokens: sum(rows.map((row) => row.tokens_input)) });
    expect(writer.stats().failedInserts).toBeGreaterThanOrEqual(3);
    await writer.close();
  });

  test("an insert into a missing table is retried until the table is back", async () => {
    const { store } = await flakyStore();
    const writer = await openWriter(store, freshDir("missing-table"));
    const { organization, rows } = rowsOf(50);
    const spans = `${store.database}.spans`;
    await store.client.command({ query: `RENAME TABLE ${spans} TO ${spans}_away` });
    try {
      await writer.accept(rows, 50 * 2048);
      const flushed = writer.flush();
      while (writer.stats().failedInserts < 2) await Bun.sleep(5);
      expect(writer.stats().insertedRows).toBe(0);
      await store.client.command({ query: `RENAME TABLE ${spans}_away TO ${spans}` });
      await flushed;
    } finally {
      await store.client.command({ query: `RENAME TABLE IF EXISTS ${spans}_away TO ${spans}` }).catch(() => {});
    }
    expect(await spanCount(store, organization)).toBe(50);
    expect((await traceTotals(store, organization)).spans).toBe(50);
    await writer.close();
  });

  test("a leftover segment is replayed at start, exactly once even when it was inserted before the crash", async () => {
    const { store, state } = await flakyStore();
    const walDir = freshDir("replay");
    const { organization, rows } = rowsOf(200);

    // ClickHouse is down: the rows are acknowledged from the log, and close gives up inserting them.
    state.down = true;
    const first = await openWriter(store, walDir, {}, { closeTimeoutMs: 50 });
    await first.accept(rows.slice(0, 120), 120 * 2048);
    await first.accept(rows.slice(120), 80 * 2048);
    await first.close();
    const [leftover] = walFiles(walDir);
    expect(walFiles(walDir)).toHaveLength(1);

    // The crash came after the insert and before the segment was removed: insert it once by hand.
    state.down = false;
    const name = leftover.replace(/\.rowbinary$/, "");
    const path = join(walDir, leftover);
    await segmentInserter(store, await assertSpanColumns(store))({
      name,
      path,
      bytes: statSync(path).size,
      rows: 200,
      keys: completeRows(readFileSync(path)).keys,
      structure: spanStructure,
    });
    expect(await spanCount(store, organization)).toBe(200);
    // A torn, unacknowledged tail from the crash is cut at recovery.
    appendFileSync(path, new Uint8Array([40, 1, 2, 3]));

    const second = await openWriter(store, walDir);
    await second.flush();
    expect(await spanCount(store, organization)).toBe(200);
    expect(await traceTotals(store, organization)).toEqual({ traces: 40, spans: 200, tokens: sum(rows.map((row) => row.tokens_input)) });
    expect(walFiles(walDir)).toHaveLength(0);
    await second.close();
  });

  test("after a SIGKILL, every acknowledged row is replayed exactly once", async () => {
    const { store } = await flakyStore();
    const dataDir = freshDir("crash-data");
    const walDir = freshDir("crash-wal");
    const organization = `org_crash_${Math.random().toString(36).slice(2, 10)}`;
    const child = Bun.spawn(["bun", join(import.meta.dir, "wal-crash-child.ts"), dataDir, walDir, organization], { stdout: "pipe", stderr: "inherit" });
    let acknowledged = 0;
    let output = "";
    const decoder = new TextDecoder();
    for await (const chunk of child.stdout) {
      output += decoder.decode(chunk);
      const counts = [...output.matchAll(/acknowledged (\d+)\n/g)];
      if (counts.length > 0) acknowledged = Number(counts[counts.length - 1][1]);
      if (acknowledged >= 3_000) break;
    }
    child.kill("SIGKILL");
    await child.exited;
    expect(acknowledged).toBeGreaterThanOrEqual(3_000);
    expect(walFiles(walDir).length).toBeGreaterThan(0);

    const writer = await openWriter(store, walDir);
    await writer.flush();
    const spans = await select<{ span_id: string }>(store, `SELECT span_id FROM ${store.database}.spans WHERE organization_id = ${sqlString(organization)}`);
    const indexes = spans.map((span) => parseInt(span.span_id, 16) - 1).sort((a, b) => a - b);
    // Every acknowledged row, each once; at most the request in flight at the kill beyond them.
    expect(indexes.length).toBeGreaterThanOrEqual(acknowledged);
    expect(indexes.length).toBeLessThanOrEqual(acknowledged + 50);
    expect(indexes).toEqual(Array.from({ length: indexes.length }, (_, index) => index));
    await writer.close();
  });

  test("a leftover segment that was never inserted is inserted at start", async () => {
    const { store, state } = await flakyStore();
    const walDir = freshDir("replay-new");
    const { organization, rows } = rowsOf(30);
    state.down = true;
    const first = await openWriter(store, walDir, {}, { closeTimeoutMs: 20 });
    await first.accept(rows, 30 * 2048);
    await first.close();
    state.down = false;
    const second = await openWriter(store, walDir);
    await second.flush();
    expect(await spanCount(store, organization)).toBe(30);
    await second.close();
  });

  test("a leftover segment of an earlier row format is inserted by its own structure: columns gone are dropped, new ones defaulted", async () => {
    const { store } = await flakyStore();
    const walDir = freshDir("earlier-format");
    mkdirSync(join(walDir, "formats"), { recursive: true });
    // The earlier version called `memory_record_id` `memory_record_key` and wrote a last column the table no longer has.
    const oldStructure = `${spanStructure.replace("memory_record_id String", "memory_record_key String")}, legacy_note String`;
    writeFileSync(join(walDir, "formats", "0dd0f0a1"), oldStructure);
    const { organization, rows } = rowsOf(12, { memory_record_id: "record-1" });
    const legacyNote = Buffer.from([4, ...Buffer.from("note")]);
    writeFileSync(join(walDir, "0old0run0-000000001.0dd0f0a1.rowbinary"), Buffer.concat(rows.flatMap((row) => [encodeSpanRows([row]), legacyNote])));
    const writer = await openWriter(store, walDir);
    await writer.flush();
    expect(walFiles(walDir)).toHaveLength(0);
    expect(await spanCount(store, organization)).toBe(12);
    const stored = await select<{ memory_record_id: string; name: string }>(
      store,
      `SELECT memory_record_id, name FROM ${store.database}.spans WHERE organization_id = ${sqlString(organization)} ORDER BY span_id`,
    );
    expect(new Set(stored.map((row) => row.memory_record_id))).toEqual(new Set([""]));
    expect(stored.map((row) => row.name).sort()).toEqual(rows.map((row) => row.name).sort());
    await writer.close();
  });

  test("a leftover segment in an unknown row format is moved to quarantine, not inserted", async () => {
    const { store, state } = await flakyStore();
    const walDir = freshDir("quarantine");
    mkdirSync(walDir, { recursive: true });
    const file = "0old0run0-000000001.0badf00d.rowbinary";
    writeFileSync(join(walDir, file), encodeSpanRows(rowsOf(5).rows));
    const writer = await openWriter(store, walDir);
    await writer.flush();
    expect(state.inserts).toBe(0);
    expect(walFiles(walDir)).toHaveLength(0);
    expect(readdirSync(join(walDir, "quarantine"))).toEqual([file]);
    await writer.close();
  });

  test("close inserts everything accepted and empties the log", async () => {
    const { store } = await flakyStore();
    const walDir = freshDir("close");
    const writer = await openWriter(store, walDir);
    const { organization, rows } = rowsOf(100);
    await writer.accept(rows, 100 * 2048);
    await writer.close();
    expect(await spanCount(store, organization)).toBe(100);
    expect(walFiles(walDir)).toHaveLength(0);
    await expect(writer.accept(rows, 1)).rejects.toMatchObject({ reason: "closing" });
  });

  test("a full memory queue refuses with BackpressureError and keeps nothing of the refused rows", async () => {
    const { store } = await flakyStore();
    const writer = await openWriter(store, freshDir("memory"), { queueBytes: 1 << 20 });
    const first = rowsOf(10);
    const second = rowsOf(10);
    const accepted = writer.accept(first.rows, 700_000);
    const refused = writer.accept(second.rows, 700_000);
    await expect(refused).rejects.toBeInstanceOf(BackpressureError);
    await expect(refused).rejects.toMatchObject({ reason: "memory", retryAfterSeconds: 1 });
    await accepted;
    // Once the first group is on disk, the memory is free again.
    await writer.accept(second.rows, 700_000);
    await writer.flush();
    expect(await spanCount(store, first.organization)).toBe(10);
    expect(await spanCount(store, second.organization)).toBe(10);
    await writer.close();
  });

  test("a write-ahead log backlog over its limit refuses until ClickHouse catches up", async () => {
    const { store, state } = await flakyStore();
    const writer = await openWriter(store, freshDir("backlog"), { walBytes: 200_000 });
    const { organization, rows } = rowsOf(200);
    state.down = true;
    let accepted = 0;
    let refusal: unknown = null;
    for (let first = 0; first < rows.length && !refusal; first += 10) {
      try {
        await writer.accept(rows.slice(first, first + 10), 10 * 2048);
        accepted += 10;
      } catch (error) {
        refusal = error;
      }
    }
    expect(refusal).toBeInstanceOf(BackpressureError);
    expect(refusal).toMatchObject({ reason: "backlog" });
    expect(accepted).toBeGreaterThan(0);
    expect(accepted).toBeLessThan(200);
    expect(writer.stats().walBytes).toBeLessThanOrEqual(200_000 + 10 * 2048 * 3);
    state.down = false;
    await writer.flush();
    expect(await spanCount(store, organization)).toBe(accepted);
    await writer.accept(rows.slice(accepted), (200 - accepted) * 2048);
    await writer.flush();
    expect(await spanCount(store, organization)).toBe(200);
    await writer.close();
  });

  test("a failing write-ahead log refuses the request with BackpressureError, and works again once the disk does", async () => {
    const { store } = await flakyStore();
    const walDir = freshDir("disk");
    const writer = await openWriter(store, walDir);
    const refused = rowsOf(10);
    rmSync(walDir, { recursive: true });
    await expect(writer.accept(refused.rows, 10 * 2048)).rejects.toMatchObject({ reason: "storage" });
    mkdirSync(walDir);
    const accepted = rowsOf(10);
    await writer.accept(accepted.rows, 10 * 2048);
    await writer.flush();
    expect(await spanCount(store, refused.organization)).toBe(0);
    expect(await spanCount(store, accepted.organization)).toBe(10);
    expect(writer.stats()).toMatchObject({ heldBytes: 0, walBytes: 0 });
    await writer.close();
  });

  test("a ClickHouse server receives the segment bytes as RowBinary with the deduplication token", async () => {
    const { ch } = (await sharedVigil()).ctx;
    const received: { query: string; body: Uint8Array; params: Record<string, string> }[] = [];
    const stagingDir = freshDir("server-staging");
    mkdirSync(stagingDir, { recursive: true });
    // Stands in for a ClickHouse server: answers queries from chdb and stores inserts through file().
    const server = Bun.serve({
      port: 0,
      async fetch(request) {
        const url = new URL(request.url);
        const body = new Uint8Array(await request.arrayBuffer());
        const insert = url.searchParams.get("query");
        if (!insert) {
          const result = await ch.client.query({ query: new TextDecoder().decode(body).replace(/\s*FORMAT JSONEachRow\s*$/, ""), format: "JSONEachRow" });
          return new Response(await result.text());
        }
        const params = Object.fromEntries(
          [...url.searchParams].filter(([name]) => name.startsWith("param_")).map(([name, value]) => [name.slice(6), value]),
        );
        received.push({ query: insert, body, params });
        const path = join(stagingDir, `${received.length}.bin`);
        writeFileSync(path, body);
        // Array parameters arrive in ClickHouse's text format: ['a','b'].
        const arrayOf = (text: string) => (text === "[]" ? [] : text.slice(1, -1).split(",").map((item) => item.slice(1, -1)));
        await ch.client.command({
          query: insert
            .replace(`input(${sqlString(spanStructure)})`, `file(${sqlString(path)}, 'RowBinary', ${sqlString(spanStructure)})`)
            .replace(/ FORMAT RowBinary$/, ""),
          query_params: Object.fromEntries(Object.entries(params).map(([name, value]) => [name, value.startsWith("[") ? arrayOf(value) : value])),
        });
        return new Response("");
      },
    });
    const client = createClient({ url: `http://127.0.0.1:${server.port}` });
    try {
      const store: Store = { client, database: ch.database, embedded: false };
      const walDir = freshDir("server");
      const writer = await openWriter(store, walDir);
      const { organization, rows } = rowsOf(40);
      await writer.accept(rows, 40 * 2048);
      const [segment] = walFiles(walDir);
      const segmentBytes = readFileSync(join(walDir, segment));
      await writer.flush();
      expect(received).toHaveLength(1);
      expect(received[0].query).toStartWith(`INSERT INTO ${ch.database}.spans (organization_id, project_id,`);
      expect(received[0].query).toContain(`insert_deduplication_token = 'vigil-wal-${segment.replace(/\.rowbinary$/, "")}'`);
      expect(received[0].query).toContain(" FROM input(");
      expect(received[0].query).toEndWith("FORMAT RowBinary");
      expect(Buffer.from(received[0].body).equals(segmentBytes)).toBe(true);
      // The lookup of spans already stored names the segment's traces.
      expect(received[0].params.traceIds).toBe(`[${[...new Set(rows.map((row) => `'${row.trace_id}'`))].join(",")}]`);
      expect(await spanCount(store, organization)).toBe(40);

      // The same rows again, as a retried export: the server is asked, and stores nothing twice.
      await writer.accept(rows, 40 * 2048);
      await writer.flush();
      expect(received).toHaveLength(2);
      expect(await spanCount(store, organization)).toBe(40);
      expect(await traceTotals(store, organization)).toEqual({ traces: new Set(rows.map((row) => row.trace_id)).size, spans: 40, tokens: sum(rows.map((row) => row.tokens_input)) });
      await writer.close();
    } finally {
      await client.close();
      server.stop(true);
    }
  });

  test("the writer refuses to start on a spans table that does not match the encoder", async () => {
    const { ch } = (await sharedVigil()).ctx;
    const database = `mismatch_${Math.random().toString(36).slice(2, 8)}`;
    await ch.client.command({ query: `CREATE DATABASE ${database}` });
    await ch.client.command({ query: `CREATE TABLE ${database}.spans (organization_id String, extra String, trace_flags UInt64) ENGINE = MergeTree ORDER BY organization_id` });
    const store: Store = { client: ch.client, database, embedded: true };
    const failure = openWriter(store, freshDir("mismatch"));
    await expect(failure).rejects.toThrow(/trace_flags is UInt64, the encoder writes UInt32.*project_id is missing|project_id is missing.*trace_flags is UInt64/);
    await expect(failure).rejects.toThrow(/extra has no default and is not written/);
    await ch.client.command({ query: `DROP DATABASE ${database}` });
  });
});
