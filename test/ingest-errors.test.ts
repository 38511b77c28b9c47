// Bad input to POST /v1/traces: each case gets its status and an `{error}` body (or an OTLP partial success), and
// nothing of a rejected span reaches storage. Also backpressure: 503 with Retry-After while ClickHouse is down.
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { randomBytes } from "node:crypto";
import { once } from "node:events";
import { join } from "node:path";
import { createGzip, gzipSync } from "node:zlib";
import { Client, credentials as grpcCredentials, Metadata, status as grpcStatus } from "@grpc/grpc-js";
import protobuf from "protobufjs";
import type { LatitudeClient } from "@latitude-data/sdk";
import type { Vigil } from "../src/server";
import { bootstrapAccount, sharedVigil, startTestVigil } from "./helpers";
import { freePort } from "./process";

setDefaultTimeout(60_000);

// Requests the SDK cannot produce (ids of the wrong length) are encoded with protobufjs over proto/.
const root = new protobuf.Root();
root.resolvePath = (_origin, target) => join(import.meta.dir, "..", "proto", target);
root.loadSync("opentelemetry/proto/collector/trace/v1/trace_service.proto");
const ExportRequest = root.lookupType("opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest");
const ExportResponse = root.lookupType("opentelemetry.proto.collector.trace.v1.ExportTraceServiceResponse");

const hex = (bytes: number) => randomBytes(bytes).toString("hex");
const nowNanos = () => BigInt(Date.now()) * 1_000_000n;

interface Tenant {
  client: LatitudeClient;
  apiKey: string;
  slug: string;
  projectId: string;
  organizationId: string;
}

async function tenant(vigil: Vigil, label: string): Promise<Tenant> {
  // Slugs are per organization: distinct names so one tenant's slug never names another's project by accident.
  const { account, client } = await bootstrapAccount(vigil.url, { projectName: `Errors ${label} ${hex(3)}` });
  const project = await client.projects.get(account.projectSlug);
  return { client, apiKey: account.apiKey, slug: account.projectSlug, projectId: project.id, organizationId: project.organizationId };
}

interface SpanSpec {
  traceId?: string;
  spanId?: string;
  name?: string;
  attributes?: Record<string, string>;
}

function spanAttributes(spec: SpanSpec) {
  return {
    "gen_ai.operation.name": "chat",
    "gen_ai.request.model": "gpt-4o",
    "gen_ai.input.messages": JSON.stringify([{ role: "user", content: `message of ${spec.name ?? "chat"}` }]),
    ...spec.attributes,
  };
}

/** An OTLP/JSON request: ids as hex strings, as the spec defines. */
function jsonRequest(specs: SpanSpec[], resource: Record<string, string> = {}): string {
  const start = nowNanos();
  const keyValues = (attributes: Record<string, string>) => Object.entries(attributes).map(([key, value]) => ({ key, value: { stringValue: value } }));
  const spans = specs.map((spec) => ({
    traceId: spec.traceId ?? hex(16),
    spanId: spec.spanId ?? hex(8),
    name: spec.name ?? "chat",
    kind: 3,
    startTimeUnixNano: String(start),
    endTimeUnixNano: String(start + 5_000_000n),
    attributes: [...keyValues(spanAttributes(spec)), { key: "gen_ai.usage.input_tokens", value: { intValue: "10" } }],
  }));
  return JSON.stringify({ resourceSpans: [{ resource: { attributes: keyValues(resource) }, scopeSpans: [{ scope: { name: "errors-test" }, spans }] }] });
}

/** The same request in protobuf: ids as raw bytes, so a wrong length is possible. */
function protobufRequest(specs: SpanSpec[], resource: Record<string, string> = {}): Uint8Array {
  const start = nowNanos();
  const keyValues = (attributes: Record<string, string>) => Object.entries(attributes).map(([key, value]) => ({ key, value: { stringValue: value } }));
  const spans = specs.map((spec) => ({
    traceId: Buffer.from(spec.traceId ?? hex(16), "hex"),
    spanId: Buffer.from(spec.spanId ?? hex(8), "hex"),
    name: spec.name ?? "chat",
    kind: 3,
    startTimeUnixNano: String(start),
    endTimeUnixNano: String(start + 5_000_000n),
    attributes: keyValues(spanAttributes(spec)),
  }));
  const request = { resourceSpans: [{ resource: { attributes: keyValues(resource) }, scopeSpans: [{ scope: { name: "errors-test" }, spans }] }] };
  return ExportRequest.encode(ExportRequest.fromObject(request)).finish();
}

