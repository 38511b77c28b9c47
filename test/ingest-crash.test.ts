// Crash test: concurrent OTLP exports to Vigil running as its own process group, SIGKILL of the whole group while
// requests are in flight, restart on the same data directory. Every acknowledged trace must be there, complete, once.
import { afterAll, expect, setDefaultTimeout, test } from "bun:test";
import { rmSync } from "node:fs";
import { join } from "node:path";
import { context, SpanKind, trace } from "@opentelemetry/api";
import { ProtobufTraceSerializer } from "@opentelemetry/otlp-transformer";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { LatitudeClient, LatitudeError } from "@latitude-data/sdk";
import { bootstrapAccount, testRoot } from "./helpers";
import { killGroup, killWithPostgres, spawnVigil, type VigilProcess } from "./process";

setDefaultTimeout(60_000);

const dataDir = join(testRoot, "ingest-crash");
const started: VigilProcess[] = [];

afterAll(() => {
  for (const vigil of started) killWithPostgres(vigil);
  rmSync(dataDir, { recursive: true, force: true });
});

const SPANS_PER_TRACE = 20;
const REQUESTS = 240;
const WORKERS = 8;
/** Acknowledged and inserted before the crash phase. */
const WARM_UP = 16;
/** Acknowledgements to wait for in the crash phase before the kill; the workers keep sending meanwhile. */
const KILL_AFTER_ACKS = 80;

interface TraceRequest {
  index: number;
  traceId: string;
  spanIds: string[];
  body: Uint8Array;
}

const FILLER = "The parcel left the depot this morning and should arrive within two working days. ".repeat(6);
const messageOf = (trace: number, span: number) => `trace ${trace} span ${span}: where is my parcel? ${FILLER}`;

/** One request = one trace of SPANS_PER_TRACE spans (a root and its chat children), recorded by the real SDK. */
function buildRequests(): TraceRequest[] {
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ "service.name": "crash-test" }),
    spanProcessors: [new SimpleSpanProcessor(exporter)],
  });
  const tracer = provider.getTracer("crash-test", "1.0.0");
  return Array.from({ length: REQUESTS }, (_, index) => {
    exporter.reset();
    const root = tracer.startSpan(`turn ${index}`, { kind: SpanKind.SERVER, attributes: { "session.id": `crash-session-${index}`, "crash.trace": index } });
    const parent = trace.setSpan(context.active(), root);
    const spanIds = [root.spanContext().spanId];
    for (let span = 1; span < SPANS_PER_TRACE; span++) {
      const chat = tracer.startSpan(
        `step ${index}.${span}`,
        {
          kind: SpanKind.CLIENT,
          attributes: {
            "session.id": `crash-session-${index}`,
            "crash.trace": index,
            "crash.span": span,
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "openai",
            "gen_ai.request.model": "gpt-4o-mini",
            "gen_ai.usage.input_tokens": 100 + span,
            "gen_ai.usage.output_tokens": 10 + span,
            "gen_ai.input.messages": JSON.stringify([{ role: "user", content: messageOf(index, span) }]),
            "gen_ai.output.messages": JSON.stringify([{ role: "assistant", content: `answer ${index}.${span}` }]),
          },
        },
        parent,
      );
      spanIds.push(chat.spanContext().spanId);
      chat.end();
    }
    root.end();
    return { index, traceId: root.spanContext().traceId, spanIds, body: ProtobufTraceSerializer.serializeRequest(exporter.getFinishedSpans())! };
  });
}

// Tokens of one trace: the root has none, chat `s` has 100 + s in and 10 + s out.
const CHAT_SPANS = Array.from({ length: SPANS_PER_TRACE - 1 }, (_, index) => index + 1);
const TRACE_INPUT_TOKENS = CHAT_SPANS.reduce((sum, span) => sum + 100 + span, 0);
const TRACE_OUTPUT_TOKENS = CHAT_SPANS.reduce((sum, span) => sum + 10 + span, 0);

/** Spans of the trace as the read API lists them; [] while it is not there (yet). */
async function spansOf(client: LatitudeClient, slug: string, traceId: string) {
  try {
    return (await client.traces.listSpans(slug, traceId)).items;
  } catch (error) {
    if (error instanceof LatitudeError && error.statusCode === 404) return [];
    throw error;
  }
}

/** Polls with a deadline until every trace lists all its spans; returns those that still do not. */
async function untilComplete(client: LatitudeClient, slug: string, traces: TraceRequest[], timeoutMs: number) {
  let missing = traces;
  const deadline = performance.now() + timeoutMs;
  while (missing.length > 0 && performance.now() < deadline) {
    const counts = await Promise.all(missing.map(async (request) => (await spansOf(client, slug, request.traceId)).length));
    missing = missing.filter((_, index) => counts[index] < SPANS_PER_TRACE);
    if (missing.length > 0) await Bun.sleep(100);
  }
  return missing;
}

