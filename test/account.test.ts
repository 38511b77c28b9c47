import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import type { AddressInfo } from "node:net";
import { SMTPServer } from "smtp-server";
import { deleteExpiredBootstrapOrganizations, revocationGraceSeconds } from "../src/jobs/bootstrap-expiry";
import { clientAddressKey, RateLimiter } from "../src/lib/rate-limit";
import type { Vigil } from "../src/server";
import { bootstrapAccount, sharedVigil, startTestVigil } from "./helpers";
import { sdkClient, sdkFailure } from "./sdk";
import { WebClient } from "./web-client";

setDefaultTimeout(60_000);

const anonymous = (url: string) => sdkClient(url, "none");

/** The claim link served by this test Vigil (PUBLIC_URL names port 0 in tests). */
const localClaimUrl = (vigil: Vigil, claimUrl: string) => claimUrl.replace(vigil.ctx.config.publicUrl, vigil.url);

async function eventually<T>(probe: () => Promise<T | undefined>, what: string): Promise<T> {
  for (let i = 0; i < 100; i++) {
    const value = await probe();
    if (value !== undefined) return value;
    await Bun.sleep(20);
  }
  throw new Error(`timed out waiting for ${what}`);
}

/** Undoes quoted-printable soft line breaks and escapes, which may split a long link in a mail body. */
const decodeQuotedPrintable = (text: string) =>
  text.replace(/=\r?\n/g, "").replace(/=([0-9A-F]{2})/g, (_match, hex: string) => String.fromCharCode(parseInt(hex, 16)));

