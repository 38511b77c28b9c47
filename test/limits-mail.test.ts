import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { mkdtempSync, readdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { newId } from "../src/lib/ids";
import type { Fields, Logger } from "../src/lib/log";
import { createMailer } from "../src/lib/mailer";
import type { Vigil } from "../src/server";
import { tenantOf } from "./fixtures/spans";
import { bootstrapAccount, startTestVigil } from "./helpers";

setDefaultTimeout(60_000);

let vigil: Vigil;
beforeAll(async () => {
  vigil = await startTestVigil({ EXPORT_RATE_LIMIT: "3" });
});
afterAll(() => vigil?.stop());

const outbox = () => {
  const dir = join(vigil.ctx.config.dataDir, "outbox");
  try {
    return readdirSync(dir).map((name) => readFileSync(join(dir, name), "utf8"));
  } catch {
    return [];
  }
};
const decodeQuotedPrintable = (text: string) =>
  text.replace(/=\r?\n/g, "").replace(/=([0-9A-F]{2})/g, (_match, hex: string) => String.fromCharCode(parseInt(hex, 16)));

describe("exports are mailed only to confirmed addresses, and rate limited per organization", () => {
  test("unconfirmed: 403 and one confirmation link; confirmed through the link: 202; past the limit: 429 with Retry-After", async () => {
    const { account } = await bootstrapAccount(vigil.url);
    const tenant = await tenantOf(vigil.ctx, account.apiKey, account.projectSlug);
    const member = `owner-${newId()}@example.com`;
    const userId = newId();
    await vigil.ctx.sql`INSERT INTO users (id, email) VALUES (${userId}, ${member})`;
    await vigil.ctx.sql`INSERT INTO memberships (organization_id, user_id, role) VALUES (${tenant.organizationId}, ${userId}, 'owner')`;
    const requestExport = () =>
      fetch(`${vigil.url}/v1/projects/${account.projectSlug}/traces/export`, {
        method: "POST",
        headers: { authorization: `Bearer ${account.apiKey}`, "content-type": "application/json" },
        body: JSON.stringify({ traces: { by: "ids", ids: ["a".repeat(32)] }, recipient: member }),
      });
    const mailsTo = () => outbox().filter((mail) => mail.includes(`To: ${member}`));

    for (let attempt = 0; attempt < 2; attempt++) {
      const refused = await requestExport();
      expect(refused.status).toBe(403);
      expect(((await refused.json()) as { error: string }).error).toMatch(/^recipient: this address has not confirmed .* a confirmation link was mailed/);
    }
    // Asked twice, mailed once: requests cannot flood the address.
    const mails = mailsTo();
    expect(mails).toHaveLength(1);
    expect(mails[0]).toContain("Subject: Confirm your email address for Vigil");
    const link = decodeQuotedPrintable(mails[0]!).match(/https?:\/\/\S+\/v1\/email-confirmations\/confirm\?token=[\w%-]+/)?.[0];
    expect(link).toBeDefined();
    const url = new URL(link!);
    const local = `${vigil.url}${url.pathname}${url.search}`;

    // Opening the link confirms nothing (a mail scanner may fetch it); the page's form does.
    const page = await fetch(local);
    expect(page.status).toBe(200);
    expect(page.headers.get("content-security-policy")).toContain("frame-ancestors 'none'");
    expect(await page.text()).toContain('<form method="post">');
    expect(await vigil.ctx.sql`SELECT 1 FROM email_confirmations WHERE email = ${member} AND confirmed_at IS NOT NULL`).toHaveLength(0);
    const confirmed = await fetch(local, { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body: new URLSearchParams({ token: url.searchParams.get("token")! }) });
    expect(confirmed.status).toBe(200);
    expect(await confirmed.text()).toContain("Email address confirmed");
    expect((await fetch(local)).status).toBe(404);

    expect((await requestExport()).status).toBe(202);
    const limited = await requestExport();
    expect(limited.status).toBe(429);
    expect(Number(limited.headers.get("retry-after"))).toBeGreaterThan(0);
    expect(((await limited.json()) as { error: string }).error).toBe("At most 3 exports per hour per organization");
  });

  test("a wrong token is a 404 page", async () => {
    const response = await fetch(`${vigil.url}/v1/email-confirmations/confirm?token=nope`, { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body: "token=nope" });
    expect(response.status).toBe(404);
  });
});

test("mail logs name the recipient's domain, never the address", async () => {
  const lines: Fields[] = [];
  const capture: Logger = {
    debug: (msg, fields) => lines.push({ msg, ...fields }),
    info: (msg, fields) => lines.push({ msg, ...fields }),
    warn: (msg, fields) => lines.push({ msg, ...fields }),
    error: (msg, fields) => lines.push({ msg, ...fields }),
    child: () => capture,
  };
  const mailer = createMailer({ smtpUrl: null, mailFrom: "Vigil <vigil@localhost>", dataDir: mkdtempSync(join(tmpdir(), "vigil-mail-")) }, capture);
  await mailer.sendMail({ to: "Someone.Private@Example.org", subject: "hello", text: "x" });
  expect(lines).toHaveLength(1);
  expect(lines[0]).toMatchObject({ toDomain: "example.org", subject: "hello" });
  expect(JSON.stringify(lines)).not.toMatch(/someone/i);
});
