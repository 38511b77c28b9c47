import { attributeText, type AttributeReader } from "./attributes";

/** Vercel AI SDK provider ids name the API after the provider: `openai.chat`, `google.generative-ai`. */
const PROVIDER_SUFFIXES = [".chat", ".messages", ".responses", ".generative-ai", ".embedding", ".embed", ".completion"];
const PROVIDER_ALIASES: Record<string, string> = {
  bedrock: "amazon-bedrock",
  "aws.bedrock": "amazon-bedrock",
  aws_bedrock: "amazon-bedrock",
  "aws-bedrock": "amazon-bedrock",
  gemini: "google",
  "gcp.gemini": "google",
  "gcp.gen_ai": "google",
  google_genai: "google",
  "google-genai": "google",
  vertex_ai: "google-vertex",
  vertexai: "google-vertex",
  vertex: "google-vertex",
  "gcp.vertex_ai": "google-vertex",
  "google.vertex": "google-vertex",
  "vertex.anthropic": "google-vertex",
  mistralai: "mistral",
  mistral_ai: "mistral",
  x_ai: "xai",
  "x-ai": "xai",
  "azure.ai.openai": "azure",
  "azure.ai.inference": "azure",
  "az.ai.openai": "azure",
  azure_openai: "azure",
  "azure-openai": "azure",
};

/** Lowercase provider name without the Vercel AI SDK's API suffix (`openai.chat`), aliases folded. */
export function normalizeProvider(value: string): string {
  let provider = value.trim().toLowerCase();
  for (const suffix of PROVIDER_SUFFIXES) {
    if (provider.endsWith(suffix)) {
      provider = provider.slice(0, -suffix.length);
      break;
    }
  }
  return PROVIDER_ALIASES[provider] ?? provider;
}

const OPENINFERENCE_OPERATIONS: Record<string, string> = {
  LLM: "chat",
  EMBEDDING: "embeddings",
  TOOL: "execute_tool",
  AGENT: "invoke_agent",
  CHAIN: "invoke_workflow",
  RETRIEVER: "retrieval",
  RERANKER: "rerank",
  GUARDRAIL: "guardrail",
  EVALUATOR: "evaluate",
};
const TRACELOOP_REQUEST_TYPES: Record<string, string> = { chat: "chat", completion: "text_completion", embedding: "embeddings", rerank: "rerank" };
const LANGFUSE_OBSERVATION_TYPES: Record<string, string> = {
  generation: "chat",
  embedding: "embeddings",
  tool: "execute_tool",
  agent: "invoke_agent",
  chain: "invoke_workflow",
  retriever: "retrieval",
  evaluator: "evaluate",
  guardrail: "guardrail",
};
const LANGSMITH_RUN_TYPES: Record<string, string> = { llm: "chat", tool: "execute_tool", chain: "invoke_workflow", retriever: "retrieval", embedding: "embeddings" };
const TRACELOOP_SPAN_KINDS: Record<string, string> = { workflow: "invoke_workflow", agent: "invoke_agent", tool: "execute_tool" };

/** Vercel AI SDK `ai.operationId`s: the calls, and the provider steps (`ai.generateText.doGenerate`, …) under them. */
const VERCEL_OPERATIONS: Record<string, string> = {
  "ai.generateText": "chat",
  "ai.streamText": "chat",
  "ai.generateObject": "chat",
  "ai.streamObject": "chat",
  "ai.embed": "embeddings",
  "ai.embedMany": "embeddings",
  "ai.toolCall": "execute_tool",
};

/**
 * Vercel AI SDK calls whose span only repeats the usage of its `doGenerate`/`doStream`/`doEmbed` children.
 * Decided from the span itself so no other span has to be looked up.
 */
const VERCEL_USAGE_WRAPPERS = new Set(["ai.generateText", "ai.streamText", "ai.generateObject", "ai.streamObject", "ai.embed", "ai.embedMany"]);

function vercelOperation(operationId: string): string | undefined {
  if (operationId.endsWith(".doGenerate") || operationId.endsWith(".doStream")) return "chat";
  if (operationId.endsWith(".doEmbed")) return "embeddings";
  return VERCEL_OPERATIONS[operationId];
}

/** Operation hints that select a mapping stay in the typed maps: they say more than the column. */
export function resolveOperation(attributes: AttributeReader): string {
  const explicit = attributes.text(["gen_ai.operation.name"]).trim();
  if (explicit) return explicit;
  const openInferenceKind = attributeText(attributes.get("openinference.span.kind")).trim();
  if (openInferenceKind) return OPENINFERENCE_OPERATIONS[openInferenceKind.toUpperCase()] ?? openInferenceKind.toLowerCase();
  const requestType = attributeText(attributes.get("llm.request.type")).trim();
  if (requestType) return TRACELOOP_REQUEST_TYPES[requestType.toLowerCase()] ?? requestType.toLowerCase();
  const vercel = vercelOperation(attributeText(attributes.get("ai.operationId")));
  if (vercel) return vercel;
  const hinted =
    LANGFUSE_OBSERVATION_TYPES[attributeText(attributes.get("langfuse.observation.type")).toLowerCase()] ??
    LANGSMITH_RUN_TYPES[attributeText(attributes.get("langsmith.span.kind")).toLowerCase()] ??
    TRACELOOP_SPAN_KINDS[attributeText(attributes.get("traceloop.span.kind")).toLowerCase()];
  return hinted ?? "unspecified";
}

export const isVercelUsageWrapper = (attributes: AttributeReader) => VERCEL_USAGE_WRAPPERS.has(attributeText(attributes.get("ai.operationId")));
