// OTLP/JSON traces for the crash tests, and the checks that every acknowledged one reads back whole and once.
import { expect } from "bun:test";
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { LatitudeClient, LatitudeError } from "@latitude-data/sdk";

export interface SentTrace {
  traceId: string;
  spanIds: string[];
  sessionId: string;
  body: string;
}

const FILLER = "The parcel left the depot this morning and should arrive within two working days. ".repeat(18);
const attribute = (key: string, value: string | number) =>
  typeof value === "number" ? { key, value: { intValue: String(value) } } : { key, value: { stringValue: value } };

/** A trace of `spans` spans: a root and chat children of ~1.5 KB message text, 100 input and 10 output tokens each, in session `sessionId`. */
export function buildTrace(label: string, spans: number, sessionId = `session-${label}`): SentTrace {
  const traceId = randomBytes(16).toString("hex");
  const spanIds = Array.from({ length: spans }, () => randomBytes(8).toString("hex"));
  const start = BigInt(Date.now() - 60_000) * 1_000_000n;
  const otlpSpans = spanIds.map((spanId, index) => ({
    traceId,
    spanId,
    parentSpanId: index === 0 ? "" : spanIds[0],
    name: index === 0 ? `turn ${label}` : `step ${label}.${index}`,
    kind: index === 0 ? 2 : 3,
    startTimeUnixNano: String(start + BigInt(index) * 1_000_000n),
    endTimeUnixNano: String(start + BigInt(index) * 1_000_000n + 500_000n),
    attributes: [
      attribute("session.id", sessionId),
      ...(index === 0
        ? []
        : [
            attribute("gen_ai.operation.name", "chat"),
            attribute("gen_ai.provider.name", "openai"),
            attribute("gen_ai.request.model", "gpt-4o-mini"),
            attribute("gen_ai.usage.input_tokens", 100),
            attribute("gen_ai.usage.output_tokens", 10),
            attribute("gen_ai.input.messages", JSON.stringify([{ role: "user", content: `${label}.${index} ${FILLER}` }])),
          ]),
    ],
  }));
  const body = JSON.stringify({ resourceSpans: [{ resource: { attributes: [attribute("service.name", "crash-test")] }, scopeSpans: [{ scope: { name: "crash-test" }, spans: otlpSpans }] }] });
  return { traceId, spanIds, sessionId, body };
}

/** Spans of the trace as the read API lists them; [] while it is not there (yet). */
export async function spansOf(client: LatitudeClient, slug: string, traceId: string) {
  try {
    return (await client.traces.listSpans(slug, traceId)).items;
  } catch (error) {
    if (error instanceof LatitudeError && error.statusCode === 404) return [];
    throw error;
  }
}

/** The trace's detail, or null while the roll-up does not have it. */
export async function detailOf(client: LatitudeClient, slug: string, traceId: string) {
  try {
    return await client.traces.get(slug, traceId);
  } catch (error) {
    if (error instanceof LatitudeError && error.statusCode === 404) return null;
    throw error;
  }
}

/** Every trace of the project as the list shows it: how often it is listed, and its last listed row. */
export async function listedTraces(client: LatitudeClient, slug: string) {
  const listed = new Map<string, { times: number; spanCount: number; tokensInput: number; tokensOutput: number }>();
  let cursor: string | undefined;
  do {
    const page = await client.traces.list(slug, { limit: 200, ...(cursor ? { cursor } : {}) } as never);
    for (const item of page.items) {
      listed.set(item.traceId, { times: (listed.get(item.traceId)?.times ?? 0) + 1, spanCount: item.spanCount, tokensInput: item.tokensInput, tokensOutput: item.tokensOutput });
    }
    cursor = page.nextCursor ?? undefined;
  } while (cursor);
  return listed;
}

/** Polls the list until every trace counts all its spans; returns the traces that still do not. */
export async function untilRolledUp(client: LatitudeClient, slug: string, traces: SentTrace[], timeoutMs: number) {
  let missing = traces;
  const deadline = performance.now() + timeoutMs;
  while (missing.length > 0 && performance.now() < deadline) {
    const listed = await listedTraces(client, slug);
    missing = missing.filter((trace) => listed.get(trace.traceId)?.spanCount !== trace.spanIds.length);
    if (missing.length > 0) await Bun.sleep(200);
  }
  return missing;
}

