import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import type { AddressInfo } from "node:net";
import type { LatitudeClient } from "@latitude-data/sdk";
import { SMTPServer } from "smtp-server";
import { newId } from "../src/lib/ids";
import { createLogger } from "../src/lib/log";
import { validateTraceFilters } from "../src/modules/traces/filters";
import { TraceSearch } from "../src/modules/traces/search";
import { TracesService } from "../src/modules/traces/service";
import type { Vigil } from "../src/server";
import { insertSpans, newTraceId, spanRow, tenantOf, type Tenant } from "./fixtures/spans";
import { bootstrapAccount, startTestVigil } from "./helpers";
import { sdkFailure } from "./sdk";

setDefaultTimeout(60_000);

let vigil: Vigil;
let smtp: SMTPServer;
let client: LatitudeClient;
let apiKey: string;
let slug: string;
let tenant: Tenant;
const received: { to: string[]; data: string; statusOnArrival: number | null }[] = [];
const member = `exports-${newId()}@example.com`;
const base = Date.now() - 3600_000;
const traceIds = Array.from({ length: 5 }, () => newTraceId());

beforeAll(async () => {
  smtp = new SMTPServer({
    authOptional: true,
    disabledCommands: ["STARTTLS"],
    logger: false,
    onData(stream, session, done) {
      let data = "";
      stream.on("data", (chunk: Buffer) => (data += chunk.toString("utf8")));
      stream.on("end", async () => {
        // The link is opened before the SMTP transaction completes, so before the job can mark
        // itself done: a recipient may click the moment the mail arrives.
        const link = exportLink(data);
        const statusOnArrival = link ? await fetch(link).then(async (res) => (await res.arrayBuffer(), res.status)) : null;
        received.push({ to: session.envelope.rcptTo.map((rcpt) => rcpt.address), data, statusOnArrival });
        done();
      });
    },
  });
  await new Promise<void>((resolve) => smtp.listen(0, "127.0.0.1", resolve));
  vigil = await startTestVigil({ SMTP_URL: `smtp://127.0.0.1:${(smtp.server.address() as AddressInfo).port}`, EXPORT_RATE_LIMIT: "1000" });
  const created = await bootstrapAccount(vigil.url, { projectName: "Exports" });
  client = created.client;
  apiKey = created.account.apiKey;
  slug = created.account.projectSlug;
  tenant = await tenantOf(vigil.ctx, apiKey, slug);
  const userId = newId();
  await vigil.ctx.sql`INSERT INTO users (id, email) VALUES (${userId}, ${member})`;
  await vigil.ctx.sql`INSERT INTO memberships (organization_id, user_id, role) VALUES (${tenant.organizationId}, ${userId}, 'member')`;
  // Confirming an address through its mailed link is tested in limits-mail.test.ts.
  await vigil.ctx.sql`INSERT INTO email_confirmations (email, confirmed_at) VALUES (${member.toLowerCase()}, now())`;
  const names = ['quote "this", please', "=HYPERLINK(\"x\")", "plain", "multi\nline", "plain"];
  await insertSpans(
    vigil.ctx,
    traceIds.flatMap((trace_id, i) => [
      spanRow(tenant, { trace_id, name: names[i], startMs: base + i * 1000, durationMs: 500, session_id: i % 2 ? "s-odd" : "", tags: i < 3 ? ["prod", "eu"] : ["dev"] }),
      spanRow(tenant, { trace_id, parent_span_id: "0000000000000001", operation: "chat", model: "gpt-4o", startMs: base + i * 1000 + 10, tokens_input: 10 * i, cost_total_microcents: 1000 * i }),
    ]),
  );
}, 60_000);

afterAll(async () => {
  await vigil.stop();
  await new Promise<void>((resolve) => smtp.close(resolve));
});

const decodeQuotedPrintable = (text: string) =>
  text.replace(/=\r?\n/g, "").replace(/=([0-9A-F]{2})/g, (_match, hex: string) => String.fromCharCode(parseInt(hex, 16)));
