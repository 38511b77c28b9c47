import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { blankSpanRow, generateCorpus } from "../bench/redact-corpus";
import type { Sql } from "../src/db/postgres";
import { compileRedactor, findEntities, PLACEHOLDERS, REDACTION_ENTITIES, redactRow, type RedactionEntity } from "../src/ingest/redact";
import { DEFAULT_REDACTION_POLICY, effectivePolicy, RedactionPolicies, type RedactionPolicy } from "../src/ingest/redaction-policy";
import { newId } from "../src/lib/ids";
import { sharedVigil } from "./helpers";

setDefaultTimeout(60_000);

const enforce = (entities: RedactionEntity[] = [...REDACTION_ENTITIES], fields: Partial<RedactionPolicy> = {}): RedactionPolicy => ({
  mode: "enforce",
  entities,
  scopes: { metadata: false },
  identities: "keep",
  ...fields,
});
const redactAll = compileRedactor(enforce(), null);

const SAMPLES: Record<RedactionEntity, string[]> = {
  email: ["jane.doe@example.com", "a+tag@sub.example.co.uk", "support_team@acme.io"],
  phone: ["+1 (415) 555-0132", "415-555-0199", "(415) 555-0199", "1-800-555-0199", "+44 20 7946 0958", "+4915112345678", "020 7946 0958", "06 12 34 56 78"],
  credit_card: ["4111 1111 1111 1111", "4111111111111111", "5500-0000-0000-0004", "378282246310005", "6011111111111117", "3530111333300000"],
  iban: ["DE89 3704 0044 0532 0130 00", "GB82WEST12345698765432", "FR1420041010050500013M02606", "NL91ABNA0417164300"],
  us_ssn: ["123-45-6789", "078-05-1120"],
  ip_address: ["192.168.1.20", "8.8.8.8", "2001:db8::8a2e:370:7334", "fe80::1", "::ffff:192.0.2.1", "2001:0db8:85a3:0000:0000:8a2e:0370:7334"],
  secret: [
    "sk-abcdefghijklmnopqrstuvwxyz0123456789ABCD",
    "sk-proj-Xk2Lm9Qw3Rt7Yp1Zs8Vb4Nc6Hd0Fg5Jk",
    "sk-ant-api03-AbCdEfGh1234567890_abcdefgh-XYZ",
    "sk_live_4eC39HqLyjWDarjtT1zdp7dc",
    "AKIAIOSFODNN7EXAMPLE",
    "ghp_aB3dE5fG7hI9jK1lM3nO5pQ7rS9tU1vW3xY5",
    "gho_aB3dE5fG7hI9jK1lM3nO5pQ7rS9tU1vW3xY5",
    "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
    "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
    "xoxp-123456789012-1234567890123-abcdef1234",
    "AIzaSyD-1234567890abcdefghijklmnopqrstu",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA0Z3VS5JJcds3xfn/ygWyF8PbnGy\nabc+/==\n-----END RSA PRIVATE KEY-----",
    "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC",
  ],
};

/** Things with digits, dots, dashes and colons that are not PII. */
const NOT_PII = [
  "2024-06-18T12:30:45.123Z",
  "2024-06-18 12:30:45",
  "18.06.2024",
  "1718000000000",
  "1718000000000000000",
  "12:30:45",
  "e6841b5c-e17d-2f2b-b362-a53ae5c62d50",
  "4bf92f3577b34da6a3ce929d0e0e4736",
  "00f067aa0ba902b7",
  "ckv8x2k3h0000qzrm5h3k9s8f",
  "v1.2.3",
  "version 2.10.4",
  "python3.11",
  "gpt-4o-2024-08-06",
  "claude-3-5-sonnet-20241022",
  "12345",
  "3.14159",
  "1,234,567",
  "$1,234.56",
  "0.4111111111111111",
  "1234567890",
  "100 200 3000",
  "ORD-2024-123456",
  "id=4111111111111111x",
  "0x4111111111111111",
  "sk-learn-compatible-estimator-api",
  "Bearer token authentication",
  "task_abcdefghijklmnopqrstuvwxyz123",
  "chatcmpl-9fJx2kLmQ8AbCdEfGhIjKlMnOp",
  "icon@2x.png",
  "react@18.2.0",
  "@types/node",
  "000-12-3456",
  "666-12-3456",
  "900-12-3456",
  "00:1A:2B:3C:4D:5E",
  "std::vector",
  "::1",
];