/**
 * The list, the detail, the spans list and analytics agree with what was acknowledged: each trace listed once
 * with every span counted once; the detail and the spans of `sample` of them (all by default) read one by one.
 */
export async function expectAllReadable(client: LatitudeClient, slug: string, acknowledged: SentTrace[], sample = acknowledged.length) {
  const tokens = (trace: SentTrace) => ({ spanCount: trace.spanIds.length, tokensInput: 100 * (trace.spanIds.length - 1), tokensOutput: 10 * (trace.spanIds.length - 1) });
  const listed = await listedTraces(client, slug);
  const wrong = acknowledged.filter((trace) => !Bun.deepEquals(listed.get(trace.traceId), { times: 1, ...tokens(trace) }));
  expect(wrong.map((trace) => ({ traceId: trace.traceId, listed: listed.get(trace.traceId) }))).toEqual([]);
  const sampled = [...acknowledged].sort(() => Math.random() - 0.5).slice(0, sample);
  for (let batch = 0; batch < sampled.length; batch += 16) {
    await Promise.all(
      sampled.slice(batch, batch + 16).map(async (trace) => {
        const spans = await spansOf(client, slug, trace.traceId);
        expect(spans.map((span) => span.spanId).sort()).toEqual([...trace.spanIds].sort());
        expect(await client.traces.get(slug, trace.traceId)).toMatchObject({ ...tokens(trace), sessionId: trace.sessionId });
      }),
    );
  }
  const analytics = await client.traces.analytics(slug, {} as never);
  expect(analytics.traces.total).toBe(listed.size);
  const listedSpans = [...listed.values()].reduce((sum, trace) => sum + trace.spanCount, 0);
  expect(analytics.spans.total).toBe(listedSpans);
  const listedTokens = [...listed.values()].reduce((sum, trace) => sum + trace.tokensInput + trace.tokensOutput, 0);
  expect(analytics.tokens.total).toBe(listedTokens);
}

/** What the stopped Vigil's chdb holds per trace and per session (see rollup-counts-child.ts). */
export async function rollupCounts(dataDir: string, database = "vigil") {
  const child = Bun.spawn(["bun", join(import.meta.dir, "rollup-counts-child.ts"), join(dataDir, "ch"), database], { stdout: "pipe", stderr: "pipe" });
  const [out, err, code] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited]);
  if (code !== 0) throw new Error(`rollup-counts-child failed: ${err}`);
  const parsed = JSON.parse(out.trim().split("\n").at(-1)!) as Record<"spanRows" | "traces" | "sessions", Record<string, string | number>[]>;
  const byKey = (rows: Record<string, string | number>[], key: string, value: string) => new Map(rows.map((row) => [String(row[key]), Number(row[value])]));
  return {
    spans: byKey(parsed.spanRows, "trace_id", "spans"),
    spanRows: byKey(parsed.spanRows, "trace_id", "rows"),
    traces: byKey(parsed.traces, "trace_id", "spans"),
    sessions: byKey(parsed.sessions, "session_id", "spans"),
  };
}

/** In the stopped Vigil's chdb: every acknowledged span in `spans` once, counted once in `traces` and `sessions`. */
export async function expectStoredOnce(dataDir: string, acknowledged: SentTrace[]) {
  const counts = await rollupCounts(dataDir);
  const sessionSpans = new Map<string, number>();
  for (const trace of acknowledged) sessionSpans.set(trace.sessionId, (sessionSpans.get(trace.sessionId) ?? 0) + trace.spanIds.length);
  const wrong = acknowledged
    .map((trace) => ({ trace: trace.traceId, spans: counts.spans.get(trace.traceId), traces: counts.traces.get(trace.traceId), sessions: counts.sessions.get(trace.sessionId), expected: trace.spanIds.length, expectedSession: sessionSpans.get(trace.sessionId) }))
    .filter((row) => row.spans !== row.expected || row.traces !== row.expected || row.sessions !== row.expectedSession);
  expect(wrong).toEqual([]);
  return counts;
}
