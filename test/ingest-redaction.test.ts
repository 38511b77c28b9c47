// Redaction end to end: project settings set through the SDK, spans sent over OTLP/HTTP, read back through the SDK.
// The organization policy and its lock, and pseudonymized identities with and without PSEUDONYM_SECRET.
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { createHmac, randomBytes } from "node:crypto";
import type { LatitudeClient } from "@latitude-data/sdk";
import type { OrganizationRedaction } from "../src/modules/projects/service";
import type { Vigil } from "../src/server";
import { bootstrapAccount, sharedVigil, startTestVigil } from "./helpers";

setDefaultTimeout(60_000);

const PII = {
  email: "jane.doe@example.com",
  phone: "+1 (415) 555-0132",
  card: "4111 1111 1111 1111",
  /** Fails the Luhn check: not a card, left alone. */
  notCard: "4111 1111 1111 1112",
  iban: "DE89 3704 0044 0532 0130 00",
  ssn: "123-45-6789",
  secret: "sk-proj-Xk2Lm9Qw3Rt7Yp1Zs8Vb4Nc6Hd0Fg5Jk",
  ip: "192.168.1.20",
};
type Kind = Exclude<keyof typeof PII, "notCard">;
const PLACEHOLDER: Record<Kind, string> = {
  email: "[REDACTED_EMAIL]",
  phone: "[REDACTED_PHONE]",
  card: "[REDACTED_CREDIT_CARD]",
  iban: "[REDACTED_IBAN]",
  ssn: "[REDACTED_US_SSN]",
  secret: "[REDACTED_SECRET]",
  ip: "[REDACTED_IP_ADDRESS]",
};

/** The text with the given kinds replaced by their placeholders. */
function note(redacted: Kind[] = []) {
  const value = (kind: Kind) => (redacted.includes(kind) ? PLACEHOLDER[kind] : PII[kind]);
  return `Mail ${value("email")} or call ${value("phone")}. Card ${value("card")}, order ${PII.notCard}. IBAN ${value("iban")}, SSN ${value("ssn")}, key ${value("secret")}, from ${value("ip")}.`;
}
const PLAIN = note();
/** What the default entities (everything but ip_address) leave. */
const DEFAULT_REDACTED = note(["email", "phone", "card", "iban", "ssn", "secret"]);

const TAG = `owner:${PII.email}`;

const hex = (bytes: number) => randomBytes(bytes).toString("hex");

interface Tenant {
  vigil: Vigil;
  client: LatitudeClient;
  apiKey: string;
  slug: string;
  organizationId: string;
}

async function tenant(vigil: Vigil, label: string): Promise<Tenant> {
  const { account, client } = await bootstrapAccount(vigil.url, { projectName: `Redaction ${label} ${hex(3)}` });
  const project = await client.projects.get(account.projectSlug);
  return { vigil, client, apiKey: account.apiKey, slug: account.projectSlug, organizationId: project.organizationId };
}

interface Sent {
  traceId: string;
  chat: string;
  tool: string;
}

/**
 * One OTLP/JSON request: a chat span with the text in its messages, an attribute, metadata, a resource attribute
 * and its status message, and a tool span with it in its arguments and result. Identity attributes as given.
 */
