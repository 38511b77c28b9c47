import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { SpanKind, SpanStatusCode, context, trace, type Tracer } from "@opentelemetry/api";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-proto";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { BasicTracerProvider, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import type { LatitudeClient } from "@latitude-data/sdk";
import { newId } from "../src/lib/ids";
import type { Vigil } from "../src/server";
import { tenantOf, type Tenant } from "./fixtures/spans";
import { bootstrapAccount, sharedVigil } from "./helpers";

setDefaultTimeout(60_000);

/**
 * Real traces sent with the OpenTelemetry OTLP/protobuf exporter to `POST /v1/traces`, read back
 * with the official 9.15.0 SDK.
 */

let vigil: Vigil;
let client: LatitudeClient;
let slug: string;
let tenant: Tenant;
let provider: BasicTracerProvider;
let tracer: Tracer;
const sessionId = `sdk-session-${newId()}`;
const started = Date.now() - 60_000;
let traceId: string;
let chatSpanId: string;

const messages = (...list: [string, string][]) => JSON.stringify(list.map(([role, content]) => ({ role, parts: [{ type: "text", content }] })));

/** One agent turn: a root span, a chat completion, a tool call and a memory write. */
function sendTurn(question: string, answer: string, offsetMs: number) {
  const at = (ms: number) => new Date(started + offsetMs + ms);
  const root = tracer.startSpan("support-turn", {
    kind: SpanKind.SERVER,
    startTime: at(0),
    attributes: { "session.id": sessionId, "user.id": "sdk-user", "latitude.tags": JSON.stringify(["sdk", "prod"]), "latitude.metadata": JSON.stringify({ release: "7" }) },
  });
  const parent = trace.setSpan(context.active(), root);
  const chat = tracer.startSpan(
    "chat gpt-4o",
    {
      kind: SpanKind.CLIENT,
      startTime: at(100),
      attributes: {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-4o",
        "gen_ai.usage.input_tokens": 120,
        "gen_ai.usage.output_tokens": 30,
        "gen_ai.server.time_to_first_token": 0.25,
        "gen_ai.system_instructions": JSON.stringify([{ type: "text", content: "Be brief." }]),
        "gen_ai.input.messages": messages(["user", question]),
        "gen_ai.output.messages": messages(["assistant", answer]),
      },
    },
    parent,
  );
  chat.end(at(900));
  const tool = tracer.startSpan(
    "execute_tool lookup_order",
    { startTime: at(1000), attributes: { "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup_order", "gen_ai.tool.call.id": "call-1" } },
    parent,
  );
  tool.setStatus({ code: SpanStatusCode.ERROR, message: "order service down" });
  tool.end(at(1200));
  const memory = tracer.startSpan(
    "update_memory",
    {
      startTime: at(1300),
      attributes: {
        "gen_ai.operation.name": "update_memory",
        "gen_ai.memory.store.id": "profile",
        "gen_ai.memory.records": JSON.stringify([{ id: "favourite", content: answer }]),
      },
    },
    parent,
  );
  memory.end(at(1400));
  root.end(at(2000));
  return { traceId: root.spanContext().traceId, chatSpanId: chat.spanContext().spanId };
}

async function eventually<T>(read: () => Promise<T | undefined>, what: string): Promise<T> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const value = await read();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await Bun.sleep(50);
  }
}

beforeAll(async () => {
  vigil = await sharedVigil();
  const created = await bootstrapAccount(vigil.url, { projectName: "OTLP and SDK" });
  client = created.client;
  slug = created.account.projectSlug;
  tenant = await tenantOf(vigil.ctx, created.account.apiKey, slug);
  const exporter = new OTLPTraceExporter({ url: `${vigil.url}/v1/traces`, headers: { Authorization: `Bearer ${created.account.apiKey}`, "X-Latitude-Project": slug } });
  provider = new BasicTracerProvider({ resource: resourceFromAttributes({ "service.name": "sdk-agent" }), spanProcessors: [new SimpleSpanProcessor(exporter)] });
  tracer = provider.getTracer("vigil-traces-test", "1.0.0");
  ({ traceId, chatSpanId } = sendTurn("Where is my parcel?", "It ships tomorrow.", 0));
  sendTurn("Can I change the delivery address?", "Yes, until it ships.", 5000);
  await provider.forceFlush();
  await eventually(async () => ((await client.traces.list(slug)).items.length === 2 ? true : undefined), "both traces to be listed");
}, 60_000);

afterAll(async () => {
  await provider.shutdown();
});