describe("account bootstrap", () => {
  test("creates an organization, a project, a working key and a claim link", async () => {
    const vigil = await sharedVigil();
    const res = await fetch(`${vigil.url}/v1/account/bootstrap`, { method: "POST" });
    expect(res.status).toBe(201);
    const account = (await res.json()) as Record<string, string | null>;
    expect(Object.keys(account).sort()).toEqual(["apiKey", "claimEmail", "claimExpiresAt", "claimUrl", "organizationSlug", "projectSlug"]);
    expect(account.organizationSlug).toMatch(/^my-organization(-[a-z0-9]{6})?$/);
    expect(account.projectSlug).toBe("my-project");
    expect(account.claimEmail).toBeNull();
    expect(account.claimUrl).toMatch(new RegExp(`^${vigil.ctx.config.publicUrl}/claim/vglclaim_[A-Za-z0-9_-]{43}$`));
    const expiresIn = Date.parse(account.claimExpiresAt!) - Date.now();
    expect(expiresIn).toBeGreaterThan(7 * 86_400_000 - 60_000);
    expect(expiresIn).toBeLessThanOrEqual(7 * 86_400_000);

    const client = sdkClient(vigil.url, account.apiKey!);
    const me = await client.account.get();
    expect(me).toEqual({ user: null, organization: { id: me.organization.id, name: "My Organization", slug: account.organizationSlug! }, role: null });
    const projects = await client.projects.list();
    expect(projects.items.map((project) => [project.name, project.slug])).toEqual([["My Project", "my-project"]]);
    const [org] = await vigil.ctx.sql<{ is_bootstrap: boolean; claimed_at: Date | null }[]>`
      SELECT is_bootstrap, claimed_at FROM organizations WHERE id = ${me.organization.id}`;
    expect(org).toEqual({ is_bootstrap: true, claimed_at: null });
  });

  test("uses the names given; a taken organization slug gets a suffix", async () => {
    const { url } = await sharedVigil();
    const name = `Acme ${Math.random().toString(36).slice(2, 8)}`;
    const first = await anonymous(url).account.bootstrap({ organizationName: name, projectName: "Support Agent" });
    const second = await anonymous(url).account.bootstrap({ organizationName: name, projectName: "Support Agent" });
    expect(first.organizationSlug).toBe(name.toLowerCase().replace(" ", "-"));
    expect(second.organizationSlug).toMatch(new RegExp(`^${first.organizationSlug}-[a-z0-9]{6}$`));
    expect(first.projectSlug).toBe("support-agent");
    expect(second.projectSlug).toBe("support-agent");
    const me = await sdkClient(url, second.apiKey).account.get();
    expect(me.organization.name).toBe(name);
    expect(me.organization.slug).toBe(second.organizationSlug);
  });

  test("rejects a malformed body with the field named", async () => {
    const { url } = await sharedVigil();
    const badEmail = await sdkFailure(anonymous(url).account.bootstrap({ userEmail: "not-an-email" }));
    expect(badEmail.statusCode).toBe(400);
    expect(badEmail.body.error).toStartWith("userEmail:");
    const blank = await sdkFailure(anonymous(url).account.bootstrap({ organizationName: "   " }));
    expect(blank.statusCode).toBe(400);
    expect(blank.body.error).toStartWith("organizationName:");
    const blankProject = await sdkFailure(anonymous(url).account.bootstrap({ projectName: "   " }));
    expect(blankProject.statusCode).toBe(400);
    expect(blankProject.body).toEqual({ error: "projectName: must not be blank" });
    for (const field of ["organizationName", "projectName"]) {
      const nul = await sdkFailure(anonymous(url).account.bootstrap({ [field]: "nul\u0000byte" }));
      expect(nul.statusCode).toBe(400);
      expect(nul.body).toEqual({ error: `${field}: must not contain NUL characters` });
    }
  });

  test("the account of a missing or wrong key is 401", async () => {
    const { url } = await sharedVigil();
    const wrong = await sdkFailure(sdkClient(url, "vgl_wrong").account.get());
    expect(wrong.statusCode).toBe(401);
    expect(wrong.rawResponse?.headers.get("www-authenticate")).toBe("Bearer");
    const missing = await fetch(`${url}/v1/account`);
    expect(missing.status).toBe(401);
    expect(missing.headers.get("www-authenticate")).toBe("Bearer");
    expect(await missing.json()).toEqual({ error: "Missing bearer token" });
  });

  test("is rate limited per client address with 429 and Retry-After", async () => {
    const vigil = await startTestVigil({ BOOTSTRAP_RATE_LIMIT: "2" });
    try {
      await anonymous(vigil.url).account.bootstrap();
      await anonymous(vigil.url).account.bootstrap();
      const limited = await sdkFailure(anonymous(vigil.url).account.bootstrap());
      expect(limited.statusCode).toBe(429);
      const retryAfter = Number(limited.rawResponse?.headers.get("retry-after"));
      expect(retryAfter).toBeGreaterThanOrEqual(1);
      expect(retryAfter).toBeLessThanOrEqual(3600);
      expect(limited.body.error).toBeString();
      const [{ count }] = await vigil.ctx.sql<{ count: number }[]>`SELECT count(*)::int AS count FROM organizations`;
      expect(count).toBe(2);
    } finally {
      await vigil.stop();
    }
  });

  test("ignores X-Forwarded-For unless TRUSTED_PROXIES is set", async () => {
    const vigil = await startTestVigil({ BOOTSTRAP_RATE_LIMIT: "1" });
    try {
      const bootstrap = (forwardedFor: string) => fetch(`${vigil.url}/v1/account/bootstrap`, { method: "POST", headers: { "x-forwarded-for": forwardedFor } });
      expect((await bootstrap("198.51.100.1")).status).toBe(201);
      // A client cannot pass for another one by writing the header itself.
      expect((await bootstrap("198.51.100.2")).status).toBe(429);
    } finally {
      await vigil.stop();
    }
  });

  test("behind TRUSTED_PROXIES, limits each client named by X-Forwarded-For", async () => {
    const vigil = await startTestVigil({ BOOTSTRAP_RATE_LIMIT: "1", TRUSTED_PROXIES: "127.0.0.0/8, 10.0.0.0/8" });
    try {
      const bootstrap = (forwardedFor: string) => fetch(`${vigil.url}/v1/account/bootstrap`, { method: "POST", headers: { "x-forwarded-for": forwardedFor } });
      expect((await bootstrap("198.51.100.1")).status).toBe(201);
      expect((await bootstrap("198.51.100.2")).status).toBe(201);
      expect((await bootstrap("198.51.100.1")).status).toBe(429);
      // The client is the rightmost hop not a trusted proxy; what it wrote to the left does not count.
      expect((await bootstrap("203.0.113.9, 198.51.100.2, 10.1.2.3")).status).toBe(429);
      expect((await bootstrap("198.51.100.1, 198.51.100.3")).status).toBe(201);
      const [{ keys }] = await vigil.ctx.sql<{ keys: string[] }[]>`SELECT array_agg(key ORDER BY key) AS keys FROM rate_limits`;
      expect(keys).toEqual(["bootstrap:198.51.100.1", "bootstrap:198.51.100.2", "bootstrap:198.51.100.3"]);
    } finally {
      await vigil.stop();
    }
  });

  test("writes the claim email to the outbox when SMTP_URL is unset", async () => {
    const vigil = await sharedVigil();
    const outbox = join(vigil.ctx.config.dataDir, "outbox");
    const email = `owner-${Math.random().toString(36).slice(2, 8)}@example.com`;
    const account = await anonymous(vigil.url).account.bootstrap({ userEmail: email });
    expect(account.claimEmail).toBe(email);
    const message = await eventually(async () => {
      const files = await readdir(outbox).catch(() => [] as string[]);
      for (const file of files.filter((name) => name.endsWith(".eml"))) {
        const text = await readFile(join(outbox, file), "utf8");
        if (text.includes(`To: ${email}`)) return text;
      }
      return undefined;
    }, "the claim email in the outbox");
    expect(message).toContain("Subject: Claim your Vigil organization: My Organization\r\n");
    expect(decodeQuotedPrintable(message)).toContain(account.claimUrl);
  });

  test("sends the claim email through SMTP_URL", async () => {
    const received: { to: string[]; data: string }[] = [];
    const smtp = new SMTPServer({
      authOptional: true,
      disabledCommands: ["STARTTLS"],
      logger: false,
      onData(stream, session, done) {
        let data = "";
        stream.on("data", (chunk: Buffer) => (data += chunk.toString("utf8")));
        stream.on("end", () => {
          received.push({ to: session.envelope.rcptTo.map((rcpt) => rcpt.address), data });
          done();
        });
      },
    });
    await new Promise<void>((resolve) => smtp.listen(0, "127.0.0.1", resolve));
    const { port } = smtp.server.address() as AddressInfo;
    const vigil = await startTestVigil({ SMTP_URL: `smtp://127.0.0.1:${port}`, MAIL_FROM: "Vigil Test <vigil@test.example>" });
    try {
      const account = await anonymous(vigil.url).account.bootstrap({ userEmail: "smtp-owner@example.com" });
      const mail = await eventually(async () => received[0], "the SMTP delivery");
      expect(mail.to).toEqual(["smtp-owner@example.com"]);
      expect(mail.data).toContain("From: Vigil Test <vigil@test.example>");
      expect(decodeQuotedPrintable(mail.data)).toContain(account.claimUrl);
      expect(await readdir(join(vigil.ctx.config.dataDir, "outbox")).catch(() => [])).toEqual([]);
    } finally {
      await vigil.stop();
      await new Promise<void>((resolve) => smtp.close(resolve));
    }
  });
});

