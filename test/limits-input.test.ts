import { beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { filterLimits } from "../src/modules/traces/filters";
import { textLimits } from "../src/lib/validation";
import type { Vigil } from "../src/server";
import { insertSpans, newTraceId, spanRow, tenantOf, type Tenant } from "./fixtures/spans";
import { largestFilterSet } from "./fixtures/filters";
import { bootstrapAccount, json, sharedVigil } from "./helpers";

setDefaultTimeout(60_000);

let vigil: Vigil;
let apiKey: string;
let slug: string;
let tenant: Tenant;
const traceId = newTraceId();

beforeAll(async () => {
  vigil = await sharedVigil();
  const { account } = await bootstrapAccount(vigil.url);
  apiKey = account.apiKey;
  slug = account.projectSlug;
  tenant = await tenantOf(vigil.ctx, apiKey, slug);
  await insertSpans(vigil.ctx, [spanRow(tenant, { trace_id: traceId, startMs: Date.now() - 60_000, operation: "chat", metadata: { team: "a" } })]);
});

const call = (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) =>
  fetch(`${vigil.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json", ...headers },
    body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
  });

async function expectError(response: Response, status: number, pattern: RegExp) {
  const body = await json(response);
  expect({ status: response.status, body }).toMatchObject({ status, body: { error: expect.stringMatching(pattern) } });
}

const list = (filters: unknown, extra: Record<string, unknown> = {}) => call("POST", `/v1/projects/${slug}/traces/list`, { filters, ...extra });
const values = (count: number, length = 8) => Array.from({ length: count }, (_, i) => `${i}`.padStart(length, "v"));

describe("filter sets are bounded, with a 400 naming the limit", () => {
  test("fields, conditions per field, conditions in all, values per list and in all", async () => {
    const fields = Object.fromEntries(Array.from({ length: filterLimits.fields + 1 }, (_, i) => [`metadata.k${i}`, [{ op: "eq", value: "x" }]]));
    await expectError(await list(fields), 400, new RegExp(`more than ${filterLimits.fields} fields`));
    const conditions = Array.from({ length: filterLimits.conditionsPerField + 1 }, () => ({ op: "neq", value: "x" }));
    await expectError(await list({ "metadata.k": conditions }), 400, new RegExp(`filters.metadata.k has more than ${filterLimits.conditionsPerField} conditions`));
    const many = Object.fromEntries(Array.from({ length: 9 }, (_, i) => [`metadata.k${i}`, Array.from({ length: 8 }, () => ({ op: "neq", value: "x" }))]));
    await expectError(await list(many), 400, new RegExp(`more than ${filterLimits.conditions} conditions in all`));
    await expectError(await list({ "metadata.k": [{ op: "notIn", value: values(filterLimits.listValues + 1) }] }), 400, new RegExp(`more than ${filterLimits.listValues} items`));
    const wide = Object.fromEntries(Array.from({ length: 11 }, (_, i) => [`metadata.k${i}`, [{ op: "notIn", value: values(100) }]]));
    await expectError(await list(wide), 400, new RegExp(`more than ${filterLimits.values} values in all`));
    const long = Object.fromEntries(Array.from({ length: 2 }, (_, i) => [`metadata.k${i}`, [{ op: "notIn", value: values(40, filterLimits.stringLength) }]]));
    await expectError(await list(long), 400, new RegExp(`more than ${filterLimits.valueCharacters} characters of values in all`));
  });

  test("the largest filter set allowed is answered, not 'Max query size exceeded'", async () => {
    const response = await list(largestFilterSet(), { limit: 200 });
    expect(response.status).toBe(200);
    expect(((await response.json()) as { items: { traceId: string }[] }).items.map((item) => item.traceId)).toEqual([traceId]);
  });

  test("a field named __proto__ is an unknown field, not an unfiltered list", async () => {
    await expectError(await call("POST", `/v1/projects/${slug}/traces/list`, '{"filters":{"__proto__":[{"op":"eq","value":"x"}]}}'), 400, /__proto__/);
  });
});

describe("numbers and instants ClickHouse cannot hold are 400s naming the field", () => {
  test("numbers past 2^53 in trace filters, score TraceRef filters and exports", async () => {
    await expectError(await list({ cost: [{ op: "gt", value: 1e20 }] }), 400, /^filters\.cost\[0\]\.value must be a number from/);
    await expectError(await list({ tokensInput: [{ op: "eq", value: "9007199254740993" }] }), 400, /^filters\.tokensInput\[0\]\.value must be a number/);
    await expectError(
      await call("POST", `/v1/projects/${slug}/scores`, { value: 1, passed: true, feedback: "", sourceId: "x", trace: { by: "filters", filters: { cost: [{ op: "gt", value: 1e20 }] } } }),
      400,
      /^trace\.filters\.cost\[0\]\.value must be a number/,
    );
    await expectError(
      await call("POST", `/v1/projects/${slug}/traces/export`, { traces: { by: "filters", filters: { cost: [{ op: "gt", value: 1e20 }] } }, recipient: "a@example.com" }),
      400,
      /^filters\.cost\[0\]\.value must be a number/,
    );
  });

  test("instants outside 1900–2261 in filters and analytics", async () => {
    await expectError(await list({ startTime: [{ op: "gte", value: "2300-01-01T00:00:00Z" }] }), 400, /^filters\.startTime\[0\]\.value must be an ISO-8601 timestamp from 1900 to 2261/);
    await expectError(await list({ startTime: [{ op: "lte", value: "0001-01-01T00:00:00Z" }] }), 400, /^filters\.startTime\[0\]\.value must be an ISO-8601/);
    await expectError(await call("GET", `/v1/projects/${slug}/traces/analytics?fromIso=9999-12-30T00:00:00Z&toIso=9999-12-31T00:00:00Z`), 400, /^toIso: must be an ISO-8601/);
    await expectError(await call("GET", `/v1/projects/${slug}/traces/analytics?fromIso=9999-12-30T00:00:00Z`), 400, /^fromIso: /);
  });

  test("cursors holding impossible instants or out-of-range numbers", async () => {
    const cursor = (key: string[]) => Buffer.from(JSON.stringify(key)).toString("base64url");
    for (const instant of ["2024-13-45T99:99:99.000000Z", "2023-02-29T00:00:00.000000Z"]) {
      await expectError(await call("GET", `/v1/projects?cursor=${cursor([instant, "x"])}`), 400, /^cursor: is not a cursor/);
    }
    for (const micros of ["99999999999999999999", "9223372036854775807", "253402300800000000"]) {
      await expectError(await call("GET", `/v1/projects/${slug}/traces/${traceId}/annotations?cursor=${cursor([micros, "x"])}`), 400, /^cursor: is not a cursor/);
    }
  });
});

describe("stored text: storable characters and sizes, 400 naming the field", () => {
  const score = (fields: Record<string, unknown>) =>
    call("POST", `/v1/projects/${slug}/scores`, { value: 1, passed: true, feedback: "ok", sourceId: "x", trace: { by: "id", id: traceId }, ...fields });
  const annotate = (feedback: string) => call("POST", `/v1/projects/${slug}/annotations`, { value: 1, passed: true, feedback, trace: { by: "id", id: traceId } });

  test("NUL and lone surrogates in score metadata and annotation feedback", async () => {
    await expectError(await call("POST", `/v1/projects/${slug}/scores`, `{"value":1,"passed":true,"feedback":"ok","sourceId":"x","trace":{"by":"id","id":"${traceId}"},"metadata":{"a":"\\u0000"}}`), 400, /^metadata\.a: must not contain NUL/);
    await expectError(await call("POST", `/v1/projects/${slug}/scores`, `{"value":1,"passed":true,"feedback":"ok","sourceId":"x","trace":{"by":"id","id":"${traceId}"},"metadata":{"\\ud800":"x"}}`), 400, /^metadata: a key must not contain NUL characters or unpaired surrogates/);
    await expectError(await call("POST", `/v1/projects/${slug}/annotations`, `{"value":1,"passed":true,"feedback":"bad \\ud800 text","trace":{"by":"id","id":"${traceId}"}}`), 400, /^feedback: must not contain NUL characters or unpaired surrogates/);
    expect((await score({ metadata: { emoji: "ok 😀", nested: ["é"] } })).status).toBe(201);
  });

  test("feedback and metadata sizes", async () => {
    await expectError(await annotate("x".repeat(textLimits.feedback + 1)), 400, new RegExp(`^feedback: must be at most ${textLimits.feedback} characters`));
    await expectError(await score({ feedback: "x".repeat(textLimits.feedback + 1) }), 400, new RegExp(`^feedback: must be at most ${textLimits.feedback} characters`));
    await expectError(await score({ metadata: { big: "x".repeat(textLimits.metadataBytes) } }), 400, new RegExp(`^metadata: must be at most ${textLimits.metadataBytes} bytes of JSON`));
    expect((await annotate("x".repeat(textLimits.feedback))).status).toBe(201);
  });
});

describe("bodies", () => {
  test("bootstrap with a body of [] or \"x\" is a 400", async () => {
    for (const body of ["[]", '"x"', "3"]) {
      const response = await fetch(`${vigil.url}/v1/account/bootstrap`, { method: "POST", headers: { "content-type": "application/json" }, body });
      expect({ body, status: response.status }).toEqual({ body, status: 400 });
      expect(await response.json()).toEqual({ error: expect.any(String) });
    }
  });

  test("an announced body over the limit is a 413 {error}, before it is read, on API and OTLP routes", async () => {
    const { ingest, apiMaxBodyBytes } = vigil.ctx.config;
    for (const [path, limit] of [["/v1/traces", ingest.maxBodyBytes], [`/v1/projects/${slug}/traces/list`, apiMaxBodyBytes]] as const) {
      const { status, body } = await rawRequest(`POST ${path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${apiKey}\r\nContent-Type: application/json\r\nContent-Length: ${limit + 1}\r\n\r\n{`);
      expect({ path, status }).toEqual({ path, status: 413 });
      expect(JSON.parse(body)).toEqual({ error: `Request body exceeds the limit of ${limit} bytes` });
    }
  });

  test("a chunked OTLP body past the limit is a 413 {error} while it is read", async () => {
    const limit = vigil.ctx.config.ingest.maxBodyBytes;
    const chunk = new Uint8Array(1 << 20);
    let sent = 0;
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (sent > limit) return controller.close();
        sent += chunk.byteLength;
        controller.enqueue(chunk);
      },
    });
    const response = await fetch(`${vigil.url}/v1/traces`, {
      method: "POST",
      headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/x-protobuf", "x-latitude-project": slug },
      body,
      duplex: "half",
    } as RequestInit);
    expect(response.status).toBe(413);
    expect(await response.json()).toEqual({ error: `Request body exceeds the limit of ${limit} bytes` });
  });
});

/** One HTTP/1.1 request over a socket, the headers exactly as given, without sending the body they announce. */
async function rawRequest(head: string): Promise<{ status: number; body: string }> {
  const { port } = new URL(vigil.url);
  let text = "";
  const done = Promise.withResolvers<void>();
  const socket = await Bun.connect({
    hostname: "127.0.0.1",
    port: Number(port),
    socket: {
      data(_socket, data) {
        text += Buffer.from(data).toString("utf8");
        const [headers, body = ""] = text.split("\r\n\r\n");
        const length = Number(/content-length: (\d+)/i.exec(headers!)?.[1] ?? NaN);
        if (body.length >= length) done.resolve();
      },
      close: () => done.resolve(),
    },
  });
  socket.write(head);
  await done.promise;
  socket.terminate();
  const [headers, body = ""] = text.split("\r\n\r\n");
  return { status: Number(headers!.split(" ")[1]), body };
}
