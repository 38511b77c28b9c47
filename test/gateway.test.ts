import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import type { LatitudeClient } from "@latitude-data/sdk";
import { Latitude } from "latitude-gateway-sdk";
import { scoreStorage } from "../src/modules/scores/storage";
import type { Vigil } from "../src/server";
import { startFakeProvider, type FakeProvider } from "./gateway-provider";
import { bootstrapAccount, startTestVigil } from "./helpers";

setDefaultTimeout(60_000);

let vigil: Vigil;
let second: Vigil;
let provider: FakeProvider;
let apiKey: string;
let v1: LatitudeClient;
let projectSlug: string;
let projectId: number;
let draftUuid: string;

const PROMPT = `---
provider: openai
model: gpt-4o-mini
temperature: 0
---
<system>You greet people.</system>
<user>{{ name }}</user>`;

const TOOL_PROMPT = `---
provider: openai
model: gpt-4o-mini
tools:
  get_weather:
    description: Weather of a city
    parameters:
      type: object
      properties:
        city: { type: string }
---
<user>What is the weather?</user>`;

const CHAIN_PROMPT = `---
provider: openai
model: gpt-4o-mini
---
<step>
  <user>first</user>
</step>
<step>
  <user>second</user>
</step>`;

const sdkFor = (target: Vigil, key = apiKey, versionUuid?: string) =>
  new Latitude(key, { projectId, versionUuid, __internal: { gateway: { host: "127.0.0.1", port: target.port, ssl: false } } } as never);
const api = (target: Vigil, path: string, init: RequestInit & { key?: string } = {}) =>
  fetch(`${target.url}/api/v3${path}`, { ...init, headers: { Authorization: `Bearer ${init.key ?? apiKey}`, "content-type": "application/json", ...init.headers } });

beforeAll(async () => {
  provider = startFakeProvider({ slowChunkMs: 40 });
  const env = { OPENAI_API_KEY: "test", OPENAI_BASE_URL: provider.url };
  vigil = await startTestVigil(env);
  const config = vigil.ctx.config;
  // A second Vigil on the same stores: another process as far as runs, events and stops are concerned.
  second = await startTestVigil({ ...env, DATABASE_URL: config.databaseUrl!, CLICKHOUSE_DATABASE: config.clickhouse.database });
  const { account, client } = await bootstrapAccount(vigil.url);
  v1 = client;
  apiKey = account.apiKey;
  projectSlug = account.projectSlug;
  const [org] = await vigil.ctx.sql<{ organization_id: string }[]>`SELECT organization_id FROM api_keys`;
  await vigil.ctx.sql`UPDATE organizations SET plan = 'enterprise' WHERE id = ${org!.organization_id}`;
  const [project] = await vigil.ctx.sql<{ gateway_id: string }[]>`SELECT gateway_id FROM projects WHERE organization_id = ${org!.organization_id} AND slug = ${projectSlug}`;
  projectId = Number(project!.gateway_id);
});

afterAll(async () => {
  await second?.stop();
  await vigil?.stop();
  provider?.stop();
});

