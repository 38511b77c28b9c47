// Ingest benchmark: realistic GenAI OTLP/protobuf requests driven with autocannon against a Vigil
// started from this checkout, compared with a same-run ceiling (decode + map + price + write
// in-process, no HTTP). Usage: bun run bench [-- --seconds 20 --connections 8]
import autocannon from "autocannon";
import { mkdirSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { ProtobufTraceSerializer } from "@opentelemetry/otlp-transformer";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { context, trace } from "@opentelemetry/api";
import { killGroup, spawnVigil, type VigilProcess } from "../test/process";

const { values: args } = parseArgs({
  options: {
    seconds: { type: "string", default: "20" },
    connections: { type: "string", default: "8" },
    "ceiling-requests": { type: "string", default: "400" },
  },
});
const seconds = Number(args.seconds);
const connections = Number(args.connections);
const SPANS_PER_REQUEST = 100;
const SPANS_PER_TRACE = 5;
const benchDir = join(import.meta.dir, "..", ".vigil-bench");

// ---------------------------------------------------------------- workload
const words = "the quarterly revenue figures for EMEA grew while churn in the enterprise segment fell and support tickets about invoices doubled".split(" ");
const pii = ["Reach me at jane.doe@example.com", "call +1 415 555 0100", "card 4111 1111 1111 1111", "ssn 123-45-6789", "key sk-proj-Ab12Cd34Ef56Gh78Ij90Kl"];
function prose(length: number, seed: number) {
  let out = "";
  for (let i = 0; out.length < length; i++) out += words[(seed * 7 + i * 13) % words.length] + (i % 17 === 16 ? ". " : " ");
  return out;
}

/** One request body: 20 traces of 5 spans (agent root, 3 chats, 1 tool), ~4 KB a span, PII in some messages. */
function templateRequest(): { body: Uint8Array; traceIds: string[] } {
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ "service.name": "support-agent", "service.version": "2.3.1", "deployment.environment": "bench" }),
    spanProcessors: [new SimpleSpanProcessor(exporter)],
  });
  const tracer = provider.getTracer("bench.agent", "1.0.0");
  const traceIds: string[] = [];
  for (let t = 0; t < SPANS_PER_REQUEST / SPANS_PER_TRACE; t++) {
    const root = tracer.startSpan("invoke_agent support", {
      attributes: { "gen_ai.operation.name": "invoke_agent", "session.id": `session-${t % 7}`, "user.id": `user-${t}`, "latitude.tags": '["bench"]' },
    });
    traceIds.push(root.spanContext().traceId);
    const parent = trace.setSpan(context.active(), root);
    for (let c = 0; c < SPANS_PER_TRACE - 2; c++) {
      const history = [
        { role: "user", parts: [{ type: "text", content: prose(1400, t + c) + ((t + c) % 3 === 0 ? ` ${pii[(t + c) % pii.length]}.` : "") }] },
        { role: "assistant", parts: [{ type: "tool_call", id: `call_${t}_${c}`, name: "lookup_invoice", arguments: { invoice: `INV-${t}${c}` } }] },
        { role: "tool", parts: [{ type: "tool_call_response", id: `call_${t}_${c}`, response: prose(600, c) }] },
      ];
      const chat = tracer.startSpan(
        "chat gpt-4.1",
        {
          attributes: {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "openai",
            "gen_ai.request.model": "gpt-4.1",
            "gen_ai.response.model": "gpt-4.1-2025-04-14",
            "gen_ai.usage.input_tokens": 1400 + c,
            "gen_ai.usage.output_tokens": 280,
            "gen_ai.usage.cache_read.input_tokens": 400,
            "gen_ai.system_instructions": JSON.stringify([{ type: "text", content: "You are a careful support agent. " + prose(300, t) }]),
            "gen_ai.input.messages": JSON.stringify(history),
            "gen_ai.output.messages": JSON.stringify([{ role: "assistant", parts: [{ type: "text", content: prose(900, t * 3 + c) }], finish_reason: "stop" }]),
            "gen_ai.server.time_to_first_token": 0.35,
          },
        },
        parent,
      );
      chat.end();
    }
    const tool = tracer.startSpan(
      "execute_tool lookup_invoice",
      {
        attributes: {
          "gen_ai.operation.name": "execute_tool",
          "gen_ai.tool.name": "lookup_invoice",
          "gen_ai.tool.call.id": `call_${t}`,
          "gen_ai.tool.call.arguments": JSON.stringify({ invoice: `INV-${t}` }),
          "gen_ai.tool.call.result": JSON.stringify({ status: "paid", notes: prose(1500, t) }),
        },
      },
      parent,
    );
    tool.end();
    root.end();
  }
  return { body: ProtobufTraceSerializer.serializeRequest(exporter.getFinishedSpans())!, traceIds };
}

