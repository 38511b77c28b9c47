import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { createHmac } from "node:crypto";
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import type { LatitudeClient } from "@latitude-data/sdk";
import { newId } from "../src/lib/ids";
import { createLogger } from "../src/lib/log";
import { createMailer } from "../src/lib/mailer";
import { MonitorEvaluator } from "../src/modules/monitors/evaluate";
import { Measurer } from "../src/modules/monitors/measure";
import { IncidentNotifier } from "../src/modules/monitors/notify";
import { createSignalSource } from "../src/modules/monitors/signal-source";
import { enqueueWebhook } from "../src/modules/monitors/webhooks";
import { TraceSearch } from "../src/modules/traces/search";
import type { Vigil } from "../src/server";
import { insertSpans, newTraceId, spanRow, tenantOf, type Tenant } from "./fixtures/spans";
import { bootstrapAccount, json, startTestVigil } from "./helpers";

setDefaultTimeout(120_000);

/** Notifications of incidents: mail through the outbox (no SMTP_URL) and signed webhooks to a local receiver. */

let vigil: Vigil;
let evaluator: MonitorEvaluator;
let notifier: IncidentNotifier;
const log = createLogger("silent");

beforeAll(async () => {
  vigil = await startTestVigil({ MONITOR_INTERVAL_SECONDS: "0", WEBHOOK_RETRY_DELAY_SECONDS: "1", WEBHOOK_MAX_ATTEMPTS: "3" });
  const ctx = vigil.ctx;
  evaluator = new MonitorEvaluator(ctx.sql, new Measurer(ctx.ch, new TraceSearch(null, log)), createSignalSource(ctx), 60, log);
  const settings = { retryDelaySeconds: ctx.config.monitors.webhookRetryDelaySeconds, maxAttempts: ctx.config.monitors.webhookMaxAttempts };
  notifier = new IncidentNotifier(ctx.sql, createMailer(ctx.config, log), ctx.config.publicUrl, (row, event, project) => enqueueWebhook(ctx.sql, ctx.boss, settings, row, event, project), log);
});
afterAll(() => vigil.stop());

interface Mail {
  headers: Record<string, string>;
  body: string;
}