const JSON_TYPE = { "content-type": "application/json" };
const PROTOBUF_TYPE = { "content-type": "application/x-protobuf" };
const credentials = (tenant: Tenant, project: string | null = tenant.slug): Record<string, string> => ({
  authorization: `Bearer ${tenant.apiKey}`,
  ...(project === null ? {} : { "x-latitude-project": project }),
});

function post(vigil: Vigil, body: RequestInit["body"], headers: Record<string, string>) {
  return fetch(`${vigil.url}/v1/traces`, { method: "POST", body, headers });
}

/** The status and an `{error}` body (JSON, nothing else in it) whose message matches. */
async function expectError(response: Response, status: number, message: RegExp | string) {
  const text = await response.text();
  expect({ status: response.status, text }).toMatchObject({ status });
  const body = JSON.parse(text);
  expect(Object.keys(body)).toEqual(["error"]);
  if (typeof message === "string") expect(body.error).toBe(message);
  else expect(body.error).toMatch(message);
  return body.error as string;
}

/** Rows of the organization in `spans` once everything accepted so far is inserted: what storage really holds. */
async function storedSpans(vigil: Vigil, organizationId: string): Promise<{ trace_id: string; span_id: string; name: string }[]> {
  await vigil.ctx.spanWriter.flush();
  const { ch } = vigil.ctx;
  const result = await ch.client.query({
    query: `SELECT trace_id, span_id, name FROM ${ch.database}.spans WHERE organization_id = {organization:String} ORDER BY name`,
    query_params: { organization: organizationId },
    format: "JSONEachRow",
  });
  return result.json();
}

/** Nothing in `spans`, no trace through the read API, and no first trace recorded. */
async function expectNothingStored(vigil: Vigil, tenant: Tenant) {
  expect(await storedSpans(vigil, tenant.organizationId)).toEqual([]);
  expect((await tenant.client.traces.list(tenant.slug)).items).toEqual([]);
  expect((await tenant.client.projects.get(tenant.slug)).firstTraceAt).toBeNull();
}

let vigil: Vigil;
beforeAll(async () => {
  vigil = await sharedVigil();
});

describe("bodies that cannot be decoded are 400s", () => {
  test("garbage protobuf", async () => {
    const owner = await tenant(vigil, "garbage");
    const valid = protobufRequest([{ name: "cut" }]);
    const bodies = [
      // A length-delimited field longer than the body.
      Uint8Array.of(0x0a, 0x80, 0x80, 0x80, 0x80, 0x08, 0x01),
      // A varint that never ends.
      new Uint8Array(12).fill(0xff),
      // A real request cut in half.
      valid.slice(0, valid.length >> 1),
    ];
    for (const body of bodies) await expectError(await post(vigil, body, { ...PROTOBUF_TYPE, ...credentials(owner) }), 400, /^Cannot decode OTLP protobuf body: /);
    await expectNothingStored(vigil, owner);
  });

  test("truncated or misshapen JSON", async () => {
    const owner = await tenant(vigil, "json");
    const valid = jsonRequest([{ name: "cut" }]);
    await expectError(await post(vigil, valid.slice(0, valid.length >> 1), { ...JSON_TYPE, ...credentials(owner) }), 400, /^Cannot decode OTLP json body: /);
    await expectError(await post(vigil, '{"resourceSpans": 5}', { ...JSON_TYPE, ...credentials(owner) }), 400, /resourceSpans must be an array/);
    await expectNothingStored(vigil, owner);
  });

  test("an empty request is a successful no-op, as for the OpenTelemetry Collector", async () => {
    const owner = await tenant(vigil, "empty");
    for (const body of ["{}", '{"resourceSpans":[]}', '{"resourceSpans":[{"scopeSpans":[{"spans":[]}]}]}']) {
      const response = await post(vigil, body, { ...JSON_TYPE, ...credentials(owner) });
      expect(response.status).toBe(200);
      expect(await response.json()).toEqual({});
    }
    const protobuf = await post(vigil, new Uint8Array(0), { ...PROTOBUF_TYPE, ...credentials(owner) });
    expect(protobuf.status).toBe(200);
    expect((await protobuf.arrayBuffer()).byteLength).toBe(0);
    await expectNothingStored(vigil, owner);
  });

  test("a body that claims gzip but is not", async () => {
    const owner = await tenant(vigil, "fake-gzip");
    const response = await post(vigil, jsonRequest([{}]), { ...JSON_TYPE, "content-encoding": "gzip", ...credentials(owner) });
    await expectError(response, 400, "Body is not valid gzip");
    await expectNothingStored(vigil, owner);
  });
});