describe("traces sent over OTLP, read with the SDK", () => {
  test("traces.list", async () => {
    const page = await client.traces.list(slug, { sortBy: "startTime", sortDirection: "asc" });
    expect(page.items).toHaveLength(2);
    expect(page.items[0]).toMatchObject({
      traceId,
      spanCount: 4,
      errorCount: 1,
      tokensInput: 120,
      tokensOutput: 30,
      // From the trace's start: the chat starts 100 ms in and measured its first token 250 ms later.
      timeToFirstTokenNs: 350_000_000,
      sessionId,
      userId: "sdk-user",
      tags: ["prod", "sdk"],
      models: ["gpt-4o"],
      providers: ["openai"],
      serviceNames: ["sdk-agent"],
      rootSpanName: "support-turn",
      durationNs: 2_000_000_000,
    });
    const filtered = await client.traces.list(slug, { filters: { tools: [{ op: "eq", value: "lookup_order" }], "metadata.release": [{ op: "eq", value: "7" }] } });
    expect(filtered.items).toHaveLength(2);
    const searched = await client.traces.list(slug, { query: "delivery address" });
    expect(searched.items.map((item) => item.traceId)).not.toContain(traceId);
    expect(searched.items).toHaveLength(1);
    // Ingest leaves the words index to merges (test/ingest-write.test.ts): the same search once the parts are merged and indexed.
    const { client: ch, database } = vigil.ctx.ch;
    await ch.command({ query: `OPTIMIZE TABLE ${database}.spans FINAL` });
    expect((await client.traces.list(slug, { query: "Delivery ADDRESS" })).items).toEqual(searched.items);
  });

  test("traces.get, listSpans and getSpan", async () => {
    const detail = await client.traces.get(slug, traceId);
    expect(detail.metadata).toMatchObject({ release: "7" });
    expect(detail.conversation).toEqual([
      { role: "system", parts: [{ type: "text", content: "Be brief." }] },
      { role: "user", parts: [{ type: "text", content: "Where is my parcel?" }] },
      { role: "assistant", parts: [{ type: "text", content: "It ships tomorrow." }] },
    ]);
    const { items } = await client.traces.listSpans(slug, traceId);
    expect(items.map((span) => span.name)).toEqual(["support-turn", "chat gpt-4o", "execute_tool lookup_order", "update_memory"]);
    expect(items[0]).toMatchObject({ parentSpanId: null, kind: "server", scopeName: "vigil-traces-test", scopeVersion: "1.0.0" });
    expect(items[2]).toMatchObject({ statusCode: "error", statusMessage: "order service down" });
    const chat = await client.traces.getSpan(slug, traceId, chatSpanId);
    expect(chat).toMatchObject({ operation: "chat", model: "gpt-4o", inputMessages: [{ role: "user", parts: [{ type: "text", content: "Where is my parcel?" }] }] });
  });

  test("traces.analytics", async () => {
    const analytics = await client.traces.analytics(slug);
    expect(analytics.traces.total).toBe(2);
    expect(analytics.spans.total).toBe(8);
    expect(analytics.tokens.total).toBe(300);
    expect(analytics.timeToFirstToken.median).toBe(0.35);
  });

  test("traces.getMemory and sessions.getMemory", async () => {
    const memory = await client.traces.getMemory(slug, traceId);
    expect(memory).toEqual({
      records: [{ storeId: "profile", recordId: "favourite", readTokens: 0, tokensAdded: 5, tokensRemoved: 0 }],
      total: { readTokens: 0, tokensAdded: 5, tokensRemoved: 0, writeRecords: 1 },
    });
    const session = await client.sessions.getMemoryChanges(slug, sessionId);
    expect(session.records).toEqual([
      { storeId: "profile", recordId: "favourite", kind: "added", beforeBody: null, afterBody: "Yes, until it ships.", tokensAdded: 5, tokensRemoved: 0, degraded: false, lastChangeSpanId: expect.any(String) },
    ]);
  });

  test("traces.export, delivered to the outbox without SMTP", async () => {
    const email = `sdk-export-${newId()}@example.com`;
    const userId = newId();
    await vigil.ctx.sql`INSERT INTO users (id, email) VALUES (${userId}, ${email})`;
    await vigil.ctx.sql`INSERT INTO memberships (organization_id, user_id, role) VALUES (${tenant.organizationId}, ${userId}, 'admin')`;
    // Confirming an address through its mailed link is tested in limits-mail.test.ts.
    await vigil.ctx.sql`INSERT INTO email_confirmations (email, confirmed_at) VALUES (${email.toLowerCase()}, now())`;
    expect(await client.traces.export(slug, { traces: { by: "ids", ids: [traceId] }, recipient: email })).toEqual({ status: "queued" });
    const outbox = join(vigil.ctx.config.dataDir, "outbox");
    const mail = await eventually(async () => {
      for (const file of await readdir(outbox).catch(() => [])) {
        const text = await readFile(join(outbox, file), "utf8");
        if (text.includes(`To: ${email}`)) return text;
      }
      return undefined;
    }, "the export email in the outbox");
    const link = mail.replace(/=\r?\n/g, "").replace(/=3D/g, "=").match(/http:\/\/\S+\/v1\/exports\/\S+\?token=[\w-]+/)![0];
    const csv = await (await fetch(link)).text();
    const [header, row] = csv.trim().split("\r\n");
    expect(header.split(",")[2]).toBe("traceId");
    expect(row.split(",")[2]).toBe(traceId);
  }, 30_000);
});