describe("projects, versions and prompts", () => {
  test("the client manages projects, versions and prompts; live changes need force", async () => {
    const sdk = sdkFor(vigil);
    const created = (await sdk.projects.create("Gateway project")) as any;
    expect(created.project.name).toBe("Gateway project");
    expect(typeof created.project.id).toBe("number");
    expect(created.version.mergedAt).toBeNull();
    const all = (await sdk.projects.getAll()) as any[];
    expect(all.map((p) => p.id)).toContain(created.project.id);

    const version = (await sdk.versions.create("work")) as any;
    draftUuid = version.uuid;
    expect(version.version).toBeNull();
    expect(((await sdk.versions.get(projectId, draftUuid)) as any).uuid).toBe(draftUuid);
    const draft = sdkFor(vigil, apiKey, draftUuid);
    const prompt = (await draft.prompts.create("support/greet", { prompt: PROMPT })) as any;
    expect(prompt.path).toBe("support/greet");
    expect(prompt.config).toMatchObject({ provider: "openai", model: "gpt-4o-mini" });
    expect(prompt.parameters).toEqual({ name: { type: "text" } });
    expect(prompt.provider).toBe("openai");
    const again = (await draft.prompts.getOrCreate("support/greet")) as any;
    expect(again.uuid).toBe(prompt.uuid);
    expect(again.content).toBe(PROMPT);
    await draft.prompts.create("tools/weather", { prompt: TOOL_PROMPT });
    await draft.prompts.create("chain", { prompt: CHAIN_PROMPT });
    await draft.prompts.create("json", { prompt: `---\nprovider: openai\nmodel: gpt-4o-mini\nschema:\n  type: object\n  properties:\n    answer: { type: number }\n---\n<user>Answer</user>` });
    expect(((await draft.prompts.get("support/greet")) as any).content).toBe(PROMPT);
    expect(((await draft.prompts.getAll()) as any[]).map((p) => p.path).sort()).toEqual(["chain", "json", "support/greet", "tools/weather"]);

    // A compile error is reported at save.
    const broken = await api(vigil, `/projects/${projectId}/versions/${draftUuid}/documents/create-or-update`, { method: "POST", body: JSON.stringify({ path: "broken", prompt: "<user>{{ </user>" }) });
    expect(broken.status).toBe(400);
    expect(((await broken.json()) as any).errorCode).toBe("chain_compile_error");

    // Delete in the draft, then restore.
    const removed = await api(vigil, `/projects/${projectId}/versions/${draftUuid}/documents/json`, { method: "DELETE" });
    expect(removed.status).toBe(200);
    expect((await api(vigil, `/projects/${projectId}/versions/${draftUuid}/documents/json`)).status).toBe(404);
    expect((await api(vigil, `/projects/${projectId}/versions/${draftUuid}/documents/restore`, { method: "POST", body: JSON.stringify({ path: "json" }) })).status).toBe(200);

    const published = await api(vigil, `/projects/${projectId}/versions/${draftUuid}/publish`, { method: "POST", body: JSON.stringify({ title: "First", description: "notes" }) });
    const live: any = await published.json();
    expect(published.status).toBe(200);
    expect(live.version).toBeGreaterThan(1);
    expect(live.mergedAt).not.toBeNull();
    expect(((await sdk.prompts.get("support/greet")) as any).versionUuid).toBe(draftUuid);

    const update = (force?: boolean) =>
      api(vigil, `/projects/${projectId}/versions/live/documents/create-or-update`, { method: "POST", body: JSON.stringify({ path: "support/greet", prompt: PROMPT + "\n", force }) });
    const refused = await update();
    expect(refused.status).toBe(400);
    expect(await refused.json()).toMatchObject({ name: "BadRequestError", errorCode: "BadRequestError" });
    expect((await update(true)).status).toBe(200);
    expect(refused.headers.get("x-ratelimit-limit")).toBe("30000");

    const pushed = await sdk.versions.push(projectId, "live", [{ path: "pushed/one", content: "<user>hi</user>", status: "added" } as never]);
    expect(((await sdkFor(vigil, apiKey, pushed.commitUuid).prompts.get("pushed/one")) as any).content).toBe("<user>hi</user>");
    expect(((await sdk.versions.getAll()) as any[]).length).toBeGreaterThanOrEqual(3);
  });
});