describe("detectors", () => {
  for (const [entity, samples] of Object.entries(SAMPLES) as [RedactionEntity, string[]][]) {
    test(`${entity} is replaced by ${PLACEHOLDERS[entity]}`, () => {
      for (const sample of samples) {
        expect(redactAll.redactText(`Contact: ${sample}, thanks`)).toBe(`Contact: ${PLACEHOLDERS[entity]}, thanks`);
        expect(compileRedactor(enforce([entity]), null).redactText(sample)).toBe(PLACEHOLDERS[entity]);
      }
    });
  }

  test("a bearer token keeps its scheme", () => {
    expect(redactAll.redactText("Authorization: Bearer abc123def456ghi789jkl")).toBe("Authorization: Bearer [REDACTED_SECRET]");
  });

  test("timestamps, ids, versions and ordinary numbers are left alone", () => {
    for (const text of NOT_PII) expect(redactAll.redactText(`value ${text} end`)).toBe(`value ${text} end`);
  });

  test("Luhn-invalid card numbers are left alone", () => {
    for (const number of ["4111 1111 1111 1112", "4111111111111112", "5500-0000-0000-0005", "378282246310006"]) {
      expect(redactAll.redactText(`card ${number}`)).toBe(`card ${number}`);
    }
  });

  test("IBANs failing mod 97 are left alone", () => {
    for (const iban of ["DE89 3704 0044 0532 0130 01", "GB82WEST12345698765433", "NL91ABNA0417164301"]) {
      expect(redactAll.redactText(`iban ${iban}`)).toBe(`iban ${iban}`);
    }
  });

  test("an IBAN followed by other capitals ends at its country's length", () => {
    expect(redactAll.redactText("DE89 3704 0044 0532 0130 00 ABC")).toBe("[REDACTED_IBAN] ABC");
  });

  test("ip_address is off by default and redacts when enabled", () => {
    const text = "from 192.168.1.20 and 2001:db8::8a2e:370:7334";
    const defaults = compileRedactor({ ...DEFAULT_REDACTION_POLICY, mode: "enforce" }, null);
    expect(DEFAULT_REDACTION_POLICY.entities).not.toContain("ip_address");
    expect(defaults.redactText(text)).toBe(text);
    const withIp = compileRedactor(enforce([...DEFAULT_REDACTION_POLICY.entities, "ip_address"]), null);
    expect(withIp.redactText(text)).toBe("from [REDACTED_IP_ADDRESS] and [REDACTED_IP_ADDRESS]");
  });

  test("only the listed entities are redacted, and nothing in mode off", () => {
    const text = "jane@example.com 415-555-0199";
    expect(compileRedactor(enforce(["email"]), null).redactText(text)).toBe("[REDACTED_EMAIL] 415-555-0199");
    expect(compileRedactor(enforce(["phone"]), null).redactText(text)).toBe("jane@example.com [REDACTED_PHONE]");
    const off = compileRedactor({ ...enforce(), mode: "off" }, null);
    expect(off.isNoop).toBe(true);
    expect(off.redactText(text)).toBe(text);
  });

  test("findEntities reports the kinds present", () => {
    expect(findEntities("mail jane@example.com or call 415-555-0199")).toEqual(["email", "phone"]);
    expect(findEntities("mail jane@example.com", ["phone"])).toEqual([]);
    expect(findEntities("nothing here 2024-06-18")).toEqual([]);
  });
});

