import { describe, expect, setDefaultTimeout, test } from "bun:test";
import type { AttributeValue } from "../src/ingest/attributes";
import { mapResource, mapSpan } from "../src/ingest/map";
import { canonicalModelName, findModelPrice, priceSpan } from "../src/ingest/price";
import pricingTable from "../src/ingest/pricing.json";
import type { SpanRow } from "../src/ingest/row";

setDefaultTimeout(60_000);

const owner = { organizationId: "o", projectId: "p", apiKeyId: "k" };
const providers = pricingTable.providers as Record<string, Record<string, Record<string, number>>>;
const sources = pricingTable.sources as Record<string, { pages: string[]; note: string }>;

/** A priced row from span attributes, through map as in the pipeline. */
function priced(attributes: Record<string, AttributeValue>): SpanRow {
  const span = {
    traceId: "0af7651916cd43dd8448eb211c80319c",
    spanId: "b7ad6b7169203331",
    parentSpanId: "",
    traceState: "",
    flags: 0,
    name: "chat",
    kind: "client" as const,
    startTimeUnixNano: "1763000000000000000",
    endTimeUnixNano: "1763000001000000000",
    attributes: new Map(Object.entries(attributes)),
    events: [],
    links: [],
    statusCode: "unset" as const,
    statusMessage: "",
  };
  return priceSpan(mapSpan(span, mapResource(new Map()), { name: "", version: "" }, owner));
}

/** [input, output] cost in microcents of one call; `cached` and `cacheWritten` go in the cache attributes. */
function callCost(provider: string, model: string, tokens: { input: number; output: number; cached?: number; cacheWritten?: number }): [number, number] {
  const row = priced({
    "gen_ai.provider.name": provider,
    "gen_ai.request.model": model,
    "gen_ai.usage.input_tokens": tokens.input,
    "gen_ai.usage.output_tokens": tokens.output,
    "gen_ai.usage.cache_read.input_tokens": tokens.cached ?? 0,
    "gen_ai.usage.cache_creation.input_tokens": tokens.cacheWritten ?? 0,
  });
  return [row.cost_input_microcents, row.cost_output_microcents];
}

const MILLION = 1_000_000;

describe("the pricing table", () => {
  test("states its date, and for every provider the pages its figures come from", () => {
    expect(pricingTable.source).toContain("pricing");
    expect(pricingTable.date).toMatch(/^\d{4}-\d{2}-\d{2}$/);
    expect(Object.keys(providers)).toEqual(expect.arrayContaining(["openai", "anthropic", "google", "mistral", "meta", "deepseek", "xai"]));
    for (const provider of Object.keys(providers)) {
      expect(sources[provider]?.pages.length).toBeGreaterThan(0);
      for (const page of sources[provider].pages) expect(page).toStartWith("https://");
    }
  });

  test("every rate is a non-negative number under a rate the pricer reads", () => {
    const rates = new Set(["input", "output", "cacheRead", "cacheWrite", "reasoning"]);
    for (const models of Object.values(providers)) {
      for (const price of Object.values(models)) {
        expect(typeof price.input).toBe("number");
        expect(typeof price.output).toBe("number");
        for (const [rate, value] of Object.entries(price)) {
          expect(rates.has(rate)).toBe(true);
          expect(value).toBeGreaterThanOrEqual(0);
        }
      }
    }
  });

  test("no model is listed under two providers, so a host's span gets the one price its name has", () => {
    const listedBy = new Map<string, string>();
    for (const [provider, models] of Object.entries(providers)) {
      for (const model of Object.keys(models)) {
        expect(listedBy.get(model)).toBeUndefined();
        listedBy.set(model, provider);
      }
    }
  });
});

