import { attributeNumber, isRecord, parseJsonValue, type AttributeReader, type AttributeValue } from "./attributes";
import type { DecodedEvent } from "./decode";

// Resolution lists of design/INGEST.md: the first attribute that yields a value wins.
const INPUT_TOKENS = [
  "gen_ai.usage.input_tokens",
  "gen_ai.usage.prompt_tokens",
  "llm.token_count.prompt",
  "ai.usage.inputTokens",
  "ai.usage.promptTokens",
  "ai.usage.tokens",
];
const OUTPUT_TOKENS = ["gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens", "llm.token_count.completion", "ai.usage.outputTokens", "ai.usage.completionTokens"];
const CACHE_READ_TOKENS = [
  "gen_ai.usage.cache_read.input_tokens",
  "gen_ai.usage.cache_read_input_tokens",
  "ai.usage.cachedInputTokens",
  "ai.usage.inputTokenDetails.cacheReadTokens",
  "llm.token_count.prompt_details.cache_read",
];
const CACHE_CREATE_TOKENS = [
  "gen_ai.usage.cache_creation.input_tokens",
  "gen_ai.usage.cache_creation_input_tokens",
  "gen_ai.usage.cache_write_input_tokens",
  "ai.usage.inputTokenDetails.cacheWriteTokens",
  "llm.token_count.prompt_details.cache_write",
];
const REASONING_TOKENS = [
  "gen_ai.usage.reasoning_tokens",
  "gen_ai.usage.reasoning.output_tokens",
  "llm.token_count.completion_details.reasoning",
  "ai.usage.outputTokenDetails.reasoningTokens",
  "ai.usage.reasoningTokens",
];
/** Vercel AI SDK 6 also reports the additive counts themselves. */
const VERCEL_NO_CACHE_INPUT = "ai.usage.inputTokenDetails.noCacheTokens";
const VERCEL_TEXT_OUTPUT = "ai.usage.outputTokenDetails.textTokens";
const TTFT_SECONDS = ["gen_ai.server.time_to_first_token", "llm.latency.time_to_first_token"];
const TTFT_MILLISECONDS = ["ttft_ms", "ai.response.msToFirstChunk"];
/** Events at the first streamed token: OpenLLMetry sends one `gen_ai.content.completion.chunk` per chunk, OpenInference (Python) `First Token Stream Event`. */
const TTFT_EVENTS = new Set(["gen_ai.content.completion", "gen_ai.choice", "ai.stream.firstChunk", "gen_ai.content.completion.chunk", "First Token Stream Event"]);
/** Langfuse: `{"input", "output", "total", "input_cached_tokens", "output_reasoning_tokens", …}`, additive like ours. */
const LANGFUSE_USAGE = "langfuse.observation.usage_details";
const LANGFUSE_CACHE_READ = ["input_cached_tokens", "input_cache_read", "cache_read_input_tokens"];
const LANGFUSE_CACHE_CREATE = ["input_cache_creation", "input_cache_write", "cache_creation_input_tokens"];
const LANGFUSE_REASONING = ["output_reasoning_tokens", "output_reasoning"];
/** Langfuse: the instant of the first streamed token, an ISO-8601 time (JSON-quoted as the SDK sends it). */
const LANGFUSE_COMPLETION_START = "langfuse.observation.completion_start_time";

export interface Tokens {
  input: number;
  output: number;
  cacheRead: number;
  cacheCreate: number;
  reasoning: number;
}

const count = (value: number | undefined) => (value === undefined || value < 0 ? 0 : Math.round(value));

/**
 * Stores tokens additively: input without cache reads and writes, output without reasoning.
 * `gen_ai.usage.input_tokens` and `ai.usage.*` include cached tokens, except from Anthropic, which reports
 * them apart (Vercel AI SDK 6 reports totals for every provider); OpenInference's prompt count always includes
 * them. A cache larger than the input means the sender was additive after all, so nothing is subtracted.
 */