async function sendSpans(tenant: Tenant, identity: Record<string, string> = { "user.id": PII.email }, metadata: Record<string, string> = { note: PLAIN }): Promise<Sent> {
  const sent = { traceId: hex(16), chat: hex(8), tool: hex(8) };
  const start = BigInt(Date.now()) * 1_000_000n;
  const attributes = (values: Record<string, string>) => Object.entries(values).map(([key, value]) => ({ key, value: { stringValue: value } }));
  const body = {
    resourceSpans: [
      {
        resource: { attributes: attributes({ "service.name": "redaction-test", "host.note": PLAIN }) },
        scopeSpans: [
          {
            scope: { name: "redaction-test" },
            spans: [
              {
                traceId: sent.traceId,
                spanId: sent.chat,
                name: "chat",
                kind: 3,
                startTimeUnixNano: String(start),
                endTimeUnixNano: String(start + 2_000_000n),
                status: { code: 2, message: PLAIN },
                attributes: attributes({
                  ...identity,
                  "gen_ai.operation.name": "chat",
                  "gen_ai.provider.name": "openai",
                  "gen_ai.request.model": "gpt-4o",
                  "gen_ai.input.messages": JSON.stringify([{ role: "user", content: PLAIN }]),
                  "gen_ai.output.messages": JSON.stringify([{ role: "assistant", parts: [{ type: "text", content: `Noted: ${PLAIN}` }] }]),
                  "app.note": PLAIN,
                  "latitude.metadata": JSON.stringify(metadata),
                  "latitude.tags": JSON.stringify(["vip", TAG]),
                }),
              },
              {
                traceId: sent.traceId,
                spanId: sent.tool,
                parentSpanId: sent.chat,
                name: "execute_tool lookup",
                startTimeUnixNano: String(start + 1_000_000n),
                endTimeUnixNano: String(start + 1_500_000n),
                attributes: attributes({
                  ...identity,
                  "gen_ai.operation.name": "execute_tool",
                  "gen_ai.tool.name": "lookup",
                  "gen_ai.tool.call.id": "call_1",
                  "gen_ai.tool.call.arguments": JSON.stringify({ query: PLAIN }),
                  "gen_ai.tool.call.result": PLAIN,
                }),
              },
            ],
          },
        ],
      },
    ],
  };
  const response = await fetch(`${tenant.vigil.url}/v1/traces`, {
    method: "POST",
    body: JSON.stringify(body),
    headers: { "content-type": "application/json", authorization: `Bearer ${tenant.apiKey}`, "x-latitude-project": tenant.slug },
  });
  expect(response.status).toBe(200);
  await tenant.vigil.ctx.spanWriter.flush();
  return sent;
}

/** Every place the text went, as stored and read back. */
async function readBack(tenant: Tenant, sent: Sent) {
  const chat = await tenant.client.traces.getSpan(tenant.slug, sent.traceId, sent.chat);
  const tool = await tenant.client.traces.getSpan(tenant.slug, sent.traceId, sent.tool);
  return {
    input: chat.inputMessages,
    output: chat.outputMessages,
    attribute: chat.attrString["app.note"],
    resource: chat.resourceString["host.note"],
    status: chat.statusMessage,
    metadata: chat.metadata.note,
    tags: chat.tags,
    toolInput: tool.toolInput,
    toolOutput: tool.toolOutput,
    userId: chat.userId,
  };
}

/** The read-back of a span whose content became `content` (metadata and tags governed separately). */
const everywhere = (content: string, metadata = PLAIN, userId: string | null = PII.email, tag = TAG) => ({
  input: [{ role: "user", parts: [{ type: "text", content }] }],
  output: [{ role: "assistant", parts: [{ type: "text", content: `Noted: ${content}` }] }],
  attribute: content,
  resource: content,
  status: content,
  metadata,
  tags: ["vip", tag],
  // The JSON arguments stay valid JSON with the placeholders inside.
  toolInput: JSON.stringify({ query: content }),
  toolOutput: content,
  userId,
});