describe("content type and encoding", () => {
  test("a wrong or missing content type is a 415", async () => {
    const owner = await tenant(vigil, "type");
    const body = jsonRequest([{}]);
    await expectError(await post(vigil, body, { "content-type": "text/plain", ...credentials(owner) }), 415, /^Unsupported content type "text\/plain"/);
    await expectError(await post(vigil, body, { "content-type": "application/xml", ...credentials(owner) }), 415, /^Unsupported content type/);
    // fetch labels a string body text/plain unless told otherwise; a Blob without a type sends none.
    await expectError(await post(vigil, new Blob([body]), credentials(owner)), 415, /^Unsupported content type "none"/);
    await expectNothingStored(vigil, owner);
  });

  test("an unsupported content encoding is a 415", async () => {
    const owner = await tenant(vigil, "encoding");
    for (const encoding of ["br", "deflate", "zstd"]) {
      const response = await post(vigil, jsonRequest([{}]), { ...JSON_TYPE, "content-encoding": encoding, ...credentials(owner) });
      await expectError(response, 415, `Unsupported content encoding "${encoding}": send gzip or none`);
    }
    await expectNothingStored(vigil, owner);
  });

  test("gzip and identity bodies in both encodings are accepted (the baseline of the cases above)", async () => {
    const owner = await tenant(vigil, "baseline");
    const json = await post(vigil, gzipSync(jsonRequest([{ name: "gzip json" }])), { ...JSON_TYPE, "content-encoding": "gzip", ...credentials(owner) });
    expect(json.status).toBe(200);
    expect(await json.json()).toEqual({});
    const binary = await post(vigil, protobufRequest([{ name: "identity protobuf" }]), { ...PROTOBUF_TYPE, "content-encoding": "identity", ...credentials(owner) });
    expect(binary.status).toBe(200);
    expect(binary.headers.get("content-type")).toBe("application/x-protobuf");
    expect((await binary.arrayBuffer()).byteLength).toBe(0);
    expect((await storedSpans(vigil, owner.organizationId)).map((span) => span.name)).toEqual(["gzip json", "identity protobuf"]);
  });
});

describe("size limits", () => {
  let limited: Vigil;
  beforeAll(async () => {
    limited = await startTestVigil({ INGEST_MAX_BODY_BYTES: "65536", INGEST_MAX_DECOMPRESSED_BYTES: "1048576" });
  });
  afterAll(async () => {
    await limited?.stop();
  });

  const bigRequest = (bytes: number) => jsonRequest([{ name: "big", attributes: { "app.note": "x".repeat(bytes) } }]);

  test("an oversize body is a 413, announced or streamed", async () => {
    const owner = await tenant(limited, "oversize");
    const body = bigRequest(100_000);
    await expectError(await post(limited, body, { ...JSON_TYPE, ...credentials(owner) }), 413, "Request body exceeds the limit of 65536 bytes");
    // Without Content-Length (chunked), the limit applies to what was read.
    const encoded = new TextEncoder().encode(body);
    const stream = new ReadableStream<Uint8Array>({
      start(controller) {
        for (let offset = 0; offset < encoded.length; offset += 16_384) controller.enqueue(encoded.slice(offset, offset + 16_384));
        controller.close();
      },
    });
    await expectError(await post(limited, stream, { ...JSON_TYPE, ...credentials(owner) }), 413, "Request body exceeds the limit of 65536 bytes");
    // Just under the limit is fine.
    const fits = await post(limited, bigRequest(60_000), { ...JSON_TYPE, ...credentials(owner) });
    expect(fits.status).toBe(200);
    expect((await storedSpans(limited, owner.organizationId)).length).toBe(1);
  });

  test("a small gzip body that inflates past the limit is a 413", async () => {
    const owner = await tenant(limited, "inflated");
    const compressed = gzipSync(bigRequest(2_000_000));
    expect(compressed.length).toBeLessThan(65536);
    await expectError(
      await post(limited, compressed, { ...JSON_TYPE, "content-encoding": "gzip", ...credentials(owner) }),
      413,
      "Decompressed body exceeds the limit of 1048576 bytes",
    );
    await expectNothingStored(limited, owner);
  });
});

