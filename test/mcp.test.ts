import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { bootstrapAccount, sharedVigil } from "./helpers";
import { bearer, connectAgent, signedInOwner } from "./oauth-helpers";

setDefaultTimeout(60_000);

async function mcpClient(url: string, token: string) {
  const client = new Client({ name: "vigil-test", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${url}/v1/mcp`), { requestInit: { headers: bearer(token) } }));
  return client;
}

const structured = (result: Awaited<ReturnType<Client["callTool"]>>) => {
  expect(result.isError).toBeFalsy();
  return result.structuredContent ?? JSON.parse((result.content as { text: string }[])[0]!.text);
};

describe("MCP endpoint", () => {
  test("without a valid credential: 401 pointing at the protected-resource metadata; CORS for browsers", async () => {
    const vigil = await sharedVigil();
    const missing = await fetch(`${vigil.url}/v1/mcp`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
    expect(missing.status).toBe(401);
    expect(missing.headers.get("www-authenticate")).toBe(`Bearer resource_metadata="${vigil.ctx.config.publicUrl}/.well-known/oauth-protected-resource/v1/mcp"`);
    expect(missing.headers.get("access-control-expose-headers")).toContain("WWW-Authenticate");
    const wrong = await fetch(`${vigil.url}/v1/mcp`, { method: "POST", headers: { ...bearer("vgloat_nope"), "content-type": "application/json" }, body: "{}" });
    expect(wrong.status).toBe(401);
    expect(wrong.headers.get("www-authenticate")).toContain('error="invalid_token"');
    const { account } = await bootstrapAccount(vigil.url);
    for (const method of ["GET", "DELETE"]) {
      const stateless = await fetch(`${vigil.url}/v1/mcp`, { method, headers: { ...bearer(account.apiKey), accept: "text/event-stream" } });
      expect([method, stateless.status, stateless.headers.get("allow")]).toEqual([method, 405, "POST, OPTIONS"]);
    }
    const preflight = await fetch(`${vigil.url}/v1/mcp`, { method: "OPTIONS", headers: { origin: "https://app.example.com", "access-control-request-method": "POST" } });
    expect(preflight.status).toBe(204);
    expect(preflight.headers.get("access-control-allow-headers")).toContain("mcp-protocol-version");
    expect(preflight.headers.get("access-control-expose-headers")).toBe("WWW-Authenticate, Mcp-Session-Id");
  });

  test("the tools are the main API: one per /v1 route of the OpenAPI document, named by operation id, with its schemas", async () => {
    const vigil = await sharedVigil();
    const { account } = await bootstrapAccount(vigil.url);
    const client = await mcpClient(vigil.url, account.apiKey);
    expect(client.getInstructions()).toContain("listProjects");
    const { tools } = await client.listTools();

    const document = (await (await fetch(`${vigil.url}/openapi.json`)).json()) as { paths: Record<string, Record<string, any>> };
    const notTools = ["post /v1/traces", "post /v1/account/bootstrap", "post /v1/mcp", "get /v1/mcp", "delete /v1/mcp"];
    const expected = Object.entries(document.paths)
      .filter(([path]) => path.startsWith("/v1/"))
      .flatMap(([path, item]) => Object.entries(item).filter(([method]) => !notTools.includes(`${method} ${path}`)).map(([, op]) => op.operationId as string));
    expect(tools.map((tool) => tool.name).sort()).toEqual(expected.sort());
    expect(new Set(expected).size).toBe(expected.length);
    for (const name of ["listProjects", "createProject", "getProject", "updateProject", "deleteProject", "listTraces", "getTraceAnalytics", "getTrace", "listTraceSpans", "getTraceSpan", "listTraceAnnotations", "getTraceAnnotation", "exportTraces", "createScore", "createAnnotation", "listApiKeys", "createApiKey", "listOAuthKeys", "revokeOAuthKey", "listMembers", "inviteMember", "getAccount"]) {
      expect(tools.map((tool) => tool.name)).toContain(name);
    }

    const listTraces = tools.find((tool) => tool.name === "listTraces")!;
    expect(listTraces.description).toContain("List traces");
    expect(listTraces.inputSchema.required).toContain("projectSlug");
    expect(Object.keys(listTraces.inputSchema.properties!)).toEqual(expect.arrayContaining(["projectSlug", "cursor", "limit", "sortBy", "sortDirection", "query", "filters"]));
    expect(listTraces.outputSchema?.properties).toHaveProperty("items");
    // Every documented request body reaches its tool: flattened fields, or `body` whole.
    for (const tool of tools) {
      const [method, path] = (tool.description!.match(/\((GET|POST|PUT|PATCH|DELETE) (\S+)\)$/) ?? []).slice(1) as [string, string];
      const body = document.paths[path]![method.toLowerCase()]!.requestBody?.content?.["application/json"]?.schema;
      if (!body) continue;
      const fields = body.properties ? Object.keys(body.properties) : ["body"];
      expect({ tool: tool.name, has: fields.every((field: string) => field in tool.inputSchema.properties! || "body" in tool.inputSchema.properties!) }).toEqual({ tool: tool.name, has: true });
    }
  });

  test("a sample of tools return what REST returns, errors are isError with the {error} text", async () => {
    const vigil = await sharedVigil();
    const { account, client: rest } = await bootstrapAccount(vigil.url);
    const client = await mcpClient(vigil.url, account.apiKey);
    const get = async (path: string) => (await fetch(`${vigil.url}${path}`, { headers: bearer(account.apiKey) })).json();

    expect(structured(await client.callTool({ name: "listProjects", arguments: {} }))).toEqual(await get("/v1/projects"));
    expect(structured(await client.callTool({ name: "getProject", arguments: { projectSlug: account.projectSlug } }))).toEqual(await get(`/v1/projects/${account.projectSlug}`));
    expect(structured(await client.callTool({ name: "getAccount", arguments: {} }))).toEqual(await get("/v1/account"));
    expect(structured(await client.callTool({ name: "listApiKeys", arguments: {} }))).toEqual(await get("/v1/api-keys"));

    const created = structured(await client.callTool({ name: "createProject", arguments: { name: "Made by an agent" } }));
    expect(created.name).toBe("Made by an agent");
    expect((await rest.projects.list()).items.map((project) => project.slug)).toContain(created.slug);
    const traces = structured(await client.callTool({ name: "listTraces", arguments: { projectSlug: account.projectSlug, limit: 5 } }));
    expect(traces).toEqual(await (await fetch(`${vigil.url}/v1/projects/${account.projectSlug}/traces/list`, { method: "POST", headers: { ...bearer(account.apiKey), "content-type": "application/json" }, body: '{"limit":5}' })).json());

    const missing = await client.callTool({ name: "getProject", arguments: { projectSlug: "no-such-project" } });
    expect(missing.isError).toBe(true);
    expect((missing.content as { text: string }[])[0]!.text).toBe("Project not found");
    const invalid = await client.callTool({ name: "createProject", arguments: { name: "" } });
    expect(invalid.isError).toBe(true);
    expect((invalid.content as { text: string }[])[0]!.text).toContain("name");
    const deleted = await client.callTool({ name: "deleteProject", arguments: { projectSlug: created.slug } });
    expect(deleted.isError).toBeFalsy();
    expect((await fetch(`${vigil.url}/v1/projects/${created.slug}`, { headers: bearer(account.apiKey) })).status).toBe(404);
  });

  test("an OAuth access token works on MCP as its user, in the granted organization only", async () => {
    const vigil = await sharedVigil();
    const owner = await signedInOwner(vigil, "MCP Org");
    const other = await signedInOwner(vigil, "Not Granted");
    const { tokens } = await connectAgent(vigil, owner.web);
    const client = await mcpClient(vigil.url, String(tokens.access_token));
    const me = structured(await client.callTool({ name: "getAccount", arguments: {} }));
    expect(me.user.email).toBe(owner.email);
    expect(me.organization.id).toBe(owner.organizationId);
    const foreign = await client.callTool({ name: "getProject", arguments: { projectSlug: other.projectSlug } });
    expect(foreign.isError).toBe(true);
    const aliased = await client.callTool({ name: "listOrganizationProjects", arguments: { organizationId: other.organizationId } });
    expect(aliased.isError).toBe(true);
  });
});
