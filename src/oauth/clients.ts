import { lookup } from "node:dns/promises";
import { BlockList, isIP } from "node:net";
import type { Sql } from "../db/postgres";
import { newId } from "../lib/ids";

/** A client as the authorization server knows it: registered, or described by its metadata document. */
export interface OAuthClient {
  id: string;
  name: string | null;
  redirectUris: string[];
  fromMetadataDocument: boolean;
}

export class ClientMetadataError extends Error {
  constructor(
    readonly code: "invalid_redirect_uri" | "invalid_client_metadata",
    message: string,
  ) {
    super(message);
  }
}

const loopbackHosts = new Set(["localhost", "127.0.0.1", "[::1]"]);
const forbiddenSchemes = new Set(["javascript:", "data:", "vbscript:", "file:", "about:", "blob:"]);

/**
 * Redirect URIs a public client may register: https, http on a loopback host (native apps, RFC 8252
 * §7.3), or a private-use scheme (`com.example.app:/callback`, §7.1). Never a fragment, never a
 * scheme a browser would run or read locally.
 */
export function checkRedirectUri(raw: unknown): string {
  if (typeof raw !== "string" || raw.length > 2000) throw new ClientMetadataError("invalid_redirect_uri", "redirect_uris: each must be a URI of at most 2000 characters");
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new ClientMetadataError("invalid_redirect_uri", `redirect_uris: not a valid URI: ${raw.slice(0, 200)}`);
  }
  if (raw.includes("#")) throw new ClientMetadataError("invalid_redirect_uri", "redirect_uris: must not contain a fragment");
  if (forbiddenSchemes.has(url.protocol)) throw new ClientMetadataError("invalid_redirect_uri", `redirect_uris: the ${url.protocol} scheme is not allowed`);
  if (url.protocol === "https:") return raw;
  if (url.protocol === "http:") {
    if (loopbackHosts.has(url.hostname)) return raw;
    throw new ClientMetadataError("invalid_redirect_uri", "redirect_uris: http is allowed only on a loopback host; use https");
  }
  if (/^[a-z][a-z0-9+.-]*:$/.test(url.protocol) && !url.host) return raw;
  throw new ClientMetadataError("invalid_redirect_uri", `redirect_uris: not an https, loopback or private-use URI: ${raw.slice(0, 200)}`);
}

export interface RegistrationRequest {
  redirect_uris?: unknown;
  client_name?: unknown;
  token_endpoint_auth_method?: unknown;
  grant_types?: unknown;
  response_types?: unknown;
  scope?: unknown;
  logo_uri?: unknown;
}

/** Validates an RFC 7591 registration of a public client. */
export function checkRegistration(body: RegistrationRequest) {
  if (!Array.isArray(body.redirect_uris) || body.redirect_uris.length === 0 || body.redirect_uris.length > 20) {
    throw new ClientMetadataError("invalid_redirect_uri", "redirect_uris: 1 to 20 URIs are required");
  }
  const redirectUris = body.redirect_uris.map(checkRedirectUri);
  const method = body.token_endpoint_auth_method ?? "none";
  if (method !== "none") throw new ClientMetadataError("invalid_client_metadata", "token_endpoint_auth_method: only public clients (none) are supported");
  const grantTypes = body.grant_types ?? ["authorization_code", "refresh_token"];
  if (!Array.isArray(grantTypes) || grantTypes.some((grant) => grant !== "authorization_code" && grant !== "refresh_token")) {
    throw new ClientMetadataError("invalid_client_metadata", "grant_types: only authorization_code and refresh_token are supported");
  }
  const responseTypes = body.response_types ?? ["code"];
  if (!Array.isArray(responseTypes) || responseTypes.some((type) => type !== "code")) {
    throw new ClientMetadataError("invalid_client_metadata", "response_types: only code is supported");
  }
  if (body.client_name !== undefined && (typeof body.client_name !== "string" || body.client_name.length > 200)) {
    throw new ClientMetadataError("invalid_client_metadata", "client_name: must be a string of at most 200 characters");
  }
  if (body.scope !== undefined && typeof body.scope !== "string") throw new ClientMetadataError("invalid_client_metadata", "scope: must be a string");
  const logo = typeof body.logo_uri === "string" && /^https:\/\//.test(body.logo_uri) ? body.logo_uri : null;
  return {
    redirectUris,
    name: (body.client_name as string | undefined)?.trim() || null,
    grantTypes: grantTypes as string[],
    responseTypes: responseTypes as string[],
    scope: body.scope as string | undefined,
    logo,
  };
}