describe("model matching", () => {
  test("exact name, then the longest listed prefix at a name boundary", () => {
    expect(findModelPrice("openai", "gpt-4.1-2025-04-14")?.input).toBe(2);
    expect(findModelPrice("openai", "gpt-4.1-mini-2025-04-14")?.input).toBe(0.4);
    expect(findModelPrice("openai", "gpt-4o-2024-05-13")?.input).toBe(5);
    expect(findModelPrice("openai", "gpt-4o-2024-08-06")?.input).toBe(2.5);
    expect(findModelPrice("openai", "gpt-5.4-mini-2026-03-17")?.input).toBe(0.75);
    expect(findModelPrice("openai", "gpt-5.1-chat-latest")?.input).toBe(1.25);
    expect(findModelPrice("anthropic", "claude-sonnet-4-5-20250929")?.output).toBe(15);
    expect(findModelPrice("anthropic", "claude-opus-4-1-20250805")?.input).toBe(15);
    expect(findModelPrice("google", "gemini-3.1-pro-preview")?.output).toBe(12);
    expect(findModelPrice("google", "gemini-2.5-flash-lite-preview-06-17")?.input).toBe(0.1);
    expect(findModelPrice("mistral", "mistral-medium-2604")?.input).toBe(1.5);
    expect(findModelPrice("deepseek", "deepseek-v3.2-exp")?.input).toBe(0.28);
  });

  test("a dotted version is a model of its own: the longest listed name wins, an unlisted one has no price", () => {
    expect(findModelPrice("openai", "gpt-5")?.input).toBe(1.25);
    expect(findModelPrice("openai", "gpt-5.2")?.input).toBe(1.75);
    expect(findModelPrice("openai", "gpt-5.2-2025-12-11")?.input).toBe(1.75);
    expect(findModelPrice("openai", "gpt-5.3-codex")?.input).toBe(1.75);
    expect(findModelPrice("openai", "gpt-5.3")).toBeUndefined();
    expect(findModelPrice("openai", "gpt-5.6-sol")).toBeUndefined();
    expect(findModelPrice("deepseek", "deepseek-v3.1")?.input).toBe(0.56);
    expect(findModelPrice("deepseek", "deepseek-v3.9")).toBeUndefined();
    expect(findModelPrice("xai", "grok-4.20-0309-reasoning")).toBeUndefined();
    expect(findModelPrice("google", "gemini-3.7-flash")).toBeUndefined();
  });

  test("after a version number, a dashed one- or two-digit segment is a minor version, a longer one a date", () => {
    expect(findModelPrice("anthropic", "claude-opus-4-7")?.input).toBe(5);
    expect(findModelPrice("anthropic", "claude-opus-4-9")).toBeUndefined();
    expect(findModelPrice("anthropic", "claude-opus-4-12")).toBeUndefined();
    expect(findModelPrice("anthropic", "claude-opus-4-0")?.input).toBe(15);
    expect(findModelPrice("anthropic", "claude-opus-4-20250514")?.input).toBe(15);
    expect(findModelPrice("anthropic", "claude-sonnet-5-5")?.cacheRead).toBe(0.1);
    expect(findModelPrice("anthropic", "claude-sonnet-5-20260630")?.cacheRead).toBe(0.2);
    expect(findModelPrice("xai", "grok-4-0709")?.input).toBe(3);
    expect(findModelPrice("xai", "grok-4-2")).toBeUndefined();
  });

  test("a cheap variant is priced as itself, never as its dearer family", () => {
    expect(findModelPrice("xai", "grok-4-1-fast-reasoning")).toEqual({ input: 0.2, output: 0.5, cacheRead: 0.05, cacheWrite: 0.2, reasoning: 0.5 });
    expect(findModelPrice("xai", "grok-4-1-fast-non-reasoning")?.input).toBe(0.2);
    expect(findModelPrice("openrouter", "x-ai/grok-4.1-fast")?.input).toBe(0.2);
    expect(findModelPrice("xai", "grok-4-fast-reasoning")?.input).toBe(0.2);
    expect(findModelPrice("xai", "grok-code-fast-1")?.output).toBe(1.5);
    expect(findModelPrice("xai", "grok-4-latest")?.input).toBe(3);
    expect(findModelPrice("meta", "muse-spark-1.3-contributor")?.output).toBe(0.2);
    expect(findModelPrice("meta", "muse-spark-1.3")?.output).toBe(4.25);
    expect(findModelPrice("openai", "gpt-5.4-nano")?.input).toBe(0.2);
    expect(findModelPrice("mistral", "mistral-large-2512")?.input).toBe(0.5);
    expect(findModelPrice("mistral", "mistral-large-2411")?.input).toBe(2);
  });

  test("a listed name does not price a different model it happens to prefix", () => {
    expect(findModelPrice("openai", "gpt-4ox")).toBeUndefined();
    expect(findModelPrice("openai", "o3x")).toBeUndefined();
    expect(findModelPrice("openai", "gpt-4.7")).toBeUndefined();
    expect(findModelPrice("openai", "gpt-6")).toBeUndefined();
  });

  test("Bedrock region and vendor prefixes, paths and version spellings", () => {
    expect(canonicalModelName("us.anthropic.claude-3-5-sonnet-20241022-v2:0")).toBe("claude-3-5-sonnet-20241022-v2:0");
    expect(canonicalModelName("jp.anthropic.claude-sonnet-4-5-20250929-v1:0")).toBe("claude-sonnet-4-5-20250929-v1:0");
    expect(canonicalModelName("us-gov.anthropic.claude-3-5-sonnet-20240620-v1:0")).toBe("claude-3-5-sonnet-20240620-v1:0");
    expect(canonicalModelName("accounts/fireworks/models/deepseek-v3p2")).toBe("deepseek-v3.2");
    expect(canonicalModelName("accounts/fireworks/models/llama-v3p3-70b-instruct")).toBe("llama-3.3-70b-instruct");
    expect(findModelPrice("amazon-bedrock", "global.anthropic.claude-opus-4-6-v1")?.input).toBe(5);
    expect(findModelPrice("amazon-bedrock", "au.anthropic.claude-haiku-4-5-20251001-v1:0")?.input).toBe(1);
    expect(findModelPrice("amazon-bedrock", "eu.anthropic.claude-3-7-sonnet-20250219-v1:0")?.input).toBe(3);
    expect(findModelPrice("amazon-bedrock", "apac.anthropic.claude-3-haiku-20240307-v1:0")?.input).toBe(0.25);
    expect(findModelPrice("amazon-bedrock", "meta.llama3-3-70b-instruct-v1:0")?.input).toBe(0.59);
    expect(findModelPrice("amazon-bedrock", "meta.llama4-maverick-17b-instruct-v1:0")?.input).toBe(0.2);
    expect(findModelPrice("google-vertex", "claude-3-5-sonnet-v2@20241022")?.input).toBe(3);
    expect(findModelPrice("google-vertex", "claude-opus-4-7@20260416")?.input).toBe(5);
    expect(findModelPrice("openrouter", "anthropic/claude-3.5-sonnet")?.input).toBe(3);
    expect(findModelPrice("openrouter", "anthropic/claude-opus-4.6")?.input).toBe(5);
    expect(findModelPrice("anthropic", "claude-opus-4-6[1m]")?.input).toBe(5);
    expect(findModelPrice("google", "models/gemini-2.5-pro")?.output).toBe(10);
    expect(findModelPrice("fireworks", "accounts/fireworks/models/deepseek-v3p2")?.output).toBe(0.42);
  });

  test("every spelling of a provider or host finds the same price", () => {
    const cases: [string[], string, number][] = [
      [["openai", "openai.responses", "azure", "azure.ai.openai"], "gpt-6.1-sol", 2],
      [["anthropic", "anthropic.messages", "aws.bedrock", "vertex.anthropic"], "claude-opus-4-7", 5],
      [["google", "gemini", "gcp.gemini", "google.generative-ai", "vertex_ai", "gcp.vertex_ai"], "gemini-3.1-pro-preview", 2],
      [["mistral", "mistralai", "mistral_ai"], "mistral-medium-latest", 1.5],
      [["meta", "meta-llama", "groq", "together_ai", "fireworks", "bedrock"], "meta-llama/Llama-4-Scout-17B-16E-Instruct", 0.11],
      [["deepseek", "together_ai", "fireworks"], "deepseek-v4-pro", 1.32],
      [["xai", "x-ai", "x_ai", "openrouter"], "grok-4-1-fast-reasoning", 0.2],
    ];
    for (const [aliases, model, input] of cases) {
      for (const provider of aliases) expect([provider, findModelPrice(provider, model)?.input]).toEqual([provider, input]);
    }
  });

  test("the provider's own list first, any provider's for hosts and gateways", () => {
    expect(findModelPrice("azure", "gpt-4o")?.input).toBe(2.5);
    expect(findModelPrice("openai", "claude-3-5-haiku-latest")?.input).toBe(0.8);
  });

  test("unknown models and no model have no price", () => {
    expect(findModelPrice("openai", "my-finetune")).toBeUndefined();
    expect(findModelPrice("openai", "")).toBeUndefined();
  });

  test("missing cache rates fall back to the input rate, reasoning to the output rate", () => {
    expect(findModelPrice("openai", "gpt-4-turbo")).toEqual({ input: 10, output: 30, cacheRead: 10, cacheWrite: 10, reasoning: 30 });
    expect(findModelPrice("openai", "gpt-4o")).toEqual({ input: 2.5, output: 10, cacheRead: 1.25, cacheWrite: 2.5, reasoning: 10 });
  });
});