const exportLink = (mail: string) => decodeQuotedPrintable(mail).match(/https?:\/\/\S+\/v1\/exports\/\S+\?token=[\w-]+/)?.[0];

async function nextMail(count: number) {
  const deadline = Date.now() + 20_000;
  while (received.length < count) {
    if (Date.now() > deadline) throw new Error("timed out waiting for the export email");
    await Bun.sleep(25);
  }
  return received[count - 1];
}

/** RFC 4180 records. */
function parseCsv(text: string): string[][] {
  const rows: string[][] = [];
  let row: string[] = [];
  let cell = "";
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const char = text[i];
    if (quoted) {
      if (char === '"' && text[i + 1] === '"') (cell += '"'), i++;
      else if (char === '"') quoted = false;
      else cell += char;
    } else if (char === '"') quoted = true;
    else if (char === ",") row.push(cell), (cell = "");
    else if (char === "\r" && text[i + 1] === "\n") {
      row.push(cell);
      rows.push(row);
      (row = []), (cell = ""), i++;
    } else cell += char;
  }
  return rows;
}

/** How a Trace field reads in the CSV. */
const asCell = (value: unknown) =>
  value === null ? "" : Array.isArray(value) ? JSON.stringify(value) : typeof value === "string" && /^[=+\-@]/.test(value) ? `'${value}` : String(value);

async function downloadFromMail(count: number) {
  const mail = await nextMail(count);
  expect(mail.to).toEqual([member]);
  expect(mail.statusOnArrival).toBe(200);
  const link = exportLink(mail.data);
  expect(link).toBeDefined();
  const response = await fetch(link!);
  expect(response.status).toBe(200);
  expect(response.headers.get("content-type")).toContain("text/csv");
  return { link: link!, rows: parseCsv(await response.text()) };
}