describe("runs", () => {
  test("a run, not streamed and streamed, and chats; the run is a trace readable through /v1", async () => {
    const sdk = sdkFor(vigil);
    const run = (await sdk.prompts.run("support/greet", { parameters: { name: "Ada" }, customIdentifier: "c-1" })) as any;
    expect(run.response.text).toBe("Hello, Ada");
    expect(run.response.usage).toMatchObject({ inputTokens: 12, outputTokens: 7, promptTokens: 12, completionTokens: 7, totalTokens: 19 });
    expect(run.response.cost).toBeGreaterThan(0);
    expect(run.conversation.map((m: any) => m.role)).toEqual(["system", "user", "assistant"]);

    const events: string[] = [];
    const streamed = (await sdk.prompts.run("support/greet", { parameters: { name: "Bo" }, stream: true, onEvent: ({ data }: any) => events.push(data.type) })) as any;
    expect(streamed.response.text).toBe("Hello, Bo");
    expect(events.filter((type) => type === "text-delta").length).toBe(3);
    expect(events[0]).toBe("chain-started");
    expect(events).toContain("chain-completed");

    const chatted = (await sdk.prompts.chat(run.uuid, [{ role: "user", content: "again" }] as never)) as any;
    expect(chatted.response.text).toBe("Hello, again");
    const chattedStream = (await sdk.prompts.chat(run.uuid, [{ role: "user", content: "more" }] as never, { stream: true })) as any;
    expect(chattedStream.response.text).toBe("Hello, more");
    const history: any = await (await api(second, `/conversations/${run.uuid}`)).json();
    expect(history.conversation.map((m: any) => m.role)).toEqual(["system", "user", "assistant", "user", "assistant", "user", "assistant"]);

    const [row] = await vigil.ctx.sql<{ trace_id: string }[]>`SELECT trace_id FROM gateway_conversations WHERE uuid = ${streamed.uuid}`;
    await Bun.sleep(300);
    await vigil.ctx.spanWriter.flush();
    const trace: any = await (await fetch(`${vigil.url}/v1/projects/${projectSlug}/traces/${row!.trace_id}`, { headers: { Authorization: `Bearer ${apiKey}` } })).json();
    expect(trace.sessionId).toBe(streamed.uuid);
    expect(trace.tokensInput + trace.tokensCacheRead).toBe(12);
    expect(trace.tokensOutput).toBe(7);
    expect(trace.costTotalMicrocents).toBe(streamed.response.cost);
    expect(JSON.stringify(trace)).toContain("Hello, Bo");
  });

  test("structured output and logs", async () => {
    const sdk = sdkFor(vigil);
    const result = (await sdk.prompts.run("json", {})) as any;
    expect(result.response.streamType).toBe("object");
    expect(result.response.object).toEqual({ answer: 42 });
    const before = provider.requests.length;
    const log = (await sdk.logs.create("support/greet", [{ role: "user", content: [{ type: "text", text: "logged" }] }] as never, { response: "ok" })) as any;
    expect(log.promptSpan.traceId).toHaveLength(32);
    expect(provider.requests.length).toBe(before);
    const history: any = await (await api(vigil, `/conversations/${log.uuid}`)).json();
    expect(history.conversation.at(-1).content[0].text).toBe("ok");
  });

  test("a PromptL chain runs its steps in order, each a provider call with the conversation so far", async () => {
    const before = provider.requests.length;
    const events: string[] = [];
    const result = (await sdkFor(vigil).prompts.run("chain", { stream: true, onEvent: ({ data }: any) => events.push(data.type) })) as any;
    expect(provider.requests.length - before).toBe(2);
    expect(provider.requests.at(-1)!.body.messages.map((m: any) => m.role)).toEqual(["user", "assistant", "user"]);
    expect(result.response.text).toBe("Hello, second");
    expect(result.conversation.map((m: any) => m.role)).toEqual(["user", "assistant", "user", "assistant"]);
    expect(events.filter((type) => type === "step-started").length).toBe(2);
  });

  test("messages sent with a run follow the compiled prompt", async () => {
    const res = await api(vigil, `/projects/${projectId}/versions/live/documents/run`, {
      method: "POST",
      body: JSON.stringify({ path: "support/greet", parameters: { name: "Di" }, messages: [{ role: "user", content: "extra" }] }),
    });
    const body: any = await res.json();
    expect(res.status).toBe(200);
    expect(provider.requests.at(-1)!.body.messages.map((m: any) => m.role)).toEqual(["system", "user", "user"]);
    expect(body.response.text).toBe("Hello, extra");
    const bad = await api(vigil, `/projects/${projectId}/versions/live/documents/run`, { method: "POST", body: JSON.stringify({ path: "support/greet", messages: [{ role: "robot", content: "x" }] }) });
    expect(bad.status).toBe(400);
    expect(await bad.json()).toMatchObject({ name: "BadRequestError", message: expect.stringContaining("messages[0].role") });
    const missing = await api(vigil, `/projects/${projectId}/versions/live/documents/run`, { method: "POST", body: JSON.stringify({ path: "nope" }) });
    expect(missing.status).toBe(404);
    expect(await missing.json()).toMatchObject({ name: "NotFoundError", errorCode: "NotFoundError" });
  });

  test("tool calls without a client handler end the run with the calls requested", async () => {
    const result = (await sdkFor(vigil).prompts.run("tools/weather", {})) as any;
    expect(result.response.toolCalls).toEqual([{ id: expect.any(String), name: "get_weather", arguments: { city: "Paris" } }]);
    expect(result.conversation.at(-1).toolCalls[0].name).toBe("get_weather");
  });

  test("client tools: the client's handler answers through /tools/results and the run continues", async () => {
    const sdk = sdkFor(vigil);
    const calls: unknown[] = [];
    const result = (await sdk.prompts.run("tools/weather", {
      stream: true,
      tools: { get_weather: async (args: unknown) => (calls.push(args), { temperature: 21 }) },
    } as never)) as any;
    expect(calls).toEqual([{ city: "Paris" }]);
    expect(result.response.text).toBe('Tool said: {"temperature":21}');
    expect(result.conversation.map((m: any) => m.role)).toEqual(["user", "assistant", "tool", "assistant"]);
  });

  test("an unconfigured provider is a DocumentRunError, streamed or not", async () => {
    await api(vigil, `/projects/${projectId}/versions/live/documents/create-or-update`, {
      method: "POST",
      body: JSON.stringify({ path: "nowhere", prompt: "---\nprovider: nowhere\nmodel: m\n---\n<user>x</user>", force: true }),
    });
    const res = await api(vigil, `/projects/${projectId}/versions/live/documents/run`, { method: "POST", body: JSON.stringify({ path: "nowhere" }) });
    expect(res.status).toBe(422);
    expect(await res.json()).toMatchObject({ name: "DocumentRunError", errorCode: "ai_provider_config_error" });
    const errors: any[] = [];
    await sdkFor(vigil).prompts.run("nowhere", { stream: true, onError: (error: any) => errors.push(error) });
    expect(errors[0].message).toContain('Provider "nowhere" is not configured');
  });
});