describe("claiming a bootstrap organization", () => {
  test("the claim page creates the claimer's account as owner and signs them in", async () => {
    const vigil = await sharedVigil();
    const email = `claimer-${Math.random().toString(36).slice(2, 8)}@example.com`;
    const { account, client } = await bootstrapAccount(vigil.url, { organizationName: "Claim <Me>", userEmail: email });
    const claimUrl = localClaimUrl(vigil, account.claimUrl);
    const web = new WebClient(vigil.url);

    const page = await web.get(claimUrl);
    expect(page.status).toBe(200);
    expect(page.headers.get("content-type")).toContain("text/html");
    expect(page.headers.get("referrer-policy")).toBe("no-referrer");
    const html = await page.text();
    expect(html).toContain("Claim &lt;Me&gt;");
    expect(html).not.toContain("Claim <Me>");
    expect(html).toContain(`value="${email}"`);

    const password = "correct horse battery";
    const invalid = await web.post(claimUrl, { email: "nope", password });
    expect(invalid.status).toBe(400);
    expect(await invalid.text()).toContain("email: must be an email address");
    const nulEmail = await web.post(claimUrl, { email: "a\u0000b@example.com", password });
    expect(nulEmail.status).toBe(400);
    expect(await nulEmail.text()).toContain("email: must be an email address");
    const nulName = await web.post(claimUrl, { email, name: "A\u0000da", password });
    expect(nulName.status).toBe(400);
    expect(await nulName.text()).toContain("name: must not contain NUL characters");
    const short = await web.post(claimUrl, { email, password: "short" });
    expect(short.status).toBe(400);
    expect(await short.text()).toContain("password: must be at least 8 characters");

    const claimed = await web.post(claimUrl, { email: email.toUpperCase(), name: "Ada", password });
    expect(claimed.status).toBe(303);
    expect(claimed.headers.get("location")).toBe("/settings/keys");
    expect(web.cookies.has("vigil_session")).toBe(true);
    expect((await web.get("/settings/keys")).status).toBe(200);

    const { organization } = await client.account.get();
    const [org] = await vigil.ctx.sql<{ is_bootstrap: boolean; claimed_at: Date | null }[]>`
      SELECT is_bootstrap, claimed_at FROM organizations WHERE id = ${organization.id}`;
    expect(org?.is_bootstrap).toBe(false);
    expect(org?.claimed_at).toBeInstanceOf(Date);
    const owners = await vigil.ctx.sql<{ email: string; name: string | null; role: string }[]>`
      SELECT u.email, u.name, m.role FROM memberships m JOIN users u ON u.id = m.user_id WHERE m.organization_id = ${organization.id}`;
    expect([...owners]).toEqual([{ email: email.toUpperCase(), name: "Ada", role: "owner" }]);

    // The key keeps working; the link is used up; the owner can sign in afterwards.
    expect((await client.projects.list()).items).toHaveLength(1);
    expect((await web.get(claimUrl)).status).toBe(409);
    expect((await web.post(claimUrl, { email: "late@example.com", password })).status).toBe(409);
    const again = new WebClient(vigil.url);
    await again.get("/login");
    expect((await again.post("/login", { email, password, next: "/settings/members" })).headers.get("location")).toBe("/settings/members");
  });

  test("a second organization claimed with the same email joins the same user, who must give their password", async () => {
    const vigil = await sharedVigil();
    const email = `repeat-${Math.random().toString(36).slice(2, 8)}@example.com`;
    const password = "first password!";
    for (let i = 0; i < 2; i++) {
      const account = await anonymous(vigil.url).account.bootstrap();
      const web = new WebClient(vigil.url);
      await web.get(localClaimUrl(vigil, account.claimUrl));
      if (i === 1) {
        const wrong = await web.post(localClaimUrl(vigil, account.claimUrl), { email, password: "not the password" });
        expect(wrong.status).toBe(400);
        expect(await wrong.text()).toContain("wrong password");
      }
      expect((await web.post(localClaimUrl(vigil, account.claimUrl), { email, password })).status).toBe(303);
    }
    const memberships = await vigil.ctx.sql<{ user_id: string }[]>`
      SELECT m.user_id FROM memberships m JOIN users u ON u.id = m.user_id WHERE lower(u.email) = ${email}`;
    expect(memberships).toHaveLength(2);
    expect(memberships[0]!.user_id).toBe(memberships[1]!.user_id);
  });

  test("unknown and expired links cannot claim", async () => {
    const vigil = await sharedVigil();
    const web = new WebClient(vigil.url);
    expect((await web.get(`/claim/vglclaim_unknown`)).status).toBe(404);
    await web.get("/login");
    expect((await web.post(`/claim/vglclaim_unknown`, { email: "a@example.com", password: "long enough" })).status).toBe(404);

    const { account, client } = await bootstrapAccount(vigil.url);
    const { organization } = await client.account.get();
    await vigil.ctx.sql`UPDATE bootstrap_claims SET expires_at = now() - interval '1 second' WHERE organization_id = ${organization.id}`;
    const claimUrl = localClaimUrl(vigil, account.claimUrl);
    expect((await web.get(claimUrl)).status).toBe(410);
    expect((await web.post(claimUrl, { email: "late@example.com", password: "long enough" })).status).toBe(410);
    const [org] = await vigil.ctx.sql<{ claimed_at: Date | null }[]>`SELECT claimed_at FROM organizations WHERE id = ${organization.id}`;
    expect(org?.claimed_at).toBeNull();
  });
});

