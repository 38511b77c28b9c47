import { randomBytes } from "node:crypto";
import type { IngestPipeline } from "../ingest/pipeline";
import { findModelPrice } from "../ingest/price";
import { toGenAiMessages, type PromptlMessage, type ToolCall } from "./messages";

/** Token counts as the gateway client reads them (the AI SDK's v4 names beside the current ones). */
export interface Usage {
  inputTokens: number;
  outputTokens: number;
  promptTokens: number;
  completionTokens: number;
  totalTokens: number;
  reasoningTokens: number;
  cachedInputTokens: number;
}

export const emptyUsage = (): Usage => ({ inputTokens: 0, outputTokens: 0, promptTokens: 0, completionTokens: 0, totalTokens: 0, reasoningTokens: 0, cachedInputTokens: 0 });

export function addUsage(total: Usage, step: Usage): Usage {
  const sum = emptyUsage();
  for (const key of Object.keys(sum) as (keyof Usage)[]) sum[key] = total[key] + step[key];
  return sum;
}

/** Cost in microcents from the same price table that prices ingested spans. */
export function costOf(provider: string, model: string, usage: Usage): number {
  const price = findModelPrice(provider, model);
  if (!price) return 0;
  const cached = usage.cachedInputTokens;
  const reasoning = usage.reasoningTokens;
  // USD per million tokens × 10^8 microcents per USD / 10^6 tokens.
  const usd = (usage.inputTokens - cached) * price.input + cached * price.cacheRead + (usage.outputTokens - reasoning) * price.output + reasoning * price.reasoning;
  return Math.round(usd * 100);
}

export interface CompletionSpan {
  spanId: string;
  startNs: bigint;
  endNs: bigint;
  provider: string;
  model: string;
  responseModel: string;
  input: PromptlMessage[];
  output: PromptlMessage[];
  usage: Usage;
  finishReason: string;
  streaming: boolean;
  firstTokenNs: bigint | null;
  error: string | null;
}

export interface ToolSpan {
  spanId: string;
  startNs: bigint;
  endNs: bigint;
  call: ToolCall;
  result: unknown;
  isError: boolean;
}

export const nowNs = () => BigInt(Date.now()) * 1_000_000n + BigInt(Math.floor((performance.now() % 1) * 1_000_000));
export const newSpanId = () => randomBytes(8).toString("hex");
export const newTraceId = () => randomBytes(16).toString("hex");

type OtlpValue = { stringValue: string } | { intValue: string } | { boolValue: boolean } | { doubleValue: number };
const value = (v: string | number | boolean): OtlpValue =>
  typeof v === "string" ? { stringValue: v } : typeof v === "boolean" ? { boolValue: v } : Number.isInteger(v) ? { intValue: String(v) } : { doubleValue: v };
const attributes = (entries: Record<string, string | number | boolean | undefined | null>) =>
  Object.entries(entries)
    .filter((entry): entry is [string, string | number | boolean] => entry[1] !== undefined && entry[1] !== null && entry[1] !== "")
    .map(([key, v]) => ({ key, value: value(v) }));

/** What a run (or a chat, or a log) recorded: the spans of one trace whose session is the conversation. */
export interface RunTraceRecord {
  traceId: string;
  rootSpanId: string;
  startNs: bigint;
  endNs: bigint;
  projectId: string;
  conversationUuid: string;
  documentPath: string;
  documentUuid: string;
  versionUuid: string;
  customIdentifier: string | null;
  operation: "run" | "chat" | "log";
  input: PromptlMessage[];
  output: PromptlMessage[];
  completions: CompletionSpan[];
  tools: ToolSpan[];
  error: string | null;
}

/** The run as an OTLP/JSON export: a prompt span with completion and tool spans under it. */
export function runTraceBody(record: RunTraceRecord): Uint8Array {
  const common = {
    "latitude.project": record.projectId,
    "gen_ai.conversation.id": record.conversationUuid,
    "latitude.document.path": record.documentPath,
    "latitude.document.uuid": record.documentUuid,
    "latitude.commit.uuid": record.versionUuid,
    "latitude.custom_identifier": record.customIdentifier,
  };
  const status = (error: string | null) => (error ? { code: 2, message: error } : { code: 1 });
  const span = (spanId: string, parent: string, name: string, startNs: bigint, endNs: bigint, attrs: Record<string, string | number | boolean | undefined | null>, error: string | null) => ({
    traceId: record.traceId,
    spanId,
    parentSpanId: parent,
    name,
    kind: parent ? 3 : 1,
    startTimeUnixNano: String(startNs),
    endTimeUnixNano: String(endNs),
    attributes: attributes({ ...common, ...attrs, "error.type": error ? "DocumentRunError" : undefined }),
    status: status(error),
  });
  const spans = [
    span(record.rootSpanId, "", `prompt ${record.documentPath}`, record.startNs, record.endNs, {
      "gen_ai.operation.name": "invoke_agent",
      "gen_ai.agent.name": record.documentPath,
      "latitude.gateway.operation": record.operation,
      "gen_ai.input.messages": JSON.stringify(toGenAiMessages(record.input)),
      "gen_ai.output.messages": JSON.stringify(toGenAiMessages(record.output)),
    }, record.error),
    ...record.completions.map((completion) =>
      span(completion.spanId, record.rootSpanId, `chat ${completion.model}`, completion.startNs, completion.endNs, {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": completion.provider,
        "gen_ai.request.model": completion.model,
        "gen_ai.response.model": completion.responseModel || completion.model,
        "gen_ai.request.stream": completion.streaming,
        "gen_ai.usage.input_tokens": completion.usage.inputTokens,
        "gen_ai.usage.output_tokens": completion.usage.outputTokens,
        "gen_ai.usage.cache_read.input_tokens": completion.usage.cachedInputTokens || undefined,
        "gen_ai.usage.reasoning_tokens": completion.usage.reasoningTokens || undefined,
        "gen_ai.response.finish_reasons": completion.finishReason,
        "gen_ai.server.time_to_first_token": completion.firstTokenNs === null ? undefined : Number(completion.firstTokenNs - completion.startNs) / 1e9,
        "gen_ai.input.messages": JSON.stringify(toGenAiMessages(completion.input)),
        "gen_ai.output.messages": JSON.stringify(toGenAiMessages(completion.output)),
      }, completion.error),
    ),
    ...record.tools.map((tool) =>
      span(tool.spanId, record.rootSpanId, `execute_tool ${tool.call.name}`, tool.startNs, tool.endNs, {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": tool.call.name,
        "gen_ai.tool.call.id": tool.call.id,
        "gen_ai.tool.call.arguments": JSON.stringify(tool.call.arguments),
        "gen_ai.tool.call.result": typeof tool.result === "string" ? tool.result : JSON.stringify(tool.result ?? null),
      }, tool.isError ? "tool error" : null),
    ),
  ];
  const body = { resourceSpans: [{ resource: { attributes: attributes({ "service.name": "vigil-gateway" }) }, scopeSpans: [{ scope: { name: "vigil.gateway" }, spans }] }] };
  return new TextEncoder().encode(JSON.stringify(body));
}

/** Sends the run's spans through the ingest pipeline as the run's API key; resolves once they are durable. */
export async function recordRunTrace(ingest: IngestPipeline, owner: { organizationId: string; apiKeyId: string }, record: RunTraceRecord): Promise<void> {
  const outcome = await ingest.exportAs(owner, { encoding: "json", bytes: runTraceBody(record) });
  if (outcome.rejected) throw new Error(`gateway trace partly rejected: ${outcome.errorMessage}`);
}
