import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js";
import { CallToolRequestSchema, ListToolsRequestSchema, type CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { Elysia } from "elysia";
import type { Context } from "../context";
import { HttpError } from "../lib/errors";
import { generateTools, toolRequest, type GeneratedTool, type OpenApiDocument } from "./tools";

const instructions = `Vigil is an observability service for AI agents: agents send OpenTelemetry traces, and Vigil stores their spans (LLM calls, tool calls, messages, tokens, cost) per project so people and agents can search, read, score and annotate them.
Every tool is one route of Vigil's REST API, acting in the organization you were granted.
To start: listProjects to find a project (use its slug as projectSlug), listTraces to see recent or matching traces (query searches the messages; filters narrow them), getTrace and listTraceSpans / getTraceSpan to read one, then createAnnotation (or createScore) to record what went right or wrong. getTraceAnalytics summarizes a period. getAccount says who you are acting as.`;

/** Answers on the API host, for browser-based MCP clients. */
const corsHeaders = {
  "access-control-allow-origin": "*",
  "access-control-allow-methods": "GET, POST, DELETE, OPTIONS",
  "access-control-allow-headers": "authorization, content-type, accept, mcp-session-id, mcp-protocol-version, last-event-id",
  "access-control-expose-headers": "WWW-Authenticate, Mcp-Session-Id",
  "access-control-max-age": "86400",
};

/** The request the API handler sees for a tool call: same credential, same validation, same handler. */
type ApiHandler = (request: Request) => Promise<Response>;

async function callTool(tool: GeneratedTool, args: Record<string, unknown>, authorization: string, handle: ApiHandler): Promise<CallToolResult> {
  let request: Request;
  try {
    request = toolRequest(tool, args, "http://vigil.internal", authorization);
  } catch (error) {
    return { isError: true, content: [{ type: "text", text: (error as Error).message }] };
  }
  const response = await handle(request);
  const text = await response.text();
  let data: unknown = text;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {}
  if (!response.ok) {
    const message = (data as { error?: unknown })?.error;
    return { isError: true, content: [{ type: "text", text: typeof message === "string" ? message : `HTTP ${response.status}` }] };
  }
  if (response.status === 204 || data === null) return { content: [{ type: "text", text: "Done." }] };
  return {
    content: [{ type: "text", text: typeof data === "string" ? data : JSON.stringify(data) }],
    ...(tool.outputSchema && data && typeof data === "object" && !Array.isArray(data) ? { structuredContent: data as Record<string, unknown> } : {}),
  };
}

/**
 * `/v1/mcp`: Streamable HTTP, stateless (a server and transport per request, no session id). The
 * tools are generated from the app's own OpenAPI document on first use, so a route added to the API
 * is a tool without any change here.
 */
export function mcpModule(ctx: Context, api: ApiHandler) {
  const { auth, config } = ctx;
  let tools: Promise<Map<string, GeneratedTool>> | null = null;
  const loadTools = () =>
    (tools ??= api(new Request("http://vigil.internal/openapi.json"))
      .then((response) => response.json() as Promise<OpenApiDocument>)
      .then((document) => new Map(generateTools(document).map((tool) => [tool.name, tool])))
      .catch((error) => {
        tools = null;
        throw error;
      }));

  const unauthorized = (message: string, hadToken: boolean) =>
    new Response(JSON.stringify({ error: message }), {
      status: 401,
      headers: {
        ...corsHeaders,
        "content-type": "application/json",
        "www-authenticate": `Bearer${hadToken ? ' error="invalid_token",' : ""} resource_metadata="${config.publicUrl}/.well-known/oauth-protected-resource/v1/mcp"`,
      },
    });

  async function serve(request: Request): Promise<Response> {
    const authorization = request.headers.get("authorization");
    try {
      await auth.fromHeader(authorization);
    } catch (error) {
      if (error instanceof HttpError && error.status === 401) return unauthorized(error.message, Boolean(authorization));
      throw error;
    }
    // Stateless: no session to delete and no standalone stream to open (one would stay open forever
    // and hold graceful shutdown); the transport spec allows 405 for both.
    if (request.method !== "POST") {
      return new Response(JSON.stringify({ error: "This MCP endpoint is stateless: POST only" }), {
        status: 405,
        headers: { ...corsHeaders, allow: "POST, OPTIONS", "content-type": "application/json" },
      });
    }
    const byName = await loadTools();
    const server = new Server({ name: "vigil", version: "1.0.0" }, { capabilities: { tools: { listChanged: false } }, instructions });
    server.setRequestHandler(ListToolsRequestSchema, async () => ({
      tools: [...byName.values()].map(({ name, title, description, inputSchema, outputSchema, annotations }) => ({
        name,
        title,
        description,
        inputSchema,
        ...(outputSchema ? { outputSchema } : {}),
        annotations: { title, ...annotations },
      })),
    }));
    server.setRequestHandler(CallToolRequestSchema, async ({ params }) => {
      const tool = byName.get(params.name);
      if (!tool) return { isError: true, content: [{ type: "text", text: `Unknown tool: ${params.name}` }] };
      return callTool(tool, (params.arguments ?? {}) as Record<string, unknown>, authorization!, api);
    });
    const transport = new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    await server.connect(transport);
    const response = await transport.handleRequest(request);
    const headers = new Headers(response.headers);
    for (const [name, value] of Object.entries(corsHeaders)) headers.set(name, value);
    return new Response(response.body, { status: response.status, statusText: response.statusText, headers });
  }

  const detail = { summary: "MCP endpoint (Streamable HTTP)", description: "Model Context Protocol over Streamable HTTP, stateless. Bearer API key or OAuth access token." };
  return new Elysia({ name: "mcp", detail: { tags: ["mcp"] } })
    .options("/v1/mcp", () => new Response(null, { status: 204, headers: corsHeaders }), { detail: { hide: true } })
    .post("/v1/mcp", ({ request }) => serve(request), { parse: "none", detail })
    .get("/v1/mcp", ({ request }) => serve(request), { detail })
    .delete("/v1/mcp", ({ request }) => serve(request), { detail });
}