/** Mails in the outbox addressed to `to`, oldest first, with quoted-printable bodies decoded. */
async function mailsTo(to: string): Promise<Mail[]> {
  const outbox = join(vigil.ctx.config.dataDir, "outbox");
  const files = (await readdir(outbox).catch(() => [] as string[])).sort();
  const mails: Mail[] = [];
  for (const file of files) {
    const raw = await readFile(join(outbox, file), "utf8");
    const [head, ...rest] = raw.split("\r\n\r\n");
    const headers: Record<string, string> = {};
    for (const line of head.replace(/\r\n[ \t]+/g, " ").split("\r\n")) {
      const colon = line.indexOf(":");
      headers[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim();
    }
    if (headers.to !== to) continue;
    const body = rest.join("\r\n\r\n").replace(/=\r\n/g, "").replace(/=([0-9A-F]{2})/g, (_, hex) => String.fromCharCode(parseInt(hex, 16)));
    mails.push({ headers, body });
  }
  return mails;
}

async function setup() {
  const { account, client } = await bootstrapAccount(vigil.url);
  const tenant = await tenantOf(vigil.ctx, account.apiKey, account.projectSlug);
  const email = `member-${newId()}@example.com`;
  const [user] = await vigil.ctx.sql<{ id: string }[]>`INSERT INTO users (id, email) VALUES (${newId()}, ${email}) RETURNING id`;
  await vigil.ctx.sql`INSERT INTO memberships (organization_id, user_id, role) VALUES (${tenant.organizationId}, ${user!.id}, 'owner')`;
  return { client, project: account.projectSlug, tenant, email, apiKey: account.apiKey };
}

async function evaluate(tenant: Tenant, now: number) {
  await vigil.ctx.sql`UPDATE monitors SET next_evaluation_at = ${new Date(now)} WHERE project_id = ${tenant.projectId}`;
  await evaluator.evaluateProject(tenant.projectId, new Date(now));
  await notifier.run();
}

const errorTrace = (tenant: Tenant, at: number, fields: Record<string, unknown> = {}) =>
  spanRow(tenant, { trace_id: newTraceId(), startMs: at, status_code: "error", user_id: "u-n", ...fields });

const errorsMonitor = (client: LatitudeClient, project: string, name: string) =>
  client.monitors.create(project, { body: { trigger: "match", name, target: { type: "user", id: "u-n", filterSet: { status: [{ op: "eq", value: "error" }] } }, severity: "high" } });

describe("mail", () => {
  test("one mail per incident, never one per evaluation; it names what tripped and links to the trace", async () => {
    const { client, project, tenant, email } = await setup();
    const monitor = await errorsMonitor(client, project, "Checkout errors");
    const t0 = Date.now();
    const failing = errorTrace(tenant, t0);
    await insertSpans(vigil.ctx, [failing]);
    await evaluate(tenant, t0 + 60_000);
    await evaluate(tenant, t0 + 120_000);
    await notifier.run();
    const mails = await mailsTo(email);
    expect(mails).toHaveLength(1);
    expect(mails[0].headers.subject).toBe("[Vigil] New match: Checkout errors");
    expect(mails[0].body).toContain(`/v1/projects/${project}/traces/${failing.trace_id}`);
    expect(mails[0].body).toContain(`/monitors/${monitor.slug}/incidents`);
    const [incident] = (await client.monitors.listIncidents(project, monitor.slug)).items;
    expect(incident.notified).toBe(true);
  });

  test("a threshold incident's closing is mailed in the thread of its opening, with the numbers", async () => {
    const { client, project, tenant, email } = await setup();
    await client.monitors.create(project, {
      body: { trigger: "threshold", name: "Error burst", target: { type: "user", id: "u-n" }, severity: "urgent", condition: { trigger: "threshold", metric: { kind: "errorRate" }, threshold: { mode: "absolute", value: 0.5 } } },
    });
    const t0 = Date.now();
    await insertSpans(vigil.ctx, [errorTrace(tenant, t0), errorTrace(tenant, t0 + 1), errorTrace(tenant, t0 + 2, { status_code: "unset" })]);
    await evaluate(tenant, t0 + 60_000);
    await evaluate(tenant, t0 + 2 * 3600_000);
    const [opened, closed] = await mailsTo(email);
    expect(opened.headers.subject).toBe("[Vigil] Threshold crossed: Error burst");
    expect(opened.body).toContain("errorRate = 0.666667, threshold > 0.5");
    expect(closed.headers.subject).toBe("Re: [Vigil] Threshold crossed: Error burst");
    expect(closed.headers["in-reply-to"]).toBe(opened.headers["message-id"]);
    expect(closed.body).toContain("Resolved");
  });

  test("many incidents at once make one digest", async () => {
    const { client, project, tenant, email } = await setup();
    await errorsMonitor(client, project, "Digest me");
    const t0 = Date.now();
    await insertSpans(vigil.ctx, [0, 1, 2, 3].map((i) => errorTrace(tenant, t0 + i)));
    await evaluate(tenant, t0 + 60_000);
    const mails = await mailsTo(email);
    expect(mails).toHaveLength(1);
    expect(mails[0].headers.subject).toContain("4 incidents");
  });

  test("mute silences mail but incidents still open; switches turn kinds off", async () => {
    const { client, project, tenant, email } = await setup();
    const muted = await errorsMonitor(client, project, "Muted errors");
    await client.monitors.mute(project, muted.slug);
    await client.projects.update(project, { settings: { notifications: { incidents: { "monitor.match": false } } } } as never);
    const matchOff = await client.monitors.create(project, { body: { trigger: "match", name: "Switched off", target: { type: "user", id: "u-n" }, severity: "low" } });
    const threshold = await client.monitors.create(project, {
      body: { trigger: "threshold", name: "Still on", target: { type: "user", id: "u-n" }, severity: "low", condition: { trigger: "threshold", metric: { kind: "count" }, threshold: { mode: "absolute", value: 0 } } },
    });
    const t0 = Date.now();
    await insertSpans(vigil.ctx, [errorTrace(tenant, t0)]);
    await evaluate(tenant, t0 + 60_000);
    const mutedIncidents = (await client.monitors.listIncidents(project, muted.slug)).items;
    expect(mutedIncidents).toHaveLength(1);
    expect(mutedIncidents[0].notified).toBe(false);
    expect((await client.monitors.listIncidents(project, matchOff.slug)).items.map((incident) => incident.notified)).toEqual([false]);
    expect((await client.monitors.listIncidents(project, threshold.slug)).items.map((incident) => incident.notified)).toEqual([true]);
    const mails = await mailsTo(email);
    expect(mails.map((mail) => mail.headers.subject)).toEqual(["[Vigil] Threshold crossed: Still on"]);
  });
});

describe("webhooks", () => {
  let received: { headers: Headers; body: string }[] = [];
  let failuresLeft = 0;
  let server: ReturnType<typeof Bun.serve>;
  beforeAll(() => {
    server = Bun.serve({
      port: 0,
      hostname: "127.0.0.1",
      fetch: async (request) => {
        received.push({ headers: request.headers, body: await request.text() });
        if (failuresLeft > 0) {
          failuresLeft--;
          return new Response("no", { status: 500 });
        }
        return new Response("ok");
      },
    });
  });
  afterAll(() => server.stop(true));

  async function waitFor(condition: () => boolean | Promise<boolean>, what: string) {
    const deadline = Date.now() + 60_000;
    while (!(await condition())) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await Bun.sleep(100);
    }
  }

  const put = (project: string, apiKey: string, url: string) =>
    fetch(`${vigil.url}/v1/projects/${project}/webhook`, { method: "PUT", headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" }, body: JSON.stringify({ url }) }).then(json);

  test("signed deliveries, retried with backoff until the receiver answers", async () => {
    const { client, project, tenant, apiKey } = await setup();
    const hook = await put(project, apiKey, `http://127.0.0.1:${server.port}/hook`);
    expect(hook.secret).toStartWith("whsec_");
    const monitor = await errorsMonitor(client, project, "Hooked");
    received = [];
    failuresLeft = 2;
    const t0 = Date.now();
    await insertSpans(vigil.ctx, [errorTrace(tenant, t0)]);
    await evaluate(tenant, t0 + 60_000);
    await waitFor(() => received.length >= 3, "three attempts");
    await Bun.sleep(1500);
    expect(received).toHaveLength(3);
    const deliveries = new Set(received.map((request) => request.headers.get("x-vigil-delivery")));
    expect(deliveries.size).toBe(1);
    for (const request of received) {
      const timestamp = request.headers.get("x-vigil-timestamp")!;
      const expected = `sha256=${createHmac("sha256", hook.secret).update(`${timestamp}.${request.body}`).digest("hex")}`;
      expect(request.headers.get("x-vigil-signature")).toBe(expected);
      expect(request.headers.get("x-vigil-event")).toBe("incident.opened");
    }
    const payload = JSON.parse(received[2].body);
    expect(payload.incident).toMatchObject({ sourceType: "monitor", sourceId: monitor.id, severity: "high", condition: null });
    // A match is a point in time: it ends as it starts.
    expect(payload.incident.endedAt).toBe(payload.incident.startedAt);
    expect(payload.project.slug).toBe(project);
    // A forged signature would not match.
    expect(createHmac("sha256", "wrong").update(`x.${received[2].body}`).digest("hex")).not.toBe(received[2].headers.get("x-vigil-signature")!.slice(7));
  });

  test("a delivery that exhausts its attempts quarantines the webhook and tells the members", async () => {
    const { client, project, tenant, apiKey, email } = await setup();
    await put(project, apiKey, `http://127.0.0.1:${server.port}/broken`);
    await errorsMonitor(client, project, "Broken hook");
    await client.projects.update(project, { settings: { notifications: { incidents: { "monitor.match": true } } } } as never);
    received = [];
    failuresLeft = 1000;
    const t0 = Date.now();
    await insertSpans(vigil.ctx, [errorTrace(tenant, t0)]);
    await evaluate(tenant, t0 + 60_000);
    const webhookOf = () => fetch(`${vigil.url}/v1/projects/${project}/webhook`, { headers: { authorization: `Bearer ${apiKey}` } }).then(json);
    await waitFor(async () => (await webhookOf()).quarantinedAt !== null, "the quarantine");
    expect(received).toHaveLength(3);
    expect((await webhookOf()).lastError).toBe("HTTP 500");
    await waitFor(async () => (await mailsTo(email)).some((mail) => mail.headers.subject.includes("Webhook quarantined")), "the quarantine mail");
    // Quarantined: a new incident is not delivered.
    await insertSpans(vigil.ctx, [errorTrace(tenant, t0 + 1000)]);
    await evaluate(tenant, t0 + 120_000);
    await Bun.sleep(3000);
    expect(received).toHaveLength(3);
    // Setting it again lifts the quarantine.
    failuresLeft = 0;
    await put(project, apiKey, `http://127.0.0.1:${server.port}/fixed`);
    expect((await webhookOf()).quarantinedAt).toBeNull();
  });
});