describe("project policy", () => {
  let vigil: Vigil;
  beforeAll(async () => {
    vigil = await sharedVigil();
  });

  test("off by default; enforce set through the SDK applies to the very next request, and so does turning it off", async () => {
    const owner = await tenant(vigil, "project");
    const plain = await sendSpans(owner);
    expect(await readBack(owner, plain)).toEqual(everywhere(PLAIN));

    const updated = await owner.client.projects.update(owner.slug, { settings: { redaction: { mode: "enforce" } } });
    expect(updated.settings?.redaction?.mode).toBe("enforce");
    const redactedSpans = await sendSpans(owner);
    const redacted = await readBack(owner, redactedSpans);
    // Every default kind replaced; the Luhn-invalid number and the IP address (not a default kind) untouched;
    // metadata is outside the default scope and the user id is an identity, governed by `identities`.
    expect(redacted).toEqual(everywhere(DEFAULT_REDACTED));
    expect(JSON.parse(redacted.toolInput)).toEqual({ query: DEFAULT_REDACTED });

    await owner.client.projects.update(owner.slug, { settings: { redaction: { mode: "off" } } });
    const plainAgain = await sendSpans(owner);
    expect(await readBack(owner, plainAgain)).toEqual(everywhere(PLAIN));

    // The message text behind search was redacted too: the SSN finds the two plain traces only.
    const found = await owner.client.traces.list(owner.slug, { query: PII.ssn });
    expect(found.items.map((trace) => trace.traceId).sort()).toEqual([plain.traceId, plainAgain.traceId].sort());
  });

  test("entities and the metadata scope: ip_address on request, metadata and tags scanned when asked", async () => {
    const owner = await tenant(vigil, "entities");
    await owner.client.projects.update(owner.slug, {
      settings: { redaction: { mode: "enforce", entities: ["email", "ip_address"], scopes: { metadata: true } } },
    });
    const onlyEmailAndIp = note(["email", "ip"]);
    expect(await readBack(owner, await sendSpans(owner))).toEqual(everywhere(onlyEmailAndIp, onlyEmailAndIp, PII.email, "owner:[REDACTED_EMAIL]"));
  });
});

describe("organization policy", () => {
  let vigil: Vigil;
  beforeAll(async () => {
    vigil = await sharedVigil();
  });

  /** Through the API: the very next export must be redacted by the new policy, with no cache left to expire. */
  const setOrganization = async (owner: Tenant, redaction: OrganizationRedaction) => {
    const res = await fetch(`${vigil.url}/v1/organization/redaction`, {
      method: "PUT",
      headers: { authorization: `Bearer ${owner.apiKey}`, "content-type": "application/json" },
      body: JSON.stringify(redaction),
    });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual(redaction);
  };

  test("the policy route validates its body and is scoped to the credential's organization", async () => {
    const owner = await tenant(vigil, "route");
    const other = await tenant(vigil, "route-other");
    const put = (body: unknown, apiKey = owner.apiKey) =>
      fetch(`${vigil.url}/v1/organization/redaction`, {
        method: "PUT",
        headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
        body: JSON.stringify(body),
      });
    const bad = await put({ policy: { mode: "sometimes" }, locked: false });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: string }).error).toContain("policy");
    expect((await put({ policy: null })).status).toBe(400);
    await setOrganization(owner, { policy: { mode: "enforce", entities: ["email"] }, locked: true });
    const read = (apiKey: string) => fetch(`${vigil.url}/v1/organization/redaction`, { headers: { authorization: `Bearer ${apiKey}` } }).then((res) => res.json());
    expect(await read(owner.apiKey)).toEqual({ policy: { mode: "enforce", entities: ["email"] }, locked: true });
    expect(await read(other.apiKey)).toEqual({ policy: null, locked: false });
  });

  test("a locked organization policy with mode off ignores the project's enforce", async () => {
    const owner = await tenant(vigil, "locked-off");
    await owner.client.projects.update(owner.slug, { settings: { redaction: { mode: "enforce" } } });
    expect((await readBack(owner, await sendSpans(owner))).attribute).toBe(DEFAULT_REDACTED);

    await setOrganization(owner, { policy: { mode: "off" }, locked: true });
    expect(await readBack(owner, await sendSpans(owner))).toEqual(everywhere(PLAIN));
  });

  test("unlocked, the organization overrides the project field by field; locked, the project's values are ignored entirely", async () => {
    const owner = await tenant(vigil, "lock");
    await owner.client.projects.update(owner.slug, { settings: { redaction: { mode: "enforce" } } });

    // Unlocked: the organization's entities, the project's mode.
    await setOrganization(owner, { policy: { entities: ["email"] }, locked: false });
    expect(await readBack(owner, await sendSpans(owner))).toEqual(everywhere(note(["email"])));

    // Locked: the project's enforce no longer counts, and the organization sets no mode: off.
    await setOrganization(owner, { policy: { entities: ["email"] }, locked: true });
    expect(await readBack(owner, await sendSpans(owner))).toEqual(everywhere(PLAIN));

    // Locked and enforcing: applies even though the project turned redaction off.
    await owner.client.projects.update(owner.slug, { settings: { redaction: { mode: "off" } } });
    await setOrganization(owner, { policy: { mode: "enforce", entities: ["phone", "secret"] }, locked: true });
    expect(await readBack(owner, await sendSpans(owner))).toEqual(everywhere(note(["phone", "secret"])));
  });
});