/** gzip of `bytes` zeros, compressed a megabyte at a time so the test never holds them all. */
async function gzipOfZeros(bytes: number): Promise<Buffer> {
  const gzip = createGzip({ level: 9 });
  const chunks: Buffer[] = [];
  gzip.on("data", (chunk: Buffer) => chunks.push(chunk));
  const ended = once(gzip, "end");
  const zeros = Buffer.alloc(1 << 20);
  for (let written = 0; written < bytes; written += zeros.length) if (!gzip.write(zeros)) await once(gzip, "drain");
  gzip.end();
  await ended;
  return Buffer.concat(chunks);
}

describe("gzip bomb", () => {
  let guarded: Vigil;
  beforeAll(async () => {
    // The default 16 MiB body limit lets the ~200 KB bomb through to the inflater.
    guarded = await startTestVigil({ INGEST_MAX_DECOMPRESSED_BYTES: "1048576" });
  });
  afterAll(async () => {
    await guarded?.stop();
  });

  test("200 MB of zeros stops at the 1 MiB limit with a 413, and the server stays healthy", async () => {
    const owner = await tenant(guarded, "bomb");
    const bomb = await gzipOfZeros(200 << 20);
    expect(bomb.length).toBeLessThan(300_000);
    Bun.gc(true);
    const rssBefore = process.memoryUsage().rss;
    const started = performance.now();
    for (const type of [PROTOBUF_TYPE, JSON_TYPE]) {
      const response = await post(guarded, bomb, { ...type, "content-encoding": "gzip", ...credentials(owner) });
      await expectError(response, 413, "Decompressed body exceeds the limit of 1048576 bytes");
    }
    // Inflating 200 MB twice would take far longer and show in this process's memory (the server runs in it).
    expect(performance.now() - started).toBeLessThan(2_000);
    expect(process.memoryUsage().rss - rssBefore).toBeLessThan(100 << 20);

    const health = await fetch(`${guarded.url}/health`);
    expect(health.status).toBe(200);
    const after = await post(guarded, gzipSync(jsonRequest([{ name: "after the bomb" }])), { ...JSON_TYPE, "content-encoding": "gzip", ...credentials(owner) });
    expect(after.status).toBe(200);
    expect((await storedSpans(guarded, owner.organizationId)).map((span) => span.name)).toEqual(["after the bomb"]);
  });
});