describe("priceSpan", () => {
  test("tokens × listed price in integer microcents, estimated", () => {
    const row = priced({
      "gen_ai.provider.name": "openai",
      "gen_ai.request.model": "gpt-4o",
      "gen_ai.usage.input_tokens": 1200,
      "gen_ai.usage.cache_read.input_tokens": 200,
      "gen_ai.usage.output_tokens": 300,
    });
    // 1000 × $2.50/M + 200 × $1.25/M = $0.00275; 300 × $10/M = $0.003.
    expect([row.cost_input_microcents, row.cost_output_microcents, row.cost_total_microcents, row.cost_is_estimated]).toEqual([275_000, 300_000, 575_000, true]);
  });

  test("Anthropic cache writes, and reasoning at the output rate", () => {
    const row = priced({
      "gen_ai.provider.name": "anthropic",
      "gen_ai.request.model": "claude-sonnet-4-20250514",
      "gen_ai.usage.input_tokens": 100,
      "gen_ai.usage.cache_creation.input_tokens": 1000,
      "gen_ai.usage.cache_read.input_tokens": 2000,
      "gen_ai.usage.output_tokens": 500,
      "gen_ai.usage.reasoning_tokens": 100,
    });
    // 100 × 3 + 1000 × 3.75 + 2000 × 0.30 = 4650 → $0.00465; (400 + 100) × 15 = 7500 → $0.0075.
    expect([row.cost_input_microcents, row.cost_output_microcents, row.cost_is_estimated]).toEqual([465_000, 750_000, true]);
  });

  // $1 per 1M tokens is 100 microcents a token. OpenAI-style input counts include cached and written tokens; Anthropic's do not.
  test("current OpenAI models", () => {
    // (5000 × 2 + 4000 × 0.10 + 1000 × 2.50) × 100; 2000 × 10 × 100.
    expect(callCost("openai", "gpt-6.1-sol", { input: 10_000, cached: 4000, cacheWritten: 1000, output: 2000 })).toEqual([1_290_000, 2_000_000]);
    expect(callCost("openai", "gpt-5.2-2025-12-11", { input: MILLION, output: 100_000 })).toEqual([175_000_000, 140_000_000]);
    expect(callCost("openai", "gpt-5.4-mini", { input: MILLION, output: 1000 })).toEqual([75_000_000, 450_000]);
  });

  test("current Anthropic models", () => {
    // (1000 × 5 + 2000 × 6.25 + 10000 × 0.50) × 100; 3000 × 25 × 100.
    expect(callCost("anthropic", "claude-opus-4-7", { input: 1000, cacheWritten: 2000, cached: 10_000, output: 3000 })).toEqual([2_250_000, 7_500_000]);
    expect(callCost("anthropic", "claude-sonnet-5-5", { input: 1000, cached: 100_000, output: 1000 })).toEqual([1_200_000, 1_000_000]);
    expect(callCost("anthropic", "claude-haiku-5-5", { input: 10_000, output: 1000 })).toEqual([100_000, 50_000]);
  });

  test("current Google models", () => {
    // (40000 × 2 + 60000 × 0.20) × 100; 5000 × 12 × 100.
    expect(callCost("gcp.gemini", "models/gemini-3.1-pro-preview", { input: 100_000, cached: 60_000, output: 5000 })).toEqual([9_200_000, 6_000_000]);
    expect(callCost("google", "gemini-3.8-flash", { input: MILLION, output: MILLION })).toEqual([75_000_000, 375_000_000]);
  });

  test("current Mistral models", () => {
    expect(callCost("mistralai", "mistral-medium-2604", { input: MILLION, output: 100_000 })).toEqual([150_000_000, 75_000_000]);
    expect(callCost("mistralai", "mistral-large-latest", { input: MILLION, output: MILLION })).toEqual([50_000_000, 150_000_000]);
  });

  test("Meta's Muse Spark, and Llama at Groq's rates", () => {
    expect(callCost("meta", "muse-spark-1.3", { input: MILLION, output: MILLION })).toEqual([125_000_000, 425_000_000]);
    expect(callCost("meta", "muse-spark-1.3-contributor", { input: MILLION, output: MILLION })).toEqual([10_000_000, 20_000_000]);
    expect(callCost("groq", "meta-llama/llama-4-scout-17b-16e-instruct", { input: MILLION, output: MILLION })).toEqual([11_000_000, 34_000_000]);
  });

  test("current DeepSeek models", () => {
    // (200000 × 1.32 + 800000 × 0.044) × 100; 100000 × 3.96 × 100.
    expect(callCost("deepseek", "deepseek-v4-pro", { input: MILLION, cached: 800_000, output: 100_000 })).toEqual([29_920_000, 39_600_000]);
    expect(callCost("together_ai", "deepseek-ai/DeepSeek-V3.2", { input: MILLION, output: MILLION })).toEqual([28_000_000, 42_000_000]);
  });

  test("current xAI models: the fast tier at its own price, not Grok 4's $3/$15", () => {
    expect(callCost("x-ai", "grok-4-1-fast-reasoning", { input: MILLION, output: MILLION })).toEqual([20_000_000, 50_000_000]);
    expect(callCost("xai", "grok-4-0709", { input: MILLION, output: MILLION })).toEqual([300_000_000, 1_500_000_000]);
    // (500000 × 2 + 500000 × 0.50) × 100; 1M × 6 × 100.
    expect(callCost("xai", "grok-4.7", { input: MILLION, cached: 500_000, output: MILLION })).toEqual([125_000_000, 600_000_000]);
  });

  test("the response model is priced when the request model is an alias", () => {
    const row = priced({ "gen_ai.request.model": "latest", "gen_ai.response.model": "gpt-4o-mini-2024-07-18", "gen_ai.usage.input_tokens": 1_000_000 });
    expect(row.cost_input_microcents).toBe(15_000_000);
  });

  test("explicit cost attributes win, not estimated", () => {
    const genAi = priced({ "gen_ai.request.model": "gpt-4o", "gen_ai.usage.input_tokens": 1000, "gen_ai.usage.input_cost": 0.0012, "gen_ai.usage.output_cost": 0.0034 });
    expect([genAi.cost_input_microcents, genAi.cost_output_microcents, genAi.cost_total_microcents, genAi.cost_is_estimated]).toEqual([120_000, 340_000, 460_000, false]);
    const openInference = priced({ "llm.model_name": "unknown-model", "llm.cost.prompt": 1, "llm.cost.completion": "0.5" });
    expect([openInference.cost_input_microcents, openInference.cost_output_microcents, openInference.cost_is_estimated]).toEqual([100_000_000, 50_000_000, false]);
  });

  test("only one explicit cost side: estimated from the table instead", () => {
    const row = priced({ "gen_ai.request.model": "gpt-4o", "gen_ai.usage.input_tokens": 1000, "gen_ai.usage.input_cost": 99 });
    expect([row.cost_input_microcents, row.cost_is_estimated]).toEqual([250_000, true]);
  });

  test("an unknown model costs zero and is not estimated", () => {
    const row = priced({ "gen_ai.request.model": "my-finetune", "gen_ai.usage.input_tokens": 1000, "gen_ai.usage.output_tokens": 1000 });
    expect([row.cost_input_microcents, row.cost_output_microcents, row.cost_total_microcents, row.cost_is_estimated]).toEqual([0, 0, 0, false]);
  });

  test("an unlisted dotted version costs zero rather than its family's price", () => {
    const row = priced({ "gen_ai.provider.name": "openai", "gen_ai.request.model": "gpt-5.3", "gen_ai.usage.input_tokens": 1000, "gen_ai.usage.output_tokens": 1000 });
    expect([row.cost_total_microcents, row.cost_is_estimated]).toEqual([0, false]);
  });
});