export function resolveTokens(attributes: AttributeReader, provider: string): Tokens {
  const langfuse = langfuseUsage(attributes);
  if (langfuse) return langfuse;
  const cacheRead = count(attributes.number(CACHE_READ_TOKENS));
  const cacheCreate = count(attributes.number(CACHE_CREATE_TOKENS));
  const reasoning = count(attributes.number(REASONING_TOKENS));
  const vercelTotals = attributes.keysWithPrefix("ai.usage.inputTokenDetails.").length > 0;

  const reportedInput = attributes.numberEntry(INPUT_TOKENS);
  const noCacheInput = attributes.number([VERCEL_NO_CACHE_INPUT]);
  let input = count(reportedInput?.value);
  if (noCacheInput !== undefined) input = count(noCacheInput);
  else if (reportedInput) {
    const includesCache = reportedInput.key === "llm.token_count.prompt" || vercelTotals || provider !== "anthropic";
    const cache = cacheRead + cacheCreate;
    if (includesCache && input >= cache) input -= cache;
  }

  const textOutput = attributes.number([VERCEL_TEXT_OUTPUT]);
  let output = count(attributes.number(OUTPUT_TOKENS));
  if (textOutput !== undefined) output = count(textOutput);
  else if (output >= reasoning) output -= reasoning;

  return { input, output, cacheRead, cacheCreate, reasoning };
}

/** Langfuse usage details, when the span reports its usage only there. */
function langfuseUsage(attributes: AttributeReader): Tokens | undefined {
  if (!attributes.has(LANGFUSE_USAGE) || attributes.numberEntry(INPUT_TOKENS) || attributes.numberEntry(OUTPUT_TOKENS)) return undefined;
  const usage = parseJsonValue(attributes.get(LANGFUSE_USAGE));
  if (!isRecord(usage)) return undefined;
  attributes.consume(LANGFUSE_USAGE);
  const first = (keys: string[]) => count(keys.map((key) => attributeNumber(usage[key] as AttributeValue)).find((value) => value !== undefined));
  return {
    input: first(["input", "prompt_tokens", "input_tokens"]),
    output: first(["output", "completion_tokens", "output_tokens"]),
    cacheRead: first(LANGFUSE_CACHE_READ),
    cacheCreate: first(LANGFUSE_CACHE_CREATE),
    reasoning: first(LANGFUSE_REASONING),
  };
}

const NANOS_PER_SECOND = 1e9;

/**
 * `end − start` of two decimal nanosecond times, split into seconds and nanoseconds so each part is an
 * exact double: exact for any difference under 2^53 ns (104 days).
 */
export function nanosBetween(start: string, end: string): number {
  return (Number(end.slice(0, -9)) - Number(start.slice(0, -9))) * NANOS_PER_SECOND + (Number(end.slice(-9)) - Number(start.slice(-9)));
}

/**
 * Seconds per the GenAI conventions; some senders put milliseconds or nanoseconds in the same keys. A time
 * to first token is never 1000 s or more, so larger values are read as milliseconds, then nanoseconds.
 */
function secondsToNanos(value: number): number {
  if (value < 1e3) return value * NANOS_PER_SECOND;
  if (value < 1e6) return value * 1e6;
  return value;
}

function ttftFrom(attributes: (key: string) => AttributeValue | undefined): number | undefined {
  for (const key of TTFT_SECONDS) {
    const value = attributeNumber(attributes(key));
    if (value !== undefined && value > 0) return secondsToNanos(value);
  }
  for (const key of TTFT_MILLISECONDS) {
    const value = attributeNumber(attributes(key));
    if (value !== undefined && value > 0) return value * 1e6;
  }
  return undefined;
}

export function resolveTimeToFirstToken(attributes: AttributeReader, events: DecodedEvent[], startTimeUnixNano: string): number {
  const fromSpan = ttftFrom((key) => {
    const value = attributes.get(key);
    if (value !== undefined) attributes.consume(key);
    return value;
  });
  if (fromSpan !== undefined) return Math.round(fromSpan);
  const completionStart = parseJsonValue(attributes.get(LANGFUSE_COMPLETION_START));
  if (typeof completionStart === "string") {
    const startMs = Date.parse(completionStart);
    if (Number.isFinite(startMs)) {
      attributes.consume(LANGFUSE_COMPLETION_START);
      const elapsed = nanosBetween(startTimeUnixNano, `${startMs}000000`);
      if (elapsed > 0) return elapsed;
    }
  }
  for (const event of events) {
    const fromEvent = ttftFrom((key) => event.attributes.get(key));
    if (fromEvent !== undefined) return Math.round(fromEvent);
  }
  const firstChunk = events.find((event) => TTFT_EVENTS.has(event.name));
  if (!firstChunk) return 0;
  const elapsed = nanosBetween(startTimeUnixNano, firstChunk.timeUnixNano);
  return elapsed > 0 ? elapsed : 0;
}