describe("span ids", () => {
  const shortTraceId = "abcd";

  test("JSON: a wrong trace id length rejects the span; all rejected is a 400", async () => {
    const owner = await tenant(vigil, "json-ids");
    const all = await post(vigil, jsonRequest([{ traceId: shortTraceId, name: "bad one" }, { traceId: hex(17), name: "bad two" }]), { ...JSON_TYPE, ...credentials(owner) });
    await expectError(all, 400, /^All spans rejected: invalid trace id "abcd": expected 16 bytes, not all zero; invalid trace id "[0-9a-f]{34}"/);
    await expectNothingStored(vigil, owner);
  });

  test("JSON: mixed with a valid span, 200 with partialSuccess and only the valid span stored", async () => {
    const owner = await tenant(vigil, "json-mixed");
    const traceId = hex(16);
    const response = await post(vigil, jsonRequest([{ traceId, name: "valid" }, { traceId: shortTraceId, name: "bad trace id" }]), { ...JSON_TYPE, ...credentials(owner) });
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({
      partialSuccess: { rejectedSpans: 1, errorMessage: 'invalid trace id "abcd": expected 16 bytes, not all zero' },
    });
    // A wrong span id in the valid span's own trace: rejected alone too.
    const spanIdResponse = await post(vigil, jsonRequest([{ traceId, spanId: "0102", name: "bad span id" }, { traceId, name: "valid too" }]), {
      ...JSON_TYPE,
      ...credentials(owner),
    });
    expect(await spanIdResponse.json()).toEqual({
      partialSuccess: { rejectedSpans: 1, errorMessage: `invalid span id "0102" in trace ${traceId}: expected 8 bytes, not all zero` },
    });
    const stored = await storedSpans(vigil, owner.organizationId);
    expect(stored.map((span) => [span.trace_id, span.name])).toEqual([
      [traceId, "valid"],
      [traceId, "valid too"],
    ]);
    const { items } = await owner.client.traces.listSpans(owner.slug, traceId);
    expect(items.map((span) => span.name).sort()).toEqual(["valid", "valid too"]);
    expect((await owner.client.traces.get(owner.slug, traceId)).spanCount).toBe(2);
  });

  test("protobuf: all rejected is a 400; mixed is 200 with an encoded partial success", async () => {
    const owner = await tenant(vigil, "protobuf-ids");
    const all = await post(vigil, protobufRequest([{ traceId: shortTraceId }, { traceId: hex(16), spanId: "01" }]), { ...PROTOBUF_TYPE, ...credentials(owner) });
    await expectError(all, 400, /^All spans rejected: invalid trace id "abcd": .*; invalid span id "01" in trace /);
    await expectNothingStored(vigil, owner);

    const traceId = hex(16);
    const mixed = await post(vigil, protobufRequest([{ traceId, name: "valid" }, { traceId: hex(20), name: "long trace id" }]), { ...PROTOBUF_TYPE, ...credentials(owner) });
    expect(mixed.status).toBe(200);
    expect(mixed.headers.get("content-type")).toBe("application/x-protobuf");
    const decoded = ExportResponse.toObject(ExportResponse.decode(new Uint8Array(await mixed.arrayBuffer())), { longs: Number });
    expect(decoded).toEqual({ partialSuccess: { rejectedSpans: 1, errorMessage: expect.stringMatching(/^invalid trace id "[0-9a-f]{40}": expected 16 bytes/) } });
    expect((await storedSpans(vigil, owner.organizationId)).map((span) => [span.trace_id, span.name])).toEqual([[traceId, "valid"]]);
  });
});

describe("projects", () => {
  test("an unknown project is a 400; spans without any project are a 400", async () => {
    const owner = await tenant(vigil, "unknown");
    await expectError(await post(vigil, jsonRequest([{}]), { ...JSON_TYPE, ...credentials(owner, "no-such-project") }), 400, /unknown project "no-such-project"/);
    await expectError(
      await post(vigil, protobufRequest([{}], { "latitude.project": "nope-too" }), { ...PROTOBUF_TYPE, ...credentials(owner) }),
      400,
      /unknown project "nope-too"/,
    );
    await expectError(await post(vigil, jsonRequest([{}, {}]), { ...JSON_TYPE, ...credentials(owner, null) }), 400, /^All spans rejected: span [0-9a-f]{16}: no project/);
    await expectNothingStored(vigil, owner);
  });

  test("another organization's project, by slug or id, is unknown", async () => {
    const owner = await tenant(vigil, "owner");
    const stranger = await tenant(vigil, "stranger");
    for (const reference of [stranger.slug, stranger.projectId]) {
      await expectError(await post(vigil, jsonRequest([{}]), { ...JSON_TYPE, ...credentials(owner, reference) }), 400, new RegExp(`unknown project "${reference}"`));
      const inAttribute = jsonRequest([{ attributes: { "latitude.project": reference } }]);
      await expectError(await post(vigil, inAttribute, { ...JSON_TYPE, ...credentials(owner, null) }), 400, new RegExp(`unknown project "${reference}"`));
    }
    // Mixed with a span of its own project: only its own is stored.
    const mixed = await post(vigil, jsonRequest([{ name: "mine" }, { name: "theirs", attributes: { "latitude.project": stranger.projectId } }]), {
      ...JSON_TYPE,
      ...credentials(owner),
    });
    expect(await mixed.json()).toEqual({ partialSuccess: { rejectedSpans: 1, errorMessage: expect.stringContaining(`unknown project "${stranger.projectId}"`) } });
    expect((await storedSpans(vigil, owner.organizationId)).map((span) => span.name)).toEqual(["mine"]);
    await expectNothingStored(vigil, stranger);
  });

  test("a project created after a miss takes spans at once; a deleted one refuses them at once", async () => {
    const owner = await tenant(vigil, "lifecycle");
    const name = `Lifecycle late ${hex(3)}`;
    const slug = name.toLowerCase().replaceAll(" ", "-");
    await expectError(await post(vigil, jsonRequest([{ name: "early" }]), { ...JSON_TYPE, ...credentials(owner, slug) }), 400, /unknown project/);
    const created = await owner.client.projects.create({ name });
    expect(created.slug).toBe(slug);
    expect((await post(vigil, jsonRequest([{ name: "late" }]), { ...JSON_TYPE, ...credentials(owner, slug) })).status).toBe(200);
    await owner.client.projects.delete(slug);
    await expectError(await post(vigil, jsonRequest([{ name: "after delete" }]), { ...JSON_TYPE, ...credentials(owner, slug) }), 400, /unknown project/);
    expect((await storedSpans(vigil, owner.organizationId)).map((span) => span.name)).toEqual(["late"]);
  });
});