describe("background runs, attach and stop", () => {
  test("a background run is attached from another process", async () => {
    const res = await api(vigil, `/projects/${projectId}/versions/live/documents/run`, { method: "POST", body: JSON.stringify({ path: "support/greet", parameters: { name: "slow one" }, background: true }) });
    const { uuid } = (await res.json()) as any;
    expect(uuid).toHaveLength(36);
    // Attach through the second process while it runs in whichever picked the job.
    const attached = await api(second, `/conversations/${uuid}/attach`, { method: "POST", body: JSON.stringify({ stream: true }) });
    expect(attached.headers.get("content-type")).toContain("text/event-stream");
    const text = await attached.text();
    const ids = [...text.matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]));
    expect(ids).toEqual(ids.map((_, i) => i));
    expect(text).toContain('"type":"chain-completed"');
    expect((text.match(/"text-delta"/g) ?? []).length).toBe(200);
    const final = (await (await api(vigil, `/conversations/${uuid}/attach`, { method: "POST", body: JSON.stringify({ stream: false }) })).json()) as any;
    expect(final.response.text).toStartWith("w0 w1 ");
  });

  test("a streamed run in one process is attached from another, rate-limit headers on the stream", async () => {
    let uuid = "";
    const running = api(vigil, `/projects/${projectId}/versions/live/documents/run`, {
      method: "POST",
      body: JSON.stringify({ path: "support/greet", parameters: { name: "slow attach" }, stream: true }),
    });
    const response = await running;
    expect(response.headers.get("x-ratelimit-limit")).toBe("30000");
    const reader = response.body!.getReader();
    const decoder = new TextDecoder();
    let own = "";
    while (!uuid) {
      own += decoder.decode((await reader.read()).value);
      uuid = own.match(/"uuid":"([0-9a-f-]{36})"/)?.[1] ?? "";
    }
    const attached = await (await api(second, `/conversations/${uuid}/attach`, { method: "POST", body: JSON.stringify({ stream: true }) })).text();
    for (;;) {
      const next = await reader.read();
      if (next.done) break;
      own += decoder.decode(next.value);
    }
    // The attached stream is the run's own, event for event.
    expect(attached).toBe(own);
    expect(attached).toContain('"type":"chain-completed"');
  });

  test("stop in the middle of a slow stream aborts the provider call, from another process too", async () => {
    const sdk = sdkFor(vigil);
    let uuid = "";
    const before = provider.requests.length;
    const errors: any[] = [];
    const running = sdk.prompts.run("support/greet", {
      parameters: { name: "slow please" },
      stream: true,
      onEvent: ({ data }: any) => (uuid ||= data.uuid),
      onError: (error: any) => errors.push(error),
    });
    while (!uuid || provider.requests.length === before || provider.requests.at(-1)!.chunksSent < 3) await Bun.sleep(20);
    const stopped = await api(second, `/conversations/${uuid}/stop`, { method: "POST" });
    expect(stopped.status).toBe(200);
    expect(await stopped.text()).toBe("");
    await running;
    const request = provider.requests.at(-1)!;
    await Bun.sleep(200);
    expect(request.aborted).toBe(true);
    expect(request.chunksSent).toBeLessThan(200);
    expect(errors[0].message).toContain("stopped");
    expect((await api(vigil, `/conversations/${uuid}/stop`, { method: "POST" })).status).toBe(404);
  });

  test("a client leaving a streamed run stops the provider call", async () => {
    const before = provider.requests.length;
    const controller = new AbortController();
    const res = await api(vigil, `/projects/${projectId}/versions/live/documents/run`, {
      method: "POST",
      body: JSON.stringify({ path: "support/greet", parameters: { name: "slow leave" }, stream: true }),
      signal: controller.signal,
    });
    const reader = res.body!.getReader();
    await reader.read();
    while (provider.requests.length === before || provider.requests.at(-1)!.chunksSent < 2) await Bun.sleep(20);
    controller.abort();
    const request = provider.requests.at(-1)!;
    for (let i = 0; i < 50 && !request.aborted; i++) await Bun.sleep(50);
    expect(request.aborted).toBe(true);
    expect(request.chunksSent).toBeLessThan(200);
  });
});