/** Fresh trace ids per request, written over the template's bytes, so every request stores new spans. */
function requestFactory() {
  const { body, traceIds } = templateRequest();
  const buffer = Buffer.from(body);
  const offsets: number[][] = traceIds.map((hex) => {
    const needle = Buffer.from(hex, "hex");
    const found: number[] = [];
    for (let at = buffer.indexOf(needle); at !== -1; at = buffer.indexOf(needle, at + 1)) found.push(at);
    return found;
  });
  let counter = 0;
  return {
    bytes: buffer.byteLength,
    next(): Buffer {
      const copy = Buffer.from(buffer);
      for (const places of offsets) {
        const id = crypto.getRandomValues(new Uint8Array(16));
        new DataView(id.buffer).setUint32(12, counter++);
        for (const at of places) copy.set(id, at);
      }
      return copy;
    },
  };
}

// ---------------------------------------------------------------- helpers
function peakRssMb(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  return Number(status.match(/VmHWM:\s+(\d+)/)![1]) / 1024;
}

async function bootstrap(url: string) {
  const res = await fetch(`${url}/v1/account/bootstrap`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
  return (await res.json()) as { apiKey: string; projectSlug: string };
}

async function storedSpans(url: string, apiKey: string, projectSlug: string): Promise<number> {
  const from = new Date(Date.now() - 86_400_000).toISOString();
  const to = new Date(Date.now() + 3_600_000).toISOString();
  const res = await fetch(`${url}/v1/projects/${projectSlug}/traces/analytics?fromIso=${from}&toIso=${to}`, { headers: { authorization: `Bearer ${apiKey}` } });
  const body = (await res.json()) as { spans: { total: number } };
  return body.spans.total;
}

interface Phase {
  name: string;
  spansPerSecond: number;
  mbPerSecond: number;
  p50: number;
  p99: number;
  non2xx: number;
  peakRssMb: number;
}

async function drive(name: string, vigil: VigilProcess, overallRate?: number, connectionCount = connections, redaction = "off"): Promise<Phase> {
  const account = await bootstrap(vigil.url);
  if (redaction !== "off") {
    await fetch(`${vigil.url}/v1/projects/${account.projectSlug}`, {
      method: "PATCH",
      headers: { authorization: `Bearer ${account.apiKey}`, "content-type": "application/json" },
      body: JSON.stringify({ settings: { redaction: { mode: redaction } } }),
    });
  }
  const factory = requestFactory();
  const started = performance.now();
  const result = await autocannon({
    url: `${vigil.url}/v1/traces`,
    method: "POST",
    connections: connectionCount,
    duration: seconds,
    overallRate,
    timeout: 30,
    headers: { "content-type": "application/x-protobuf", authorization: `Bearer ${account.apiKey}`, "x-latitude-project": account.projectSlug },
    requests: [{ setupRequest: (request: object) => ({ ...request, body: factory.next() }) }],
  });
  const acknowledged = result["2xx"] * SPANS_PER_REQUEST;
  // Every acknowledged span must be queryable before the clock stops.
  const deadline = Date.now() + 300_000;
  let stored = 0;
  while ((stored = await storedSpans(vigil.url, account.apiKey, account.projectSlug)) < acknowledged && Date.now() < deadline) await Bun.sleep(200);
  const elapsed = (performance.now() - started) / 1000;
  if (stored < acknowledged) throw new Error(`${name}: only ${stored} of ${acknowledged} acknowledged spans became queryable`);
  return {
    name,
    spansPerSecond: acknowledged / elapsed,
    mbPerSecond: (result["2xx"] * factory.bytes) / elapsed / 1e6,
    p50: result.latency.p50,
    p99: result.latency.p99,
    non2xx: result.non2xx,
    peakRssMb: peakRssMb(vigil.child.pid!),
  };
}

/** The same requests through decode → map → price → write, in this process, without HTTP or auth. */
async function ceiling(requests: number): Promise<number> {
  const { loadConfig } = await import("../src/config");
  const { openClickHouse } = await import("../src/db/clickhouse");
  const { migrateClickHouse } = await import("../src/db/migrate");
  const { createLogger } = await import("../src/lib/log");
  const { decodeProtobuf } = await import("../src/ingest/decode");
  const { mapTraces } = await import("../src/ingest/map");
  const { priceSpan } = await import("../src/ingest/price");
  const { spanWriterOptions, startSpanWriter } = await import("../src/ingest/write");
  const log = createLogger("warn");
  const config = loadConfig({ DATA_DIR: join(benchDir, "ceiling"), CLICKHOUSE_DATABASE: "ceiling" });
  const store = openClickHouse(config);
  await migrateClickHouse(store, null, log);
  const writer = await startSpanWriter(spanWriterOptions(config, store, log));
  const factory = requestFactory();
  const bodies = Array.from({ length: requests }, () => factory.next());
  const owner = { organizationId: "bench", projectId: "bench", apiKeyId: "bench" };
  const started = performance.now();
  let inFlight: Promise<void>[] = [];
  for (const body of bodies) {
    const rows = mapTraces(decodeProtobuf(body), owner);
    for (const row of rows) priceSpan(row);
    inFlight.push(writer.accept(rows, body.byteLength));
    if (inFlight.length >= connections) {
      await Promise.all(inFlight);
      inFlight = [];
    }
  }
  await Promise.all(inFlight);
  await writer.flush();
  const spansPerSecond = (requests * SPANS_PER_REQUEST) / ((performance.now() - started) / 1000);
  await writer.close();
  await store.close();
  return spansPerSecond;
}

// ---------------------------------------------------------------- run
rmSync(benchDir, { recursive: true, force: true });
mkdirSync(benchDir, { recursive: true });
const format = (phase: Phase) =>
  `${phase.name.padEnd(28)} ${phase.spansPerSecond.toFixed(0).padStart(7)} spans/s ${phase.mbPerSecond.toFixed(1).padStart(6)} MB/s  ack p50 ${String(phase.p50).padStart(5)} ms  p99 ${String(phase.p99).padStart(5)} ms  non-2xx ${String(phase.non2xx).padStart(5)}  peak RSS ${phase.peakRssMb.toFixed(0)} MB`;

const phases: Phase[] = [];
async function withVigil(name: string, env: Record<string, string>, run: (vigil: VigilProcess) => Promise<Phase>) {
  const vigil = await spawnVigil(join(benchDir, name), { LOG_LEVEL: "warn", ...env });
  try {
    const phase = await run(vigil);
    phases.push(phase);
    console.log(format(phase));
    return phase;
  } finally {
    killGroup(vigil.child, "SIGTERM");
    await vigil.exited;
  }
}

console.log(`ingest bench: ${SPANS_PER_REQUEST} spans/request, ${connections} connections, ${seconds}s per phase`);
const plain = await withVigil("redaction-off", {}, (vigil) => drive("max load, redaction off", vigil));
await withVigil("redaction-enforced", {}, (vigil) => drive("max load, redaction enforced", vigil, undefined, connections, "enforce"));
const maxRequestsPerSecond = plain.spansPerSecond / SPANS_PER_REQUEST;
await withVigil("half-load", {}, (vigil) => drive("half load (latency)", vigil, Math.max(1, Math.round(maxRequestsPerSecond / 2))));
await withVigil("overload", { INGEST_QUEUE_BYTES: String(64 << 20) }, (vigil) =>
  drive("2x overload", vigil, Math.round(maxRequestsPerSecond * 2), connections * 4),
);
const ceilingSpansPerSecond = await ceiling(Number(args["ceiling-requests"]));
console.log(`${"ceiling (in-process)".padEnd(28)} ${ceilingSpansPerSecond.toFixed(0).padStart(7)} spans/s`);
console.log(`ratio to ceiling: redaction off ${(plain.spansPerSecond / ceilingSpansPerSecond).toFixed(2)}`);
rmSync(benchDir, { recursive: true, force: true });
process.exit(0);