/** One raw OTLP/gRPC Export call; resolves with the response bytes or the call's status. */
function grpcExport(port: number, body: Uint8Array, tenant: Tenant): Promise<{ code: number; details: string; response: Buffer | null }> {
  const client = new Client(`127.0.0.1:${port}`, grpcCredentials.createInsecure());
  const metadata = new Metadata();
  metadata.set("authorization", `Bearer ${tenant.apiKey}`);
  metadata.set("x-latitude-project", tenant.slug);
  const identity = (bytes: Buffer) => bytes;
  return new Promise((resolve) =>
    client.makeUnaryRequest("/opentelemetry.proto.collector.trace.v1.TraceService/Export", identity, identity, Buffer.from(body), metadata, (error, response) => {
      client.close();
      resolve(error ? { code: error.code ?? -1, details: error.details ?? "", response: null } : { code: grpcStatus.OK, details: "", response: response ?? null });
    }),
  );
}

describe("OTLP/gRPC", () => {
  let grpcVigil: Vigil;
  let port: number;
  beforeAll(async () => {
    port = await freePort();
    grpcVigil = await startTestVigil({ OTLP_GRPC_PORT: String(port) });
  });
  afterAll(async () => {
    await grpcVigil?.stop();
  });

  test("an undecodable body is INVALID_ARGUMENT; a partly valid one is OK with an encoded partial success", async () => {
    const owner = await tenant(grpcVigil, "grpc");
    const garbage = await grpcExport(port, new Uint8Array(12).fill(0xff), owner);
    expect(garbage.code).toBe(grpcStatus.INVALID_ARGUMENT);
    expect(garbage.details).toStartWith("Cannot decode OTLP protobuf body");

    const mixed = await grpcExport(port, protobufRequest([{ name: "kept" }, { name: "short id", traceId: hex(8) }]), owner);
    expect(mixed.code).toBe(grpcStatus.OK);
    const answer = ExportResponse.toObject(ExportResponse.decode(mixed.response!), { longs: Number }) as { partialSuccess?: { rejectedSpans: number; errorMessage: string } };
    expect(answer.partialSuccess?.rejectedSpans).toBe(1);
    expect(answer.partialSuccess?.errorMessage).toContain("trace id");

    const full = await grpcExport(port, protobufRequest([{ name: "also kept" }]), owner);
    expect(full.code).toBe(grpcStatus.OK);
    expect(full.response!.byteLength).toBe(0);
    expect((await storedSpans(grpcVigil, owner.organizationId)).map((span) => span.name).sort()).toEqual(["also kept", "kept"]);
  });
});

