import { createHash, randomBytes } from "node:crypto";
import type { Vigil } from "../src/server";
import { bootstrapAccount } from "./helpers";
import { WebClient } from "./web-client";

export const pkce = () => {
  const verifier = randomBytes(32).toString("base64url");
  return { verifier, challenge: createHash("sha256").update(verifier).digest("base64url") };
};

/**
 * A claimed organization whose owner is signed in on a cookie-keeping client. The client talks to
 * PUBLIC_URL's host (localhost), as a browser following Vigil's links would.
 */
export async function signedInOwner(vigil: Vigil, organizationName = "Owner Org") {
  const email = `owner-${Math.random().toString(36).slice(2, 10)}@example.com`;
  const password = "owner password 1";
  const { account, client } = await bootstrapAccount(vigil.url, { organizationName, projectName: `Project ${email.slice(6, 14)}` });
  const web = new WebClient(vigil.ctx.config.publicUrl);
  await web.get(account.claimUrl);
  const claimed = await web.post(account.claimUrl, { email, password, name: "Owner" });
  if (claimed.status !== 303) throw new Error(`claim failed: ${claimed.status}`);
  const { organization } = await client.account.get();
  return { web, email, password, account, apiClient: client, organizationId: organization.id, projectSlug: account.projectSlug };
}

export async function registerClient(baseUrl: string, redirectUri = "http://127.0.0.1:9/callback", extra: Record<string, unknown> = {}) {
  const response = await fetch(`${baseUrl}/api/auth/mcp/register`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ client_name: "Test Agent", redirect_uris: [redirectUri], grant_types: ["authorization_code", "refresh_token"], response_types: ["code"], token_endpoint_auth_method: "none", ...extra }),
  });
  return { response, body: (await response.json()) as Record<string, unknown> };
}

/** Runs authorize → consent (allow, first organization unless named) and returns the redirect's query. */
export async function authorize(
  web: WebClient,
  params: Record<string, string>,
  decision: { allow?: boolean; organizationId?: string } = {},
): Promise<URLSearchParams> {
  const page = await web.get(`/api/auth/mcp/authorize?${new URLSearchParams(params)}`);
  if (page.status !== 200) throw new Error(`authorize page: ${page.status} ${page.headers.get("location")}`);
  const organizationId = decision.organizationId ?? web.lastHtml.match(/<option value="([^"]+)"[^>]*selected/)?.[1] ?? "";
  const answer = await web.post("/api/auth/mcp/authorize", { ...params, organization_id: organizationId, decision: decision.allow === false ? "deny" : "allow" });
  if (answer.status !== 303) throw new Error(`consent: ${answer.status} ${await answer.text()}`);
  return new URL(answer.headers.get("location")!).searchParams;
}

export async function token(baseUrl: string, fields: Record<string, string>) {
  const response = await fetch(`${baseUrl}/api/auth/mcp/token`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams(fields).toString(),
  });
  return { response, body: (await response.json()) as Record<string, string | number | undefined> };
}

/** Registration, consent and code exchange in one: the tokens of a fresh grant. */
export async function connectAgent(vigil: Vigil, web: WebClient, scope = "openid profile email offline_access", organizationId?: string) {
  const redirectUri = "http://127.0.0.1:9/callback";
  const { body: client } = await registerClient(vigil.url, redirectUri);
  const { verifier, challenge } = pkce();
  const query = await authorize(
    web,
    { response_type: "code", client_id: client.client_id as string, redirect_uri: redirectUri, scope, state: "s1", code_challenge: challenge, code_challenge_method: "S256" },
    { organizationId },
  );
  const { body } = await token(vigil.url, {
    grant_type: "authorization_code",
    code: query.get("code")!,
    redirect_uri: redirectUri,
    client_id: client.client_id as string,
    code_verifier: verifier,
  });
  return { clientId: client.client_id as string, redirectUri, tokens: body };
}

export const bearer = (accessToken: unknown) => ({ authorization: `Bearer ${accessToken}` });