/** JSON as Python's json.dumps writes it by default: non-ASCII characters as \uXXXX escapes. */
const asciiJson = (value: unknown) =>
  JSON.stringify(value).replace(/[\u007f-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);

describe("JSON stays valid", () => {
  const message = (content: string, toolArguments: string) =>
    [
      { role: "user", parts: [{ type: "text", content }] },
      { role: "assistant", parts: [{ type: "tool_call", id: "call_1", name: "send", arguments: toolArguments }] },
    ] as const;
  const content =
    'Email:\njane@example.com\tphone +1 (415) 555-0132\n"4111 1111 1111 1111"\u00e9jane@example.com, key \u2014sk-proj-Xk2Lm9Qw3Rt7Yp1Zs8Vb4Nc6Hd0Fg5Jk\n';
  const expected =
    'Email:\n[REDACTED_EMAIL]\tphone [REDACTED_PHONE]\n"[REDACTED_CREDIT_CARD]"\u00e9[REDACTED_EMAIL], key \u2014[REDACTED_SECRET]\n';

  for (const [encoding, encode] of [
    ["JSON.stringify", JSON.stringify],
    ["ASCII-only escapes", asciiJson],
  ] as const) {
    test(`matches next to escapes are replaced whole (${encoding})`, () => {
      const json = encode(message(content, encode({ to: "jane@example.com", body: content })));
      const parsed = JSON.parse(redactAll.redactText(json));
      expect(parsed[0].parts[0].content).toBe(expected);
      const toolArguments = JSON.parse(parsed[1].parts[0].arguments);
      expect(toolArguments).toEqual({ to: "[REDACTED_EMAIL]", body: expected });
    });
  }

  test("every sample next to every escape and quote, nested once and twice, parses after redaction", () => {
    const neighbours = ["", "\n", "\t", "\r\n", '"', "\u00e9", "\u2014", "\ud83d\udc4d", "/", "\\", " \\n "];
    for (const [entity, samples] of Object.entries(SAMPLES) as [RedactionEntity, string[]][]) {
      for (const sample of samples) {
        for (const before of neighbours) {
          for (const after of neighbours) {
            const text = before + sample + after;
            for (const encode of [JSON.stringify, asciiJson]) {
              const once = encode({ content: text });
              const twice = encode({ arguments: once });
              const redactedOnce = JSON.parse(redactAll.redactText(once)).content as string;
              const redactedTwice = JSON.parse(JSON.parse(redactAll.redactText(twice)).arguments).content as string;
              // A sample right after a literal backslash may be kept; elsewhere it must be gone.
              if (before !== "\\") {
                expect(redactedOnce).toContain(PLACEHOLDERS[entity]);
                expect(redactedTwice).toContain(PLACEHOLDERS[entity]);
              }
            }
          }
        }
      }
    }
  });

  test("a private key block never spans two JSON strings", () => {
    const json = JSON.stringify({ a: "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC", b: "see -----END PRIVATE KEY-----" });
    expect(JSON.parse(redactAll.redactText(json))).toEqual({ a: "[REDACTED_SECRET]", b: "see -----END PRIVATE KEY-----" });
  });

  test("many BEGIN lines without an END are handled in linear time", () => {
    const text = "-----BEGIN PRIVATE KEY-----".repeat(40_000);
    const started = performance.now();
    expect(redactAll.redactText(text)).toBe("[REDACTED_SECRET]".repeat(40_000));
    expect(performance.now() - started).toBeLessThan(1000);
  });

  test("the generated span corpus parses after redaction and has its PII replaced", () => {
    let placeholders = 0;
    for (const span of generateCorpus(300)) {
      for (const text of [span.systemInstructions, span.inputMessages, span.outputMessages]) {
        const redacted = redactAll.redactText(text);
        expect(() => JSON.parse(redacted)).not.toThrow();
        placeholders += redacted.match(/\[REDACTED_[A-Z_]+\]/g)?.length ?? 0;
        for (const leaked of ["jane.doe@example.com", "4111 1111 1111 1111", "AKIAIOSFODNN7EXAMPLE", "123-45-6789"]) {
          expect(redacted).not.toContain(leaked);
        }
      }
    }
    expect(placeholders).toBeGreaterThan(100);
  });

  test("the generated span corpus without PII comes out unchanged", () => {
    for (const span of generateCorpus(300, 7, Infinity)) {
      for (const text of [span.systemInstructions, span.inputMessages, span.outputMessages]) expect(redactAll.redactText(text)).toBe(text);
    }
  });
});

describe("redactRow", () => {
  const pii = "mail jane@example.com";
  const redacted = "mail [REDACTED_EMAIL]";
  const row = () =>
    blankSpanRow({
      organization_id: "org_a",
      user_id: "customer-42",
      input_messages: JSON.stringify([{ role: "user", parts: [{ type: "text", content: pii }] }]),
      output_messages: JSON.stringify([{ role: "assistant", parts: [{ type: "text", content: pii }] }]),
      system_instructions: JSON.stringify([{ type: "text", content: pii }]),
      message_text: pii,
      tool_input: JSON.stringify({ q: pii }),
      tool_output: pii,
      tool_definitions: JSON.stringify([{ name: "lookup", description: pii }]),
      status_message: pii,
      events_json: JSON.stringify([{ name: "log", attributes: { message: pii } }]),
      attr_string: { "app.note": pii, "user.id": "customer-42", "user.email": "jane@example.com" },
      resource_string: { "service.name": "agent", "deployment.owner": pii },
      metadata: { note: pii, user_id: "customer-42", account: "customer-42" },
      tags: [pii, "production"],
    });

  test("content columns and string attributes are redacted; metadata and tags only with scopes.metadata", () => {
    const result = redactRow(row(), enforce(), null);
    expect(JSON.parse(result.input_messages)[0].parts[0].content).toBe(redacted);
    expect(JSON.parse(result.output_messages)[0].parts[0].content).toBe(redacted);
    expect(JSON.parse(result.system_instructions)[0].content).toBe(redacted);
    expect(result.message_text).toBe(redacted);
    expect(JSON.parse(result.tool_input).q).toBe(redacted);
    expect(result.tool_output).toBe(redacted);
    expect(JSON.parse(result.tool_definitions)[0].description).toBe(redacted);
    expect(result.status_message).toBe(redacted);
    expect(JSON.parse(result.events_json)[0].attributes.message).toBe(redacted);
    expect(result.attr_string["app.note"]).toBe(redacted);
    expect(result.resource_string["deployment.owner"]).toBe(redacted);
    expect(result.metadata.note).toBe(pii);
    expect(result.tags).toEqual([pii, "production"]);
    // Identities are governed by `identities`, which is keep here.
    expect(result.user_id).toBe("customer-42");
    expect(result.attr_string["user.email"]).toBe("jane@example.com");

    const withMetadata = redactRow(row(), enforce(undefined, { scopes: { metadata: true } }), null);
    expect(withMetadata.metadata.note).toBe(redacted);
    expect(withMetadata.tags).toEqual([redacted, "production"]);
  });

  test("message text follows its messages, also when the JSON spells the PII with \\u escapes", () => {
    const clean = redactRow({ ...row(), input_messages: '[{"role":"user","parts":[]}]', output_messages: "", message_text: "nothing here" }, enforce(), null);
    expect(clean.message_text).toBe("nothing here");
    const escaped = '[{"role":"user","parts":[{"type":"text","content":"mail jane\\u0040example.com"}]}]';
    expect(JSON.parse(escaped)[0].parts[0].content).toBe(pii);
    const result = redactRow({ ...row(), input_messages: escaped, output_messages: "", message_text: pii }, enforce(), null);
    expect(result.input_messages).toBe(escaped);
    expect(result.message_text).toBe(redacted);
  });

  test("mode off changes nothing", () => {
    expect(redactRow(row(), DEFAULT_REDACTION_POLICY, "secret")).toEqual(row());
  });

  test("pseudonymize with a secret: stable per organization, different across organizations", () => {
    const policy: RedactionPolicy = { ...DEFAULT_REDACTION_POLICY, identities: "pseudonymize" };
    const first = redactRow(row(), policy, "pseudonym-secret");
    expect(first.user_id).toMatch(/^user_[0-9a-f]{16}$/);
    expect(first.attr_string["user.id"]).toBe(first.user_id);
    expect(first.metadata.user_id).toBe(first.user_id);
    expect(first.metadata.account).toBe("customer-42"); // not under a user or email key
    expect(first.attr_string["user.email"]).toMatch(/^user_[0-9a-f]{16}$/);
    expect(first.attr_string["user.email"]).not.toBe(first.user_id);
    expect(first.attr_string["app.note"]).toBe(pii); // mode off: content untouched

    expect(redactRow(row(), policy, "pseudonym-secret").user_id).toBe(first.user_id);
    expect(redactRow({ ...row(), organization_id: "org_b" }, policy, "pseudonym-secret").user_id).not.toBe(first.user_id);
    expect(redactRow(row(), policy, "another-secret").user_id).not.toBe(first.user_id);
  });

  test("pseudonymize without a secret removes the identifiers", () => {
    const result = redactRow(row(), { ...DEFAULT_REDACTION_POLICY, identities: "pseudonymize" }, null);
    expect(result.user_id).toBe("");
    expect(result.attr_string).not.toHaveProperty("user.id");
    expect(result.attr_string).not.toHaveProperty("user.email");
    expect(result.metadata).not.toHaveProperty("user_id");
    expect(result.metadata.account).toBe("customer-42");
    expect(result.attr_string["app.note"]).toBe(pii);
  });
});

describe("effectivePolicy", () => {
  const project = { mode: "enforce", entities: ["email", "ip_address"], scopes: { metadata: true }, identities: "pseudonymize" };

  test("defaults: off; every entity but ip_address; no metadata; keep identities", () => {
    expect(effectivePolicy(null, false, undefined)).toEqual({
      mode: "off",
      entities: ["secret", "email", "iban", "credit_card", "us_ssn", "phone"],
      scopes: { metadata: false },
      identities: "keep",
    });
  });

  test("the project's setting applies when the organization sets nothing", () => {
    expect(effectivePolicy(null, false, project)).toEqual({
      mode: "enforce",
      entities: ["email", "ip_address"],
      scopes: { metadata: true },
      identities: "pseudonymize",
    });
  });

  test("the organization overrides the project field by field", () => {
    expect(effectivePolicy({ entities: ["phone"], identities: "keep" }, false, project)).toEqual({
      mode: "enforce",
      entities: ["phone"],
      scopes: { metadata: true },
      identities: "keep",
    });
    expect(effectivePolicy({ mode: "off" }, false, project).mode).toBe("off");
  });

  test("a locked organization policy ignores project values entirely", () => {
    expect(effectivePolicy({ entities: ["phone"] }, true, project)).toEqual({
      mode: "off",
      entities: ["phone"],
      scopes: { metadata: false },
      identities: "keep",
    });
    expect(effectivePolicy(null, true, project)).toEqual(effectivePolicy(null, false, undefined));
  });

  test("invalid stored values are ignored and entities are deduplicated", () => {
    expect(effectivePolicy({ mode: "loud", entities: ["email", "email", "names"], scopes: { metadata: "yes" } }, false, project)).toEqual({
      mode: "enforce",
      entities: ["email"],
      scopes: { metadata: true },
      identities: "pseudonymize",
    });
  });
});

describe("RedactionPolicies", () => {
  type Json = Parameters<Sql["json"]>[0];
  async function seed(sql: Sql, orgPolicy: Json | null = null, locked = false) {
    const organizationId = newId();
    const projectIds = [newId(), newId()];
    await sql`INSERT INTO organizations (id, name, slug, redaction_policy, redaction_locked)
      VALUES (${organizationId}, 'Redaction Org', ${`redaction-${organizationId}`}, ${orgPolicy ? sql.json(orgPolicy) : null}, ${locked})`;
    for (const [i, projectId] of projectIds.entries()) {
      await sql`INSERT INTO projects (id, organization_id, name, slug, settings)
        VALUES (${projectId}, ${organizationId}, ${`Project ${i}`}, ${`project-${i}`}, ${sql.json({ redaction: { mode: "enforce", entities: ["email"] } })})`;
    }
    return { organizationId, projectIds };
  }
  const setProjectRedaction = (sql: Sql, projectId: string, redaction: Json) =>
    sql`UPDATE projects SET settings = ${sql.json({ redaction })} WHERE id = ${projectId}`;

  test("loads the effective policy of a project, with the organization's override and lock", async () => {
    const { ctx } = await sharedVigil();
    const policies = new RedactionPolicies(ctx.sql, { pseudonymSecret: null });
    const plain = await seed(ctx.sql);
    const redactor = await policies.forProject(plain.organizationId, plain.projectIds[0]);
    expect(redactor.policy).toMatchObject({ mode: "enforce", entities: ["email"] });
    expect(redactor.redactText("jane@example.com 415-555-0199")).toBe("[REDACTED_EMAIL] 415-555-0199");

    const overriding = await seed(ctx.sql, { entities: ["phone"] });
    expect((await policies.forProject(overriding.organizationId, overriding.projectIds[0])).policy).toMatchObject({ mode: "enforce", entities: ["phone"] });

    const locked = await seed(ctx.sql, { entities: ["phone"] }, true);
    expect((await policies.forProject(locked.organizationId, locked.projectIds[0])).policy).toMatchObject({ mode: "off", entities: ["phone"] });

    expect((await policies.forProject(newId(), newId())).policy).toEqual(DEFAULT_REDACTION_POLICY);
  });

  test("settings stored as a JSON-encoded string are read too", async () => {
    const { ctx } = await sharedVigil();
    const { organizationId, projectIds } = await seed(ctx.sql);
    await ctx.sql`UPDATE projects SET settings = to_jsonb(${JSON.stringify({ redaction: { mode: "enforce", entities: ["phone"] } })}::text) WHERE id = ${projectIds[0]}`;
    const policies = new RedactionPolicies(ctx.sql, { pseudonymSecret: null });
    expect((await policies.forProject(organizationId, projectIds[0])).policy.entities).toEqual(["phone"]);
  });

  test("cached until invalidated: one project, or every project of the organization", async () => {
    const { ctx } = await sharedVigil();
    const policies = new RedactionPolicies(ctx.sql, { pseudonymSecret: null });
    const { organizationId, projectIds } = await seed(ctx.sql);
    const [first, second] = projectIds;
    const concurrent = [policies.forProject(organizationId, first), policies.forProject(organizationId, first)];
    expect(concurrent[0]).toBe(concurrent[1]);
    await Promise.all([...concurrent, policies.forProject(organizationId, second)]);

    await setProjectRedaction(ctx.sql, first, { mode: "off" });
    await setProjectRedaction(ctx.sql, second, { mode: "off" });
    expect((await policies.forProject(organizationId, first)).policy.mode).toBe("enforce");

    policies.invalidate(organizationId, first);
    expect((await policies.forProject(organizationId, first)).policy.mode).toBe("off");
    expect((await policies.forProject(organizationId, second)).policy.mode).toBe("enforce");

    await ctx.sql`UPDATE organizations SET redaction_policy = ${ctx.sql.json({ mode: "enforce", entities: ["us_ssn"] })} WHERE id = ${organizationId}`;
    policies.invalidate(organizationId);
    for (const projectId of projectIds) {
      expect((await policies.forProject(organizationId, projectId)).policy).toMatchObject({ mode: "enforce", entities: ["us_ssn"] });
    }
  });

  test("a cached policy expires after its TTL, which is at most a minute", async () => {
    const { ctx } = await sharedVigil();
    let now = 1_000_000;
    const { organizationId, projectIds } = await seed(ctx.sql);
    const policies = new RedactionPolicies(ctx.sql, { pseudonymSecret: null, ttlMs: 10 * 60_000, now: () => now });
    expect((await policies.forProject(organizationId, projectIds[0])).policy.mode).toBe("enforce");
    await setProjectRedaction(ctx.sql, projectIds[0], { mode: "off" });
    now += 59_000;
    expect((await policies.forProject(organizationId, projectIds[0])).policy.mode).toBe("enforce");
    now += 1_001;
    expect((await policies.forProject(organizationId, projectIds[0])).policy.mode).toBe("off");
  });

  test("a failed read is not cached", async () => {
    const { ctx } = await sharedVigil();
    const { organizationId, projectIds } = await seed(ctx.sql);
    let calls = 0;
    const flakySql = ((...args: Parameters<Sql>) => (calls++ === 0 ? Promise.reject(new Error("connection lost")) : ctx.sql(...args))) as unknown as Sql;
    const policies = new RedactionPolicies(flakySql, { pseudonymSecret: null });
    await expect(policies.forProject(organizationId, projectIds[0])).rejects.toThrow("connection lost");
    expect((await policies.forProject(organizationId, projectIds[0])).policy.mode).toBe("enforce");
  });

  test("the redactor carries the deployment's pseudonym secret", async () => {
    const { ctx } = await sharedVigil();
    const { organizationId, projectIds } = await seed(ctx.sql, { identities: "pseudonymize" });
    const policies = new RedactionPolicies(ctx.sql, { pseudonymSecret: "deployment-secret" });
    const redactor = await policies.forProject(organizationId, projectIds[0]);
    const result = redactor.redactRow(blankSpanRow({ organization_id: organizationId, user_id: "customer-42" }));
    expect(result.user_id).toMatch(/^user_[0-9a-f]{16}$/);
  });
});