describe("expiry of unclaimed bootstrap organizations", () => {
  const claimForExpiry = async (vigil: Vigil) => {
    const { ctx } = vigil;
    const { account, client } = await bootstrapAccount(vigil.url);
    const { organization } = await client.account.get();
    const [project] = (await client.projects.list()).items;
    const now = new Date().toISOString().replace("T", " ").replace("Z", "");
    await ctx.ch.client.insert({
      table: `${ctx.ch.database}.spans`,
      values: [{ organization_id: organization.id, project_id: project!.id, trace_id: "a".repeat(32), span_id: "b".repeat(16), start_time: now, end_time: now }],
      format: "JSONEachRow",
    });
    return { account, client, organizationId: organization.id, projectSlug: project!.slug };
  };
  const expire = (vigil: Vigil, organizationIds: string[]) =>
    vigil.ctx.sql`UPDATE bootstrap_claims SET expires_at = now() - interval '1 minute' WHERE organization_id IN ${vigil.ctx.sql(organizationIds)}`;
  const spanCounts = async (vigil: Vigil, organizationIds: string[]) => {
    const { ch } = vigil.ctx;
    const result = await ch.client.query({
      query: `SELECT organization_id, count() AS spans FROM ${ch.database}.spans WHERE organization_id IN {ids:Array(String)} GROUP BY organization_id`,
      query_params: { ids: organizationIds },
      format: "JSONEachRow",
    });
    return Object.fromEntries((await result.json<{ organization_id: string; spans: number }>()).map((row) => [row.organization_id, Number(row.spans)]));
  };

  test("deletes expired unclaimed organizations with their data, and nothing else", async () => {
    const vigil = await sharedVigil();
    const { ctx } = vigil;
    const expired = await claimForExpiry(vigil);
    const fresh = await claimForExpiry(vigil);
    const claimed = await claimForExpiry(vigil);
    const web = new WebClient(vigil.url);
    await web.get(localClaimUrl(vigil, claimed.account.claimUrl));
    expect((await web.post(localClaimUrl(vigil, claimed.account.claimUrl), { email: `kept-${claimed.organizationId}@example.com`, password: "long enough" })).status).toBe(303);
    await expire(vigil, [expired.organizationId, claimed.organizationId]);

    const deleted = await deleteExpiredBootstrapOrganizations(ctx, 0);
    // The background sweep of this process may have taken it first; either way it must be gone.
    if (deleted.length > 0) expect(deleted).toContain(expired.organizationId);
    expect(deleted).not.toContain(fresh.organizationId);
    expect(deleted).not.toContain(claimed.organizationId);

    const remaining = await ctx.sql<{ id: string }[]>`
      SELECT id FROM organizations WHERE id IN ${ctx.sql([expired.organizationId, fresh.organizationId, claimed.organizationId])}`;
    expect(remaining.map((row) => row.id).sort()).toEqual([fresh.organizationId, claimed.organizationId].sort());
    const [{ projects, keys, claims }] = await ctx.sql<{ projects: number; keys: number; claims: number }[]>`
      SELECT (SELECT count(*)::int FROM projects WHERE organization_id = ${expired.organizationId}) AS projects,
             (SELECT count(*)::int FROM api_keys WHERE organization_id = ${expired.organizationId}) AS keys,
             (SELECT count(*)::int FROM bootstrap_claims WHERE organization_id = ${expired.organizationId}) AS claims`;
    expect({ projects, keys, claims }).toEqual({ projects: 0, keys: 0, claims: 0 });
    const [{ activeKeys }] = await ctx.sql<{ activeKeys: number }[]>`
      SELECT count(*)::int AS "activeKeys" FROM api_keys WHERE organization_id IN ${ctx.sql([fresh.organizationId, claimed.organizationId])} AND revoked_at IS NULL`;
    expect(activeKeys).toBe(2);

    expect(await spanCounts(vigil, [expired.organizationId, fresh.organizationId, claimed.organizationId])).toEqual({
      [fresh.organizationId]: 1,
      [claimed.organizationId]: 1,
    });

    await Bun.sleep(2_100); // past the auth cache
    expect((await sdkFailure(expired.client.account.get())).statusCode).toBe(401);
    expect((await fresh.client.account.get()).organization.id).toBe(fresh.organizationId);
    expect(await deleteExpiredBootstrapOrganizations(ctx, 0)).toEqual([]);
  });

  test("revokes the keys first and deletes the data only after the grace period", async () => {
    const vigil = await startTestVigil();
    try {
      const { ctx } = vigil;
      const expired = await claimForExpiry(vigil);
      await expire(vigil, [expired.organizationId]);

      expect(await deleteExpiredBootstrapOrganizations(ctx)).toEqual([]);
      const keys = await ctx.sql<{ revoked_at: Date | null }[]>`SELECT revoked_at FROM api_keys WHERE organization_id = ${expired.organizationId}`;
      expect(keys.length).toBeGreaterThan(0);
      for (const key of keys) expect(key.revoked_at).toBeInstanceOf(Date);
      // Spans accepted before the revocation bit may still be on their way: the data stays for now.
      expect(await spanCounts(vigil, [expired.organizationId])).toEqual({ [expired.organizationId]: 1 });
      expect(await ctx.sql`SELECT 1 FROM organizations WHERE id = ${expired.organizationId}`).toHaveLength(1);
      await Bun.sleep(2_100); // past the auth cache
      expect((await sdkFailure(expired.client.account.get())).statusCode).toBe(401);
      expect(await deleteExpiredBootstrapOrganizations(ctx)).toEqual([]);

      await ctx.sql`
        UPDATE api_keys SET revoked_at = now() - make_interval(secs => ${revocationGraceSeconds + 1}) WHERE organization_id = ${expired.organizationId}`;
      expect(await deleteExpiredBootstrapOrganizations(ctx)).toEqual([expired.organizationId]);
      expect(await spanCounts(vigil, [expired.organizationId])).toEqual({});
    } finally {
      await vigil.stop();
    }
  });

  test("deletes the organization's trace export files", async () => {
    const vigil = await startTestVigil();
    try {
      const { ctx } = vigil;
      const expired = await claimForExpiry(vigil);
      // An unclaimed organization has no members, and exports go to members only: give it one.
      const email = `member-${expired.organizationId}@example.com`;
      const userId = `u${expired.organizationId.slice(1)}`;
      await ctx.sql`INSERT INTO users (id, email) VALUES (${userId}, ${email})`;
      await ctx.sql`INSERT INTO memberships (organization_id, user_id, role) VALUES (${expired.organizationId}, ${userId}, 'member')`;
      await ctx.sql`INSERT INTO email_confirmations (email, confirmed_at) VALUES (${email.toLowerCase()}, now())`;
      await expired.client.traces.export(expired.projectSlug, { traces: { by: "ids", ids: ["a".repeat(32)] }, recipient: email });
      const exportsDir = join(ctx.config.dataDir, "exports");
      const files = await eventually(async () => {
        const names = await readdir(exportsDir).catch(() => [] as string[]);
        return names.some((name) => name.endsWith(".csv")) ? names : undefined;
      }, "the export file");
      expect(files).toHaveLength(1);

      await expire(vigil, [expired.organizationId]);
      expect(await deleteExpiredBootstrapOrganizations(ctx, 0)).toEqual([expired.organizationId]);
      expect(await readdir(exportsDir)).toEqual([]);
    } finally {
      await vigil.stop();
    }
  });
});

