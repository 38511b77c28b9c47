/**
 * MCP tools generated from the main API's OpenAPI document: one tool per route, named by its
 * operation id. Path, query and body fields flatten into one input object (a body that is not a
 * plain object, or whose fields collide with a parameter, stays whole under `body`).
 */

type Schema = Record<string, any>;

interface Operation {
  operationId?: string;
  summary?: string;
  description?: string;
  parameters?: { name: string; in: string; required?: boolean; schema?: Schema; description?: string }[];
  requestBody?: { required?: boolean; content?: Record<string, { schema?: Schema }> };
  responses?: Record<string, { content?: Record<string, { schema?: Schema }> }>;
}

export interface OpenApiDocument {
  paths: Record<string, Record<string, Operation>>;
  components?: { schemas?: Record<string, Schema> };
}

export interface GeneratedTool {
  name: string;
  title: string;
  description: string;
  inputSchema: Schema & { type: "object" };
  outputSchema?: Schema & { type: "object" };
  annotations: { readOnlyHint: boolean; destructiveHint: boolean; idempotentHint: boolean };
  method: string;
  path: string;
  pathParams: string[];
  queryParams: string[];
  /** Body fields spread at the top level of the input; null when the body is passed whole as `body` (or there is none). */
  bodyFields: string[] | null;
  hasBody: boolean;
}

/** Routes of /v1 that are not the main API: ingest speaks OTLP, the MCP endpoint is this, bootstrap makes a new organization. */
const notTools = new Set(["post /v1/traces", "post /v1/account/bootstrap", "get /v1/mcp", "post /v1/mcp", "delete /v1/mcp"]);

export const isMainApiRoute = (method: string, path: string) => path.startsWith("/v1/") && !notTools.has(`${method} ${path}`);

/** Inlines `#/components/schemas/…` references, so each tool's schema stands alone. */
function resolveRefs(schema: unknown, components: Record<string, Schema>, depth = 0): any {
  if (Array.isArray(schema)) return schema.map((item) => resolveRefs(item, components, depth));
  if (!schema || typeof schema !== "object") return schema;
  const ref = (schema as Schema).$ref;
  if (typeof ref === "string" && ref.startsWith("#/components/schemas/") && depth < 20) {
    return resolveRefs(components[ref.slice("#/components/schemas/".length)] ?? {}, components, depth + 1);
  }
  return Object.fromEntries(Object.entries(schema).map(([key, value]) => [key, resolveRefs(value, components, depth)]));
}

const isPlainObjectSchema = (schema: Schema | undefined): schema is Schema =>
  Boolean(schema && schema.type === "object" && schema.properties && !schema.anyOf && !schema.oneOf && !schema.allOf);

export function generateTools(document: OpenApiDocument): GeneratedTool[] {
  const components = document.components?.schemas ?? {};
  const tools: GeneratedTool[] = [];
  for (const [path, item] of Object.entries(document.paths)) {
    for (const [method, operation] of Object.entries(item)) {
      if (!operation?.operationId || !isMainApiRoute(method, path)) continue;
      const properties: Record<string, Schema> = {};
      const required: string[] = [];
      const pathParams: string[] = [];
      const queryParams: string[] = [];
      for (const parameter of operation.parameters ?? []) {
        if (parameter.in !== "path" && parameter.in !== "query") continue;
        properties[parameter.name] = resolveRefs({ ...(parameter.schema ?? { type: "string" }), ...(parameter.description ? { description: parameter.description } : {}) }, components);
        if (parameter.in === "path" || parameter.required) required.push(parameter.name);
        (parameter.in === "path" ? pathParams : queryParams).push(parameter.name);
      }
      const bodySchema = resolveRefs(operation.requestBody?.content?.["application/json"]?.schema, components) as Schema | undefined;
      let bodyFields: string[] | null = null;
      if (bodySchema) {
        const fields = isPlainObjectSchema(bodySchema) ? Object.keys(bodySchema.properties) : [];
        if (fields.length > 0 && fields.every((field) => !(field in properties) && field !== "body")) {
          bodyFields = fields;
          Object.assign(properties, bodySchema.properties);
          required.push(...((bodySchema.required as string[] | undefined) ?? []));
        } else {
          properties.body = bodySchema;
          if (operation.requestBody?.required) required.push("body");
        }
      }
      const success = operation.responses?.["200"] ?? operation.responses?.["201"] ?? operation.responses?.["202"];
      const outputSchema = resolveRefs(success?.content?.["application/json"]?.schema, components) as Schema | undefined;
      const verb = method.toUpperCase();
      tools.push({
        name: operation.operationId,
        title: operation.summary ?? operation.operationId,
        description: [operation.summary, operation.description, `(${verb} ${path})`].filter(Boolean).join("\n\n"),
        inputSchema: { type: "object", properties, ...(required.length ? { required: [...new Set(required)] } : {}) },
        ...(outputSchema?.type === "object" ? { outputSchema: outputSchema as Schema & { type: "object" } } : {}),
        annotations: { readOnlyHint: verb === "GET", destructiveHint: verb === "DELETE", idempotentHint: verb !== "POST" },
        method: verb,
        path,
        pathParams,
        queryParams,
        bodyFields,
        hasBody: Boolean(bodySchema),
      });
    }
  }
  return tools;
}

/** The REST request a tool call stands for. */
export function toolRequest(tool: GeneratedTool, args: Record<string, unknown>, origin: string, authorization: string): Request {
  let path = tool.path;
  for (const name of tool.pathParams) {
    const value = args[name];
    if (value === undefined || value === null || value === "") throw new Error(`${name}: is required`);
    path = path.replace(`{${name}}`, encodeURIComponent(String(value)));
  }
  const url = new URL(path, origin);
  for (const name of tool.queryParams) {
    const value = args[name];
    if (value === undefined || value === null) continue;
    if (Array.isArray(value)) for (const item of value) url.searchParams.append(name, String(item));
    else url.searchParams.set(name, typeof value === "object" ? JSON.stringify(value) : String(value));
  }
  let body: string | undefined;
  if (tool.hasBody) {
    const payload = tool.bodyFields ? Object.fromEntries(tool.bodyFields.filter((field) => args[field] !== undefined).map((field) => [field, args[field]])) : args.body;
    if (payload !== undefined) body = JSON.stringify(payload);
  }
  return new Request(url.toString(), {
    method: tool.method,
    headers: { authorization, ...(body !== undefined ? { "content-type": "application/json" } : {}) },
    body,
  });
}