/** Addresses a metadata document may not be fetched from: private networks (loopback stays allowed, for local clients). */
const privateRanges = new BlockList();
for (const [address, prefix, type] of [
  ["10.0.0.0", 8, "ipv4"],
  ["172.16.0.0", 12, "ipv4"],
  ["192.168.0.0", 16, "ipv4"],
  ["169.254.0.0", 16, "ipv4"],
  ["100.64.0.0", 10, "ipv4"],
  ["0.0.0.0", 8, "ipv4"],
  ["fc00::", 7, "ipv6"],
  ["fe80::", 10, "ipv6"],
] as const) {
  privateRanges.addSubnet(address, prefix, type);
}
const isLoopbackAddress = (address: string) => address === "::1" || address.startsWith("127.");

const documentTimeoutMs = 5_000;
const documentMaxBytes = 64 * 1024;
const documentCacheMs = 5 * 60_000;

/** A client_id that names a Client ID Metadata Document: an https URL with a path (http only on loopback). */
export function isMetadataDocumentId(clientId: string): boolean {
  if (!/^https?:\/\//.test(clientId)) return false;
  try {
    const url = new URL(clientId);
    if (url.hash || url.username || url.password || url.pathname === "/") return false;
    return url.protocol === "https:" || loopbackHosts.has(url.hostname);
  } catch {
    return false;
  }
}

/** Registered clients and clients known by their metadata document, fetched safely and cached. */
export class OAuthClients {
  private documents = new Map<string, { client: OAuthClient | null; expiresAt: number }>();

  constructor(private sql: Sql) {}

  async register(registration: ReturnType<typeof checkRegistration>): Promise<{ id: string; issuedAt: number }> {
    const id = newId();
    const [row] = await this.sql<{ issued_at: number }[]>`
      INSERT INTO oauth_clients (id, name, icon, redirect_uris, metadata)
      VALUES (${id}, ${registration.name}, ${registration.logo}, ${registration.redirectUris},
        ${this.sql.json({ grant_types: registration.grantTypes, response_types: registration.responseTypes, scope: registration.scope ?? null })})
      RETURNING extract(epoch FROM created_at)::bigint::int AS issued_at`;
    return { id, issuedAt: row!.issued_at };
  }

  /** The client, or null when unknown (or its metadata document is unusable). */
  async find(clientId: string): Promise<OAuthClient | null> {
    if (isMetadataDocumentId(clientId)) return this.fromMetadataDocument(clientId);
    const [row] = await this.sql<{ id: string; name: string | null; redirect_uris: string[] }[]>`
      SELECT id, name, redirect_uris FROM oauth_clients WHERE id = ${clientId} AND NOT from_metadata_document`;
    return row ? { id: row.id, name: row.name, redirectUris: row.redirect_uris, fromMetadataDocument: false } : null;
  }

  private async fromMetadataDocument(url: string): Promise<OAuthClient | null> {
    const cached = this.documents.get(url);
    if (cached && cached.expiresAt > Date.now()) return cached.client;
    const client = await fetchMetadataDocument(url).catch(() => null);
    if (client) {
      // Grants reference the client row, so a document client is recorded like a registered one.
      await this.sql`
        INSERT INTO oauth_clients (id, name, redirect_uris, from_metadata_document) VALUES (${client.id}, ${client.name}, ${client.redirectUris}, true)
        ON CONFLICT (id) DO UPDATE SET name = excluded.name, redirect_uris = excluded.redirect_uris`;
    }
    if (this.documents.size > 1000) this.documents.clear();
    this.documents.set(url, { client, expiresAt: Date.now() + documentCacheMs });
    return client;
  }

  async markAuthorized(clientId: string): Promise<void> {
    await this.sql`UPDATE oauth_clients SET authorized_at = coalesce(authorized_at, now()) WHERE id = ${clientId}`;
  }
}

/**
 * Fetches a Client ID Metadata Document: short timeout, size cap, no redirects, and never from a
 * private-network address (the host is resolved first), so a client_id cannot probe the internal network.
 */
async function fetchMetadataDocument(clientId: string): Promise<OAuthClient | null> {
  const url = new URL(clientId);
  const host = url.hostname.replace(/^\[|\]$/g, "");
  const addresses = isIP(host) ? [host] : (await lookup(host, { all: true })).map((entry) => entry.address);
  for (const address of addresses) {
    if (isLoopbackAddress(address)) continue;
    if (privateRanges.check(address, isIP(address) === 6 ? "ipv6" : "ipv4")) return null;
  }
  const response = await fetch(url, { redirect: "manual", signal: AbortSignal.timeout(documentTimeoutMs), headers: { accept: "application/json" } });
  if (response.status !== 200 || !response.body) return null;
  const reader = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > documentMaxBytes) {
      await reader.cancel();
      return null;
    }
    chunks.push(value);
  }
  const document = JSON.parse(Buffer.concat(chunks).toString("utf8")) as RegistrationRequest & { client_id?: unknown };
  if (document.client_id !== clientId) return null;
  const registration = checkRegistration({ ...document, token_endpoint_auth_method: document.token_endpoint_auth_method ?? "none" });
  return { id: clientId, name: registration.name, redirectUris: registration.redirectUris, fromMetadataDocument: true };
}
