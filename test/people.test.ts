import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { bootstrapAccount, sharedVigil, startTestVigil } from "./helpers";
import { bearer, connectAgent, signedInOwner } from "./oauth-helpers";
import { sdkFailure } from "./sdk";
import { linkIn, outboxMail, WebClient } from "./web-client";

setDefaultTimeout(60_000);

describe("sessions", () => {
  test("the session cookie is HttpOnly, SameSite=Lax, Secure only under an https PUBLIC_URL; auth pages are not framable, cached or referred", async () => {
    const vigil = await sharedVigil();
    const { web } = await signedInOwner(vigil);
    const session = web.setCookies.find((cookie) => cookie.startsWith("vigil_session="))!;
    expect(session).toContain("HttpOnly");
    expect(session).toContain("SameSite=Lax");
    expect(session).toContain("Path=/");
    expect(session).toMatch(/Max-Age=\d+/);
    expect(session).not.toContain("Secure");
    for (const path of ["/login", "/password/forgot", "/settings/keys"]) {
      const page = await web.get(path);
      expect(page.headers.get("content-security-policy")).toContain("frame-ancestors 'none'");
      expect(page.headers.get("x-frame-options")).toBe("DENY");
      expect(page.headers.get("cache-control")).toBe("no-store");
      expect(page.headers.get("referrer-policy")).toBe("no-referrer");
    }

    const secure = await startTestVigil({ PUBLIC_URL: "https://vigil.example.com" });
    try {
      const web = new WebClient(secure.url);
      await web.get("/login");
      expect(web.setCookies.find((cookie) => cookie.startsWith("vigil_csrf="))).toContain("Secure");
    } finally {
      await secure.stop();
    }
  });

  test("sign-in, wrong password, sign-out, and an expired session", async () => {
    const vigil = await sharedVigil();
    const { email, password } = await signedInOwner(vigil);
    const web = new WebClient(vigil.url);
    await web.get("/login");
    const wrong = await web.post("/login", { email, password: "not it at all" });
    expect(wrong.status).toBe(400);
    expect(web.lastHtml).toContain("Wrong email or password");
    expect(web.cookies.has("vigil_session")).toBe(false);
    const open = await web.post("/login", { email, password, next: "//evil.example.com/x" });
    expect(open.headers.get("location")).toBe("/settings/keys");
    expect((await web.get("/settings/keys")).status).toBe(200);

    const cookie = web.cookies.get("vigil_session")!;
    await web.get("/logout");
    expect((await web.post("/logout", {})).headers.get("location")).toBe("/login");
    const stale = new WebClient(vigil.url);
    stale.cookies.set("vigil_session", cookie);
    expect((await stale.get("/settings/keys")).headers.get("location")).toBe("/login?next=%2Fsettings%2Fkeys");

    const again = new WebClient(vigil.url);
    await again.get("/login");
    await again.post("/login", { email, password });
    expect((await again.get("/settings/members")).status).toBe(200);
    await vigil.ctx.sql`UPDATE sessions SET expires_at = now() - interval '1 second' WHERE token_hash = encode(sha256(${again.cookies.get("vigil_session")!}::bytea), 'hex')`;
    const expired = await again.get("/settings/members");
    expect(expired.status).toBe(303);
    expect(expired.headers.get("location")).toBe("/login?next=%2Fsettings%2Fmembers");
  });

  test("sign-in attempts are limited per account", async () => {
    const vigil = await sharedVigil();
    const { email } = await signedInOwner(vigil);
    const web = new WebClient(vigil.url);
    await web.get("/login");
    const statuses: number[] = [];
    for (let i = 0; i < 11; i++) statuses.push((await web.post("/login", { email, password: `guess ${i}` })).status);
    expect(statuses.slice(0, 10)).toEqual(Array(10).fill(400));
    expect(statuses[10]).toBe(429);
  }, 180_000); // argon2 hashes and verifies a dozen passwords: slow on a loaded machine

  test("sign-in attempts are limited per client address across accounts, even with the right password", async () => {
    const vigil = await startTestVigil({ SIGN_IN_ADDRESS_RATE_LIMIT: "3", TRUSTED_PROXIES: "127.0.0.1,::1" });
    try {
      const { email, password } = await signedInOwner(vigil);
      const web = new WebClient(vigil.url);
      await web.get("/login");
      const from = (address: string) => ({ "x-forwarded-for": address });
      // Three different accounts, so the per-account limit never applies.
      for (let i = 0; i < 3; i++) expect((await web.post("/login", { email: `nobody-${i}@example.com`, password: "wrong guess" }, from("203.0.113.9"))).status).toBe(400);
      const refused = await web.post("/login", { email, password }, from("203.0.113.9"));
      expect(refused.status).toBe(429);
      expect(Number(refused.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
      expect(Number(refused.headers.get("retry-after"))).toBeLessThanOrEqual(900);
      expect(web.cookies.has("vigil_session")).toBe(false);
      const elsewhere = await web.post("/login", { email, password }, from("198.51.100.4"));
      expect(elsewhere.status).toBe(303);
      expect(web.cookies.has("vigil_session")).toBe(true);
    } finally {
      await vigil.stop();
    }
  }, 180_000);

  test("password reset: a single-use mailed link sets the password and ends the old sessions", async () => {
    const vigil = await sharedVigil();
    const { email, password, web: oldSession } = await signedInOwner(vigil);
    const web = new WebClient(vigil.url);
    await web.get("/password/forgot");
    expect((await web.post("/password/forgot", { email })).status).toBe(200);
    const link = linkIn(await outboxMail(vigil.ctx.config.dataDir, email, /Reset your Vigil password/), "/password/reset/").replace(vigil.ctx.config.publicUrl, vigil.url);
    expect(link).toContain("/password/reset/vglreset_");
    expect((await web.get(link)).status).toBe(200);
    expect((await web.post(link, { password: "short" })).status).toBe(400);
    expect((await web.post(link, { password: "a brand new password" })).status).toBe(303);
    expect((await web.get(link)).status).toBe(410);
    expect((await oldSession.get("/settings/keys")).status).toBe(303);

    const login = new WebClient(vigil.url);
    await login.get("/login");
    expect((await login.post("/login", { email, password })).status).toBe(400);
    expect((await login.post("/login", { email, password: "a brand new password" })).status).toBe(303);
    // An unknown address gets the same answer and no mail.
    expect((await web.post("/password/forgot", { email: "nobody-here@example.com" })).status).toBe(200);
  }, 180_000); // argon2 hashes and verifies a dozen passwords: slow on a loaded machine

  test("every form refuses a post without its CSRF token, or marked cross-site, and changes nothing", async () => {
    const vigil = await sharedVigil();
    const { web, apiClient, organizationId } = await signedInOwner(vigil);
    await web.get("/settings/keys");
    const keyId = (await apiClient.apiKeys.list()).apiKeys[0]!.id;
    const memberId = (await apiClient.members.list()).members[0]!.id;
    const forms: [string, Record<string, string>][] = [
      ["/login", { email: "a@example.com", password: "whatever1" }],
      ["/logout", {}],
      ["/password/forgot", { email: "a@example.com" }],
      ["/password/reset/vglreset_x", { password: "whatever12" }],
      ["/claim/vglclaim_x", { email: "a@example.com", password: "whatever12" }],
      ["/invitations/vglinvite_x", { password: "whatever12" }],
      ["/settings/organization", { organizationId }],
      ["/settings/keys", { name: "sneaky" }],
      [`/settings/keys/${keyId}/rename`, { name: "sneaky" }],
      [`/settings/keys/${keyId}/revoke`, {}],
      ["/settings/oauth-keys/nope/revoke", {}],
      ["/settings/members", { email: "sneaky@example.com" }],
      [`/settings/members/${memberId}/role`, { role: "member" }],
      [`/settings/members/${memberId}/remove`, {}],
      ["/api/auth/mcp/authorize", { decision: "allow" }],
    ];
    for (const [path, fields] of forms) {
      expect({ path, status: (await web.post(path, { ...fields, csrf: null })).status }).toEqual({ path, status: 403 });
      expect({ path, status: (await web.post(path, { ...fields, csrf: "x".repeat(40) })).status }).toEqual({ path, status: 403 });
      expect({ path, status: (await web.post(path, fields, { "sec-fetch-site": "cross-site" })).status }).toEqual({ path, status: 403 });
    }
    const keys = (await apiClient.apiKeys.list()).apiKeys;
    expect(keys.map((key) => [key.name, key.deletedAt])).toEqual([["Bootstrap key", null]]);
    expect((await apiClient.members.list()).members.map((member) => [member.role, member.status])).toEqual([["owner", "active"]]);
    expect((await web.get("/settings/keys")).status).toBe(200);
  });
});

describe("console pages", () => {
  test("keys: create (token shown once, escaped), rename, revoke", async () => {
    const vigil = await sharedVigil();
    const { web, apiClient } = await signedInOwner(vigil);
    await web.get("/settings/keys");
    const created = await web.post("/settings/keys", { name: '"><script>alert(1)</script>' });
    expect(created.status).toBe(200);
    // Text is escaped; inside a quoted attribute only the quote matters, and it is escaped.
    expect(web.lastHtml.replace(/="[^"]*"/g, '=""')).not.toContain("<script>alert");
    expect(web.lastHtml).toContain("&lt;script&gt;alert(1)&lt;/script&gt;");
    expect(web.lastHtml).toContain('value="&#34;><script>');
    const token = web.lastHtml.match(/<code id="new-token">([^<]+)<\/code>/)![1]!;
    expect((await fetch(`${vigil.url}/v1/account`, { headers: bearer(token) })).status).toBe(200);
    expect((await web.get("/settings/keys")).status).toBe(200);
    expect(web.lastHtml).not.toContain(token);

    const key = (await apiClient.apiKeys.list()).apiKeys.find((k) => k.name.includes("<script>"))!;
    expect((await web.post(`/settings/keys/${key.id}/rename`, { name: "renamed" })).status).toBe(303);
    expect((await apiClient.apiKeys.get(key.id)).name).toBe("renamed");
    await web.get("/settings/keys");
    expect((await web.post(`/settings/keys/${key.id}/revoke`, {})).status).toBe(303);
    expect((await fetch(`${vigil.url}/v1/account`, { headers: bearer(token) })).status).toBe(401);
  });
});

describe("members", () => {
  test("invite by email, accept through the link, change role; the last owner stays", async () => {
    const vigil = await sharedVigil();
    const { apiClient, web: ownerWeb, organizationId } = await signedInOwner(vigil, "Team");
    const email = `invitee-${Math.random().toString(36).slice(2, 8)}@example.com`;
    const invited = await apiClient.members.invite({ email, role: "admin" });
    expect(invited).toMatchObject({ status: "invited", email, role: "admin", organizationId, userId: null, name: null, image: null, inviterId: "API" });
    expect((await apiClient.members.list()).members.map((m) => m.status)).toEqual(["active", "invited"]);
    expect((await sdkFailure(apiClient.members.invite({ email: "not an email" }))).statusCode).toBe(400);

    const link = linkIn(await outboxMail(vigil.ctx.config.dataDir, email, /invited to Team/), "/invitations/").replace(vigil.ctx.config.publicUrl, vigil.url);
    const web = new WebClient(vigil.url);
    expect((await web.get(link)).status).toBe(200);
    expect(web.lastHtml).toContain("Team");
    expect((await web.post(link, { password: "invitee password", name: "Ivy" })).headers.get("location")).toBe("/settings/members");
    expect((await web.get(link)).status).toBe(410);
    const members = (await apiClient.members.list()).members;
    expect(members.map((m) => [m.email, m.role, m.status])).toEqual([
      [expect.any(String), "owner", "active"],
      [email, "admin", "active"],
    ]);
    const ivy = members[1]!;
    expect(await apiClient.members.get(ivy.id)).toMatchObject({ status: "active", name: "Ivy", userId: expect.any(String) });

    // The admin signs in and connects an agent; as an admin it can manage members but not owners.
    const ivyAgent = await connectAgent(vigil, web);
    const asIvy = (path: string, init: RequestInit = {}) => fetch(`${vigil.url}${path}`, { ...init, headers: { ...bearer(ivyAgent.tokens.access_token), "content-type": "application/json" } });
    const owner = members[0]!;
    expect((await asIvy(`/v1/members/${owner.id}`, { method: "DELETE" })).status).toBe(403);
    expect((await asIvy("/v1/members", { method: "POST", body: JSON.stringify({ email: "x@example.com", role: "owner" }) })).status).toBe(403);

    // The last owner can be neither removed nor demoted.
    expect((await sdkFailure(apiClient.members.remove(owner.id))).statusCode).toBe(409);
    expect((await sdkFailure(apiClient.members.update(owner.id, { role: "admin" }))).statusCode).toBe(409);
    expect((await apiClient.members.update(ivy.id, { role: "member" })).role).toBe("member");
    expect((await asIvy("/v1/members", { method: "POST", body: JSON.stringify({ email: "y@example.com" }) })).status).toBe(403);

    // Removed, the member's agent stops working at once.
    await ownerWeb.get("/settings/members");
    expect((await ownerWeb.post(`/settings/members/${ivy.id}/remove`, {})).status).toBe(303);
    expect((await asIvy("/v1/account")).status).toBe(401);
    expect((await apiClient.members.list()).members).toHaveLength(1);
  });

  test("the agent_auth claim endpoint mails a new claim link to a temporary organization", async () => {
    const vigil = await sharedVigil();
    const { account, client } = await bootstrapAccount(vigil.url);
    const email = `late-claimer-${Math.random().toString(36).slice(2, 8)}@example.com`;
    const response = await fetch(`${vigil.url}/v1/account/claim`, { method: "POST", headers: { ...bearer(account.apiKey), "content-type": "application/json" }, body: JSON.stringify({ email }) });
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ claimEmail: email, claimExpiresAt: account.claimExpiresAt });
    const link = linkIn(await outboxMail(vigil.ctx.config.dataDir, email, /Claim your Vigil organization/), "/claim/").replace(vigil.ctx.config.publicUrl, vigil.url);
    const web = new WebClient(vigil.url);
    expect((await web.get(account.claimUrl.replace(vigil.ctx.config.publicUrl, vigil.url))).status).toBe(404);
    expect((await web.get(link)).status).toBe(200);
    expect((await web.post(link, { email, password: "claimer password" })).status).toBe(303);
    const again = await fetch(`${vigil.url}/v1/account/claim`, { method: "POST", headers: { ...bearer(account.apiKey), "content-type": "application/json" }, body: JSON.stringify({ email }) });
    expect(again.status).toBe(400);
    expect((await client.account.get()).organization.id).toEqual(expect.any(String));
  });
});