describe("credentials", () => {
  test("a missing key is a 401 with WWW-Authenticate", async () => {
    const owner = await tenant(vigil, "no-key");
    for (const authorization of [null, "Basic dXNlcjpwYXNz", "Bearer"]) {
      const response = await post(vigil, jsonRequest([{}]), { ...JSON_TYPE, "x-latitude-project": owner.slug, ...(authorization ? { authorization } : {}) });
      expect(response.headers.get("www-authenticate")).toBe("Bearer");
      await expectError(response, 401, "Missing bearer token");
    }
    await expectNothingStored(vigil, owner);
  });

  test("the key is checked before the body is read: a bad gzip body without a key is a 401, not a 400", async () => {
    const owner = await tenant(vigil, "key-first");
    const response = await post(vigil, jsonRequest([{}]), { ...JSON_TYPE, "content-encoding": "gzip", "x-latitude-project": owner.slug });
    await expectError(response, 401, "Missing bearer token");
  });

  test("an invalid or revoked key is a 401", async () => {
    const owner = await tenant(vigil, "revoked");
    const invalid = await post(vigil, jsonRequest([{}]), { ...JSON_TYPE, authorization: `Bearer ${owner.apiKey}x`, "x-latitude-project": owner.slug });
    expect(invalid.headers.get("www-authenticate")).toBe("Bearer");
    await expectError(invalid, 401, "Invalid or revoked credentials");

    const key = await owner.client.apiKeys.create({ name: "ingest, soon revoked" });
    const withKey = (name: string) => post(vigil, jsonRequest([{ name }]), { ...JSON_TYPE, authorization: `Bearer ${key.token}`, "x-latitude-project": owner.slug });
    expect((await withKey("before revocation")).status).toBe(200);
    await owner.client.apiKeys.revoke(key.id);
    await expectError(await withKey("after revocation"), 401, "Invalid or revoked credentials");
    expect((await storedSpans(vigil, owner.organizationId)).map((span) => span.name)).toEqual(["before revocation"]);
  });
});

describe("concurrent exports", () => {
  test("past INGEST_MAX_CONCURRENT_EXPORTS an export is a 503 with Retry-After at once, and stores nothing", async () => {
    const single = await startTestVigil({ INGEST_MAX_CONCURRENT_EXPORTS: "1" });
    try {
      const owner = await tenant(single, "concurrency");
      // The first export holds the only slot while its body is still arriving.
      const encoded = new TextEncoder().encode(jsonRequest([{ name: "first" }]));
      let finish!: () => void;
      const bodyRest = new Promise<void>((resolve) => (finish = resolve));
      const slow = new ReadableStream<Uint8Array>({
        async start(controller) {
          controller.enqueue(encoded.slice(0, 10));
          await bodyRest;
          controller.enqueue(encoded.slice(10));
          controller.close();
        },
      });
      const first = post(single, slow, { ...JSON_TYPE, ...credentials(owner) });
      await Bun.sleep(200);
      const refused = await post(single, jsonRequest([{ name: "second" }]), { ...JSON_TYPE, ...credentials(owner) });
      expect(refused.headers.get("retry-after")).toBe("1");
      await expectError(refused, 503, "Ingest is saturated, retry later");
      finish();
      expect((await first).status).toBe(200);
      const third = await post(single, jsonRequest([{ name: "third" }]), { ...JSON_TYPE, ...credentials(owner) });
      expect(third.status).toBe(200);
      expect((await storedSpans(single, owner.organizationId)).map((span) => span.name)).toEqual(["first", "third"]);
    } finally {
      await single.stop();
    }
  });
});