describe("pseudonymized identities", () => {
  const SECRET = "ingest-redaction-test-secret";
  let withSecret: Vigil;
  beforeAll(async () => {
    withSecret = await startTestVigil({ PSEUDONYM_SECRET: SECRET });
  });
  afterAll(async () => {
    await withSecret?.stop();
  });

  /** HMAC-SHA256 under a per-organization key derived from the secret, first 16 hex digits. */
  const pseudonym = (organizationId: string, value: string) => {
    const key = createHmac("sha256", SECRET).update(organizationId).digest();
    return `user_${createHmac("sha256", key).update(value).digest("hex").slice(0, 16)}`;
  };

  const identity = (user: string) => ({ "user.id": user, "user.email": `${user}@example.com` });

  test("with PSEUDONYM_SECRET: a stable pseudonym per organization, in the column, the attributes and metadata", async () => {
    const first = await tenant(withSecret, "pseudonyms");
    await first.client.projects.update(first.slug, { settings: { redaction: { identities: "pseudonymize" } } });
    const alice = pseudonym(first.organizationId, "alice");
    const aliceEmail = pseudonym(first.organizationId, "alice@example.com");

    const sent = await sendSpans(first, identity("alice"), { userId: "alice", plan: "pro" });
    const chat = await first.client.traces.getSpan(first.slug, sent.traceId, sent.chat);
    expect(chat.userId).toBe(alice);
    expect(chat.attrString["user.email"]).toBe(aliceEmail);
    expect(chat.metadata).toEqual({ userId: alice, plan: "pro" });
    expect((await first.client.traces.get(first.slug, sent.traceId)).userId).toBe(alice);
    // Content is untouched: identities are governed apart from content (mode is off).
    expect(chat.attrString["app.note"]).toBe(PLAIN);

    // Stable across requests; another user gets another pseudonym.
    const again = await sendSpans(first, identity("alice"));
    expect((await first.client.traces.getSpan(first.slug, again.traceId, again.chat)).userId).toBe(alice);
    const bob = await sendSpans(first, identity("bob"));
    const bobChat = await first.client.traces.getSpan(first.slug, bob.traceId, bob.chat);
    expect(bobChat.userId).toBe(pseudonym(first.organizationId, "bob"));
    expect(bobChat.userId).not.toBe(alice);

    // Unlinkable across organizations.
    const second = await tenant(withSecret, "elsewhere");
    await second.client.projects.update(second.slug, { settings: { redaction: { identities: "pseudonymize" } } });
    const elsewhere = await sendSpans(second, identity("alice"));
    const elsewhereChat = await second.client.traces.getSpan(second.slug, elsewhere.traceId, elsewhere.chat);
    expect(elsewhereChat.userId).toBe(pseudonym(second.organizationId, "alice"));
    expect(elsewhereChat.userId).not.toBe(alice);
  });

  test("without PSEUDONYM_SECRET the identities are removed", async () => {
    const owner = await tenant(await sharedVigil(), "no-secret");
    await owner.client.projects.update(owner.slug, { settings: { redaction: { identities: "pseudonymize" } } });
    const sent = await sendSpans(owner, identity("carol"), { userId: "carol", plan: "free" });
    const chat = await owner.client.traces.getSpan(owner.slug, sent.traceId, sent.chat);
    expect(chat.userId).toBeNull();
    expect(chat.attrString).not.toHaveProperty("user.email");
    expect(chat.attrString).not.toHaveProperty("user.id");
    expect(chat.metadata).toEqual({ plan: "free" });
    expect((await owner.client.traces.get(owner.slug, sent.traceId)).userId).toBeNull();
    expect(JSON.stringify(chat)).not.toContain("carol");
  });
});
