/**
 * Operation ids for routes that do not name one, derived from the route itself so that every route
 * has a readable, stable name in /openapi.json and, through it, as an MCP tool:
 * `GET /v1/projects` → listProjects, `GET /v1/projects/{projectSlug}/traces/{traceId}/spans/{spanId}` →
 * getTraceSpan, `POST /v1/projects/{projectSlug}/traces/export` → exportTraces.
 */

/** Words that name one thing although they end in s, or are a sub-resource rather than a collection. */
const singularWords = new Set(["analytics", "memory", "changes", "redaction", "health", "account", "organization", "settings", "status"]);
/** A POST to a path ending with one of these performs it, rather than creating something. */
const actionWords = new Set(["list", "export", "publish", "claim", "bootstrap", "mute", "unmute", "resolve", "search", "run", "test", "preview", "confirm", "retry"]);

const isParam = (segment: string) => segment.startsWith("{") || segment.startsWith(":");
const pascal = (word: string) => word.split(/[-_]/).map((part) => part.charAt(0).toUpperCase() + part.slice(1)).join("");
function singular(word: string): string {
  if (singularWords.has(word)) return word;
  if (word.endsWith("ies")) return `${word.slice(0, -3)}y`;
  if (word.endsWith("ses")) return word.slice(0, -2);
  return word.endsWith("s") ? word.slice(0, -1) : word;
}

export function deriveOperationId(method: string, path: string): string {
  let segments = path.split("/").filter(Boolean);
  if (segments[0] === "v1") segments = segments.slice(1);
  // The project a route works in is its context, not part of its name.
  if (segments[0] === "projects" && segments[1] && isParam(segments[1]) && segments.length > 2) segments = segments.slice(2);
  const verb = method.toLowerCase();
  const last = segments[segments.length - 1] ?? "root";
  const words: string[] = [];
  segments.forEach((segment, index) => {
    if (isParam(segment)) return;
    const next = segments[index + 1];
    const isLast = index === segments.length - 1;
    // An item (followed by its id) or the owner of a sub-resource reads singular: trace spans, trace analytics.
    if (!isLast && (next === undefined || isParam(next) || !actionWords.has(next))) words.push(singular(segment));
    else words.push(segment);
  });
  if (isParam(last)) {
    const action = { get: "get", patch: "update", put: "update", delete: "delete", post: "update" }[verb] ?? verb;
    return action + words.map(pascal).join("");
  }
  if (verb === "post" && actionWords.has(last)) return last + words.slice(0, -1).map(pascal).join("");
  const nouns = words.slice(0, -1).map(pascal).join("");
  const isCollection = !singularWords.has(last) && singular(last) !== last;
  if (verb === "get") return (isCollection ? "list" : "get") + nouns + pascal(last);
  if (verb === "post") return "create" + nouns + pascal(singular(last));
  if (verb === "delete") return "delete" + nouns + pascal(last);
  return "update" + nouns + pascal(last);
}

interface RouteLike {
  method: string;
  path: string;
  hooks: { detail?: { operationId?: string; hide?: boolean } & Record<string, unknown> };
}

/**
 * Gives every route without an explicit operation id a derived one; a name taken twice (an alias
 * route) gets a numbered suffix. Runs once the route table is complete; the OpenAPI document is
 * built from the routes on first request.
 */
export function nameOperations(routes: RouteLike[]): void {
  const taken = new Set(routes.map((route) => route.hooks.detail?.operationId).filter((id): id is string => Boolean(id)));
  for (const route of routes) {
    if (route.hooks.detail?.operationId || route.method === "ALL" || route.method === "OPTIONS" || route.method === "HEAD") continue;
    const base = deriveOperationId(route.method, route.path);
    let name = base;
    for (let n = 2; taken.has(name); n++) name = `${base}${n}`;
    taken.add(name);
    route.hooks.detail = { ...route.hooks.detail, operationId: name };
  }
}

interface DocumentLike {
  paths?: Record<string, Record<string, { requestBody?: { content?: Record<string, unknown> } }>>;
}

/**
 * Fills the request bodies the OpenAPI plugin leaves empty: it lists content types only for named
 * parsers, and the authentication guard's parse hook is a function, so every authenticated route's
 * body schema would be missing from /openapi.json (and from the MCP tools made from it). The route
 * table still has the schema; JSON is what those routes parse.
 */
export function completeRequestBodies(document: DocumentLike, routes: (RouteLike & { hooks: { body?: unknown } })[]): void {
  for (const route of routes) {
    if (!route.hooks.body) continue;
    const operation = document.paths?.[route.path.replace(/:([^/]+)/g, "{$1}")]?.[route.method.toLowerCase()];
    if (operation?.requestBody && Object.keys(operation.requestBody.content ?? {}).length === 0) {
      operation.requestBody.content = { "application/json": { schema: route.hooks.body } };
    }
  }
}