describe("rate limiter", () => {
  test("counts hits per key in a shared fixed window", async () => {
    const { ctx } = await sharedVigil();
    const limiter = new RateLimiter(ctx.sql);
    const key = `test:${Math.random()}`;
    const results = await Promise.all(Array.from({ length: 5 }, () => limiter.hit(key, 3, 3600)));
    expect(results.filter((result) => result.allowed)).toHaveLength(3);
    for (const result of results) {
      expect(result.retryAfterSeconds).toBeGreaterThanOrEqual(1);
      expect(result.retryAfterSeconds).toBeLessThanOrEqual(3600);
    }
    expect((await limiter.hit(`${key}:other`, 3, 3600)).allowed).toBe(true);

    // A counter from a past window starts over.
    await ctx.sql`UPDATE rate_limits SET window_start = window_start - interval '2 hours' WHERE key = ${key}`;
    expect((await limiter.hit(key, 3, 3600)).allowed).toBe(true);
    await ctx.sql`UPDATE rate_limits SET window_start = now() - interval '3 days' WHERE key = ${key}`;
    expect(await limiter.purgeExpired()).toBeGreaterThanOrEqual(1);
    expect(await ctx.sql`SELECT 1 FROM rate_limits WHERE key = ${key}`).toHaveLength(0);
  });

  test("keys IPv4 by address and IPv6 by /64", () => {
    expect(clientAddressKey("203.0.113.7")).toBe("203.0.113.7");
    expect(clientAddressKey("::ffff:203.0.113.7")).toBe("203.0.113.7");
    expect(clientAddressKey("2001:db8:1:2:aaaa::1")).toBe("2001:db8:1:2::/64");
    expect(clientAddressKey("2001:db8:1:2:bbbb:cccc:dddd:eeee")).toBe("2001:db8:1:2::/64");
    expect(clientAddressKey("2001:db8::1")).toBe("2001:db8:0:0::/64");
    expect(clientAddressKey("::1")).toBe("0:0:0:0::/64");
    expect(clientAddressKey("fe80::1%eth0")).toBe("fe80:0:0:0::/64");
    expect(clientAddressKey(null)).toBe("unknown");
  });
});