describe("backpressure", () => {
  // The smallest queue INGEST_QUEUE_BYTES allows (src/config.ts): 1 MiB in memory, 4 MiB of write-ahead log backlog.
  let pressed: Vigil;
  let pressedGrpcPort: number;
  beforeAll(async () => {
    pressedGrpcPort = await freePort();
    pressed = await startTestVigil({ INGEST_QUEUE_BYTES: String(1 << 20), INGEST_FLUSH_MS: "20", OTLP_GRPC_PORT: String(pressedGrpcPort) });
  });
  afterAll(async () => {
    await pressed?.stop();
  });

  /** A ClickHouse that refuses every insert into `spans` until the constraint is dropped: a real outage of the table, no mock. */
  const outage = (on: boolean) =>
    pressed.ctx.ch.client.command({
      query: on
        ? `ALTER TABLE ${pressed.ctx.ch.database}.spans ADD CONSTRAINT vigil_test_outage CHECK 0`
        : `ALTER TABLE ${pressed.ctx.ch.database}.spans DROP CONSTRAINT vigil_test_outage`,
    });

  test("with ClickHouse down the backlog fills, exports get 503 with Retry-After, and everything acknowledged lands once it is back", async () => {
    const owner = await tenant(pressed, "pressure");
    const note = "n".repeat(4_000);
    /** ~200 KB: 50 spans of one fresh trace. */
    const request = () => {
      const traceId = hex(16);
      return { traceId, body: protobufRequest(Array.from({ length: 50 }, (_, index) => ({ traceId, name: `span ${index}`, attributes: { "app.note": note } }))) };
    };
    const acknowledged: string[] = [];
    const refused: string[] = [];
    let retryAfter: string | null = null;
    await outage(true);
    try {
      for (let attempt = 0; attempt < 60 && refused.length === 0; attempt++) {
        const { traceId, body } = request();
        const response = await post(pressed, body, { ...PROTOBUF_TYPE, ...credentials(owner) });
        if (response.status === 200) acknowledged.push(traceId);
        else {
          retryAfter = response.headers.get("retry-after");
          await expectError(response, 503, "Ingest is saturated, retry later");
          refused.push(traceId);
        }
      }
      // More than the 4 MiB backlog was taken before the first refusal, and the inserts really failed meanwhile.
      expect(acknowledged.length).toBeGreaterThanOrEqual(15);
      expect(refused.length).toBe(1);
      expect(retryAfter).toBe("5");
      expect(pressed.ctx.spanWriter.stats().failedInserts).toBeGreaterThan(0);
      expect(pressed.ctx.spanWriter.stats().walBytes).toBeGreaterThan(3 << 20);

      // A burst while saturated: every answer is a 200 or a 503, never an error or a crash.
      const burst = await Promise.all(
        Array.from({ length: 12 }, async () => {
          const { traceId, body } = request();
          const response = await post(pressed, body, { ...PROTOBUF_TYPE, ...credentials(owner) });
          (response.status === 200 ? acknowledged : refused).push(traceId);
          return response.status;
        }),
      );
      expect(burst.every((status) => status === 503)).toBe(true);
      const overGrpc = await grpcExport(pressedGrpcPort, request().body, owner);
      expect(overGrpc.code).toBe(grpcStatus.UNAVAILABLE);
      expect(overGrpc.details).toBe("Ingest is saturated, retry later");
      // Refused on its announced size before it is read: an undecodable body of that size gets the same 503, not a 400.
      await expectError(await post(pressed, new Uint8Array(200_000).fill(0xff), { ...PROTOBUF_TYPE, ...credentials(owner) }), 503, "Ingest is saturated, retry later");
      expect((await fetch(`${pressed.url}/health`)).status).toBe(200);
    } finally {
      await outage(false);
    }

    // Back up: the retries insert the backlog; nothing acknowledged was dropped, nothing refused was kept.
    const drained = await Promise.race([pressed.ctx.spanWriter.flush().then(() => true), Bun.sleep(30_000).then(() => false)]);
    expect(drained).toBe(true);
    const stored = await storedSpans(pressed, owner.organizationId);
    const perTrace = new Map<string, number>();
    for (const span of stored) perTrace.set(span.trace_id, (perTrace.get(span.trace_id) ?? 0) + 1);
    expect([...perTrace.keys()].sort()).toEqual([...acknowledged].sort());
    for (const traceId of acknowledged) expect(perTrace.get(traceId)).toBe(50);

    const { traceId, body } = request();
    expect((await post(pressed, body, { ...PROTOBUF_TYPE, ...credentials(owner) })).status).toBe(200);
    expect((await owner.client.traces.get(owner.slug, (await pressed.ctx.spanWriter.flush(), traceId))).spanCount).toBe(50);
  });
});
