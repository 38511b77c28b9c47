import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { completeRows, encodeSpanRows, spanColumnList, spanStructure } from "../src/ingest/rowbinary";
import type { SpanRow } from "../src/ingest/row";
import { sharedVigil, testRoot } from "./helpers";
import { chatSpanRow } from "./span-row-fixtures";

setDefaultTimeout(60_000);

const dir = join(testRoot, "rowbinary");
const sqlString = (value: string) => `'${value.replaceAll("\\", "\\\\").replaceAll("'", "\\'")}'`;

/** Reads a RowBinary file back through ClickHouse, times as exact nanosecond strings. */
async function readBack(bytes: Uint8Array, name: string): Promise<Record<string, unknown>[]> {
  const { ch } = (await sharedVigil()).ctx;
  mkdirSync(dir, { recursive: true });
  const path = join(dir, name);
  writeFileSync(path, bytes);
  const result = await ch.client.query({
    query: `SELECT * EXCEPT (start_time, end_time), toString(toUnixTimestamp64Nano(start_time)) AS start_time, toString(toUnixTimestamp64Nano(end_time)) AS end_time
            FROM file(${sqlString(path)}, 'RowBinary', ${sqlString(spanStructure)})`,
    format: "JSONEachRow",
  });
  return result.json();
}

describe("RowBinary span encoding", () => {
  test("every column round-trips exactly through ClickHouse", async () => {
    const edge: Partial<SpanRow> = {
      name: "日本語 ✓ 🚀 ".repeat(30),
      status_message: "x".repeat(200),
      tool_output: "é".repeat(5000),
      start_time: "1767225600123456789",
      end_time: "9007199254740993123",
      duration_ns: 2 ** 53 - 1,
      trace_flags: 0xffffffff,
      attr_int: { max_safe: 2 ** 53 - 1, negative: -(2 ** 40) - 7, minus_one: -1 },
      attr_float: { pi: Math.PI, tiny: -1e-300 },
      attr_bool: { yes: true, no: false },
      metadata: {},
      tags: [],
      retention_days: 65535,
    };
    const rows = [chatSpanRow(0), chatSpanRow(1, edge), chatSpanRow(2, {}, 40_000)];
    const back = await readBack(encodeSpanRows(rows), "roundtrip.bin");
    expect(back).toEqual(rows as unknown as Record<string, unknown>[]);
  });

  test("unsigned columns clamp values they cannot hold instead of wrapping", async () => {
    const [back] = await readBack(encodeSpanRows([chatSpanRow(0, { tokens_input: -5, tokens_output: 12.9, duration_ns: Number.NaN, retention_days: 70_000 })]), "clamp.bin");
    expect([back.tokens_input, back.tokens_output, back.duration_ns, back.retention_days]).toEqual([0, 12, 0, 65535]);
  });

  test("the column list names every encoded column once", () => {
    const names = spanColumnList.split(", ");
    expect(new Set(names).size).toBe(names.length);
    expect(names).toEqual(Object.keys(chatSpanRow(0)));
  });

  test("recovery keeps only whole rows: a torn or zero-filled tail is cut", () => {
    const rows = [chatSpanRow(0), chatSpanRow(1), chatSpanRow(2)];
    const whole = encodeSpanRows(rows);
    const firstTwo = encodeSpanRows(rows.slice(0, 2)).length;
    const counts = (data: Uint8Array) => {
      const { rows, length } = completeRows(data);
      return { rows, length };
    };
    expect(counts(whole)).toEqual({ rows: 3, length: whole.length });
    expect(counts(whole.subarray(0, whole.length - 1))).toEqual({ rows: 2, length: firstTwo });
    expect(counts(whole.subarray(0, 3))).toEqual({ rows: 0, length: 0 });
    const zeroTail = new Uint8Array(whole.length + 8192);
    zeroTail.set(whole);
    expect(counts(zeroTail)).toEqual({ rows: 3, length: whole.length });
    // The last row ends attr_bool {x: true}, resource_string {}, events_json "", links_json "", retention_days.
    const endsWithBool = encodeSpanRows([...rows.slice(0, 2), chatSpanRow(2, { attr_bool: { x: true }, resource_string: {} })]);
    expect(endsWithBool[endsWithBool.length - 6]).toBe(1);
    endsWithBool[endsWithBool.length - 6] = 7;
    expect(counts(endsWithBool)).toEqual({ rows: 2, length: firstTwo });
  });

  test("recovery reads the keys of the whole rows only: what their insert looks up", () => {
    const rows = [chatSpanRow(0), chatSpanRow(1, { organization_id: "org-b", start_time: "1700000000123456789" }), chatSpanRow(2)];
    const whole = encodeSpanRows(rows);
    const expected = (kept: typeof rows) => {
      const starts = kept.map((row) => BigInt(row.start_time));
      return {
        organizationIds: [...new Set(kept.map((row) => row.organization_id))],
        projectIds: [...new Set(kept.map((row) => row.project_id))],
        traceIds: [...new Set(kept.map((row) => row.trace_id))],
        fromNanos: String(starts.reduce((a, b) => (a < b ? a : b))),
        toNanos: String(starts.reduce((a, b) => (a > b ? a : b))),
      };
    };
    expect(completeRows(whole).keys.queryParams()).toEqual(expected(rows));
    expect(completeRows(whole.subarray(0, whole.length - 1)).keys.queryParams()).toEqual(expected(rows.slice(0, 2)));
  });
});