describe("trace export", () => {
  test("by ids: 202 queued, then an email whose link downloads the CSV of those traces", async () => {
    const chosen = traceIds.slice(0, 3);
    const res = await fetch(`${vigil.url}/v1/projects/${slug}/traces/export`, {
      method: "POST",
      headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
      body: JSON.stringify({ traces: { by: "ids", ids: chosen }, recipient: member.toUpperCase() }),
    });
    expect(res.status).toBe(202);
    expect(await res.json()).toEqual({ status: "queued" });
    const { rows, link } = await downloadFromMail(1);
    const listed = (await client.traces.list(slug, { filters: { traceId: [{ op: "in", value: chosen }] } })).items;
    const [header, ...data] = rows;
    expect(header).toEqual(Object.keys(listed[0]));
    expect(data).toHaveLength(3);
    const byId = new Map(data.map((row) => [row[header.indexOf("traceId")], row]));
    for (const trace of listed) expect(byId.get(trace.traceId)).toEqual(Object.values(trace).map(asCell));
    expect(byId.get(traceIds[1])![header.indexOf("rootSpanName")]).toBe("'=HYPERLINK(\"x\")");

    const wrongToken = await fetch(link.replace(/token=[\w-]+/, "token=guess"));
    expect(wrongToken.status).toBe(404);
    const noToken = await fetch(link.replace(/\?token=[\w-]+/, ""));
    expect(noToken.status).toBe(400);
  }, 30_000);

  test("by filters, through the SDK: every matching trace, one row each", async () => {
    const answer = await client.traces.export(slug, { traces: { by: "filters", filters: { tags: [{ op: "eq", value: "prod" }], cost: [{ op: "gte", value: 1000 }] } }, recipient: member });
    expect(answer).toEqual({ status: "queued" });
    const { rows } = await downloadFromMail(2);
    const [header, ...data] = rows;
    expect(data.map((row) => row[header.indexOf("traceId")]).sort()).toEqual([traceIds[1], traceIds[2]].sort());
    expect(data.every((row) => row[header.indexOf("tags")] === '["eu","prod"]')).toBe(true);
  }, 30_000);

  test("by filters, the traces are selected a window of ids at a time, each once, as they were when the export began", async () => {
    const other = await bootstrapAccount(vigil.url);
    const otherTenant = await tenantOf(vigil.ctx, other.account.apiKey, other.account.projectSlug);
    const project = { id: otherTenant.projectId, organizationId: otherTenant.organizationId };
    const idOf = (n: number) => n.toString(16).padStart(32, "0");
    // Traces 0 to 8; those whose number is a multiple of 4 match: windows of two ids hold none, one or both.
    await insertSpans(
      vigil.ctx,
      Array.from({ length: 9 }, (_, n) => spanRow(otherTenant, { trace_id: idOf(n), startMs: base + n * 1000, tags: n % 4 ? ["dev"] : ["prod"], cost_total_microcents: 10 })),
    );
    const traces = new TracesService(vigil.ctx.ch, new TraceSearch(null, createLogger("silent")));
    const filters = validateTraceFilters({ tags: [{ op: "eq", value: "prod" }], cost: [{ op: "lt", value: 1000 }] });
    const chunks: string[][] = [];
    const snapshots = new Set<string>();
    for await (const { ids, snapshot } of traces.matchingTraceIds(project, filters, 2)) {
      chunks.push(ids);
      snapshots.add(snapshot);
      if (chunks.length === 1) {
        // After the walk began: trace 8 stops matching, and a new matching trace lands in a later window.
        await insertSpans(vigil.ctx, [
          spanRow(otherTenant, { trace_id: idOf(8), startMs: base, tags: ["prod"], cost_total_microcents: 5000 }),
          spanRow(otherTenant, { trace_id: idOf(5), startMs: base, tags: ["prod"], cost_total_microcents: 10 }),
        ]);
      }
    }
    expect(chunks).toEqual([[idOf(0)], [idOf(4)], [idOf(8)]]);
    expect(snapshots.size).toBe(1);
    const items = await traces.traceItems(project, chunks.flat(), [...snapshots][0]);
    expect(items.map((item) => [item.traceId, item.costTotalMicrocents])).toEqual([idOf(0), idOf(4), idOf(8)].map((id) => [id, 10]));
  });

  test("a recipient who is not a member, bad filters or no ids are 400s", async () => {
    const stranger = await sdkFailure(client.traces.export(slug, { traces: { by: "ids", ids: [traceIds[0]] }, recipient: "nobody@example.com" }));
    expect(stranger.statusCode).toBe(400);
    expect(stranger.body.error).toMatch(/^recipient/);
    const badFilter = await sdkFailure(client.traces.export(slug, { traces: { by: "filters", filters: { colour: [{ op: "eq", value: "red" }] } }, recipient: member }));
    expect(badFilter.body.error).toBe("filters.colour: unknown filter field");
    const empty = await sdkFailure(client.traces.export(slug, { traces: { by: "ids", ids: [] }, recipient: member }));
    expect(empty.statusCode).toBe(400);
    const otherOrganization = await bootstrapAccount(vigil.url);
    const foreign = await sdkFailure(otherOrganization.client.traces.export(otherOrganization.account.projectSlug, { traces: { by: "ids", ids: [traceIds[0]] }, recipient: member }));
    expect(foreign.statusCode).toBe(400);
    expect(received).toHaveLength(2);
  });

  test("an expired link is refused", async () => {
    const [row] = await vigil.ctx.sql<{ id: string }[]>`SELECT id FROM trace_exports WHERE status = 'done' ORDER BY created_at LIMIT 1`;
    const link = exportLink(received[0].data)!;
    expect(link).toContain(row.id);
    await vigil.ctx.sql`UPDATE trace_exports SET expires_at = now() - interval '1 second' WHERE id = ${row.id}`;
    expect((await fetch(link)).status).toBe(410);
  });
});