describe("annotate and rate limits", () => {
  test("annotate scores the conversation's trace", async () => {
    const sdk = sdkFor(vigil);
    const run = (await sdk.prompts.run("support/greet", { parameters: { name: "Cy" } })) as any;
    const annotated = (await sdk.evaluations.annotate(run.uuid, 1, "eval-1", { reason: "good" })) as any;
    expect(annotated.status).toBe("accepted");
    const [score] = await vigil.ctx.sql<{ trace_id: string; value: number; source: string; session_id: string }[]>`SELECT * FROM scores WHERE id = ${annotated.resultUuid}`;
    expect(score).toMatchObject({ value: 1, source: "evaluation", session_id: run.uuid });

    // The same score through /v1 (official 9.15.0 client): score.* filters on the trace list find the run's trace.
    await scoreStorage(vigil.ctx).copier.drain();
    const scored = async (filters: NonNullable<Parameters<LatitudeClient["traces"]["list"]>[1]>["filters"]) =>
      (await v1.traces.list(projectSlug, { filters })).items.map((trace) => trace.traceId);
    expect(await scored({ "score.sourceId": [{ op: "eq", value: "eval-1" }], "score.source": [{ op: "eq", value: "evaluation" }] })).toEqual([score!.trace_id]);
    expect(await scored({ "score.sourceId": [{ op: "eq", value: "eval-1" }], "score.passed": [{ op: "eq", value: true }], "score.value": [{ op: "gte", value: 1 }] })).toEqual([score!.trace_id]);
    expect(await scored({ "score.sourceId": [{ op: "eq", value: "eval-1" }], "score.passed": [{ op: "eq", value: false }] })).toEqual([]);
    const traced = await v1.traces.list(projectSlug, { filters: { sessionId: [{ op: "eq", value: run.uuid }] } });
    expect(traced.items.map((trace) => trace.traceId)).toContain(score!.trace_id);
  });

  test("a Hobby key gets 429 with Retry-After past 10 requests a second, counted across processes", async () => {
    const { account } = await bootstrapAccount(vigil.url);
    const key = account.apiKey;
    // Bursts alternating between the two processes until one is refused; the windows are counted, not timed.
    const responses: Response[] = [];
    for (let burst = 0; burst < 5 && !responses.some((r) => r.status === 429); burst++) {
      responses.push(...(await Promise.all(Array.from({ length: 24 }, (_, i) => api(i % 2 ? second : vigil, "/projects", { key })))));
    }
    const limited = responses.filter((r) => r.status === 429);
    expect(limited.length).toBeGreaterThan(0);
    const allowedByWindow = new Map<string, number>();
    for (const r of responses.filter((r) => r.status === 200)) {
      const window = r.headers.get("x-ratelimit-reset")!;
      allowedByWindow.set(window, (allowedByWindow.get(window) ?? 0) + 1);
    }
    expect(Math.max(...allowedByWindow.values())).toBeLessThanOrEqual(10);
    // The refused request's window had let exactly the plan's 10 through, from both processes together.
    expect(allowedByWindow.get(limited[0]!.headers.get("x-ratelimit-reset")!)).toBe(10);
    expect(limited[0]!.headers.get("retry-after")).toBe("1");
    expect(limited[0]!.headers.get("x-ratelimit-limit")).toBe("10");
    expect(limited[0]!.headers.get("x-ratelimit-remaining")).toBe("0");
    expect(await limited[0]!.json()).toMatchObject({ name: "RateLimitError" });
  });
});