test("every trace acknowledged before a SIGKILL of the process group is there after the restart, complete and once", async () => {
  const requests = buildRequests();
  rmSync(dataDir, { recursive: true, force: true });
  const env = { LOG_LEVEL: "info" };
  const first = await spawnVigil(dataDir, env);
  started.push(first);
  const { account, client: firstClient } = await bootstrapAccount(first.url, { projectName: "Crash" });
  const slug = account.projectSlug;
  const headers = { "content-type": "application/x-protobuf", authorization: `Bearer ${account.apiKey}`, "x-latitude-project": slug };

  const acknowledged: TraceRequest[] = [];
  const unacknowledged: TraceRequest[] = [];
  const otherStatuses: number[] = [];
  let next = 0;
  let inFlight = 0;
  let killed = false;
  /** Sends requests until `until` of them were taken or the server is killed. */
  const worker = async (until: number) => {
    while (!killed && next < until) {
      const request = requests[next++];
      inFlight++;
      try {
        const response = await fetch(`${first.url}/v1/traces`, { method: "POST", body: request.body, headers });
        await response.arrayBuffer();
        if (response.status === 200) acknowledged.push(request);
        else {
          otherStatuses.push(response.status);
          unacknowledged.push(request);
        }
      } catch {
        unacknowledged.push(request);
      } finally {
        inFlight--;
      }
    }
  };

  // Phase 1: traces acknowledged and already inserted into ClickHouse (their log segment removed) before the crash.
  await Promise.all(Array.from({ length: WORKERS }, () => worker(WARM_UP)));
  expect(acknowledged.length).toBe(WARM_UP);
  expect(await untilComplete(firstClient, slug, acknowledged, 15_000)).toEqual([]);

  // Phase 2: concurrent exports, and the kill of the whole group once enough more were acknowledged.
  const workers = Array.from({ length: WORKERS }, () => worker(requests.length));
  const deadline = performance.now() + 15_000;
  while (acknowledged.length < WARM_UP + KILL_AFTER_ACKS && next < requests.length && performance.now() < deadline) await Bun.sleep(2);
  const inFlightAtKill = inFlight;
  const acknowledgedAtKill = acknowledged.length;
  killed = true;
  // Vigil's process group and the embedded PostgreSQL's (a session of its own), as a machine crash would.
  killWithPostgres(first);
  await Promise.all(workers);
  expect(await first.exited).toBeNull();

  // Mid-stream: requests were on their way when the group died, and none was refused before.
  expect(acknowledgedAtKill).toBeGreaterThanOrEqual(WARM_UP + KILL_AFTER_ACKS);
  expect(inFlightAtKill).toBeGreaterThan(0);
  expect(otherStatuses).toEqual([]);
  // A response may have been read between the count and the kill: those are acknowledged too, and checked.
  expect(acknowledged.length + unacknowledged.length).toBe(next);

  const second = await spawnVigil(dataDir, env);
  started.push(second);
  // The kill left acknowledged rows that only the write-ahead log held: the restart replays them.
  const replay = second
    .output()
    .split("\n")
    .map((line) => (line.includes('"replaying the span write-ahead log"') ? (JSON.parse(line) as { segments: number; rows: number }) : null))
    .find((line) => line !== null);
  expect(replay?.rows).toBeGreaterThan(0);
  const client = new LatitudeClient({ baseUrl: second.url, apiKey: account.apiKey, maxRetries: 0 });

  // Replay inserts shortly after start: poll, with a deadline, until every acknowledged trace is complete.
  expect((await untilComplete(client, slug, acknowledged, 20_000)).map((request) => request.index)).toEqual([]);

  // Complete and intact: every span once, with its name, tokens, model and session; the roll-up counted once.
  for (let batch = 0; batch < acknowledged.length; batch += 16) {
    await Promise.all(
      acknowledged.slice(batch, batch + 16).map(async (request) => {
        const spans = await spansOf(client, slug, request.traceId);
        expect(spans.map((span) => span.spanId).sort()).toEqual([...request.spanIds].sort());
        for (const span of spans) {
          const position = request.spanIds.indexOf(span.spanId);
          expect(span.sessionId).toBe(`crash-session-${request.index}`);
          if (position === 0) {
            expect(span).toMatchObject({ name: `turn ${request.index}`, parentSpanId: null, tokensInput: 0 });
          } else {
            expect(span).toMatchObject({
              name: `step ${request.index}.${position}`,
              parentSpanId: request.spanIds[0],
              model: "gpt-4o-mini",
              provider: "openai",
              tokensInput: 100 + position,
              tokensOutput: 10 + position,
              costIsEstimated: true,
            });
          }
        }
        const detail = await client.traces.get(slug, request.traceId);
        expect(detail).toMatchObject({ spanCount: SPANS_PER_TRACE, tokensInput: TRACE_INPUT_TOKENS, tokensOutput: TRACE_OUTPUT_TOKENS, rootSpanName: `turn ${request.index}` });
        // Message content and typed attributes of a chat span that moves through the trace.
        const position = 1 + (request.index % (SPANS_PER_TRACE - 1));
        const chat = await client.traces.getSpan(slug, request.traceId, request.spanIds[position]);
        expect(chat.inputMessages).toEqual([{ role: "user", parts: [{ type: "text", content: messageOf(request.index, position) }] }]);
        expect(chat.outputMessages).toEqual([{ role: "assistant", parts: [{ type: "text", content: `answer ${request.index}.${position}` }] }]);
        expect(chat.attrInt).toMatchObject({ "crash.trace": request.index, "crash.span": position });
      }),
    );
  }

  // Unacknowledged requests may or may not have landed; nothing to assert about them but that reading them works.
  const unacknowledgedPresent = (await Promise.all(unacknowledged.map(async (request) => (await spansOf(client, slug, request.traceId)).length))).filter(
    (count) => count > 0,
  );
  console.log(
    `ingest-crash: ${acknowledged.length} acknowledged traces (${acknowledged.length * SPANS_PER_TRACE} spans, ${WARM_UP} inserted before the crash) all present once; ` +
      `${replay!.rows} rows replayed from ${replay!.segments} write-ahead log segments; ` +
      `${inFlightAtKill} requests in flight at the kill; ${unacknowledgedPresent.length} of ${unacknowledged.length} unacknowledged traces present`,
  );

  killGroup(second.child, "SIGTERM");
  expect(await second.exited).toBe(0);
}, 50_000);
