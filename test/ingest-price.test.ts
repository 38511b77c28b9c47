import { describe, expect, test } from "bun:test";
import type { AttributeValue } from "../src/ingest/attributes";
import { mapResource, mapSpan } from "../src/ingest/map";
import { canonicalModelName, findModelPrice, priceSpan } from "../src/ingest/price";
import pricingTable from "../src/ingest/pricing.json";
import type { SpanRow } from "../src/ingest/row";

const owner = { organizationId: "o", projectId: "p", apiKeyId: "k" };

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

describe("the pricing table", () => {
  test("states its source and date, and lists every provider asked for", () => {
    expect(pricingTable.source).toContain("pricing");
    expect(pricingTable.date).toMatch(/^\d{4}-\d{2}-\d{2}$/);
    expect(Object.keys(pricingTable.providers)).toEqual(expect.arrayContaining(["openai", "anthropic", "google", "mistral", "meta", "deepseek", "xai"]));
  });

  test("every price is a non-negative number", () => {
    for (const models of Object.values(pricingTable.providers)) {
      for (const price of Object.values(models as Record<string, Record<string, number>>)) {
        for (const rate of Object.values(price)) expect(rate).toBeGreaterThanOrEqual(0);
        expect(typeof price.input).toBe("number");
        expect(typeof price.output).toBe("number");
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
    expect(findModelPrice("openai", "gpt-4o-mini")?.input).toBe(0.15);
    expect(findModelPrice("anthropic", "claude-sonnet-4-5-20250929")?.output).toBe(15);
    expect(findModelPrice("anthropic", "claude-opus-4-1-20250805")?.input).toBe(15);
    expect(findModelPrice("google", "gemini-2.5-flash-lite-preview-06-17")?.input).toBe(0.1);
  });

  test("a listed name does not price a different model it happens to prefix", () => {
    expect(findModelPrice("openai", "gpt-4ox")).toBeUndefined();
    expect(findModelPrice("openai", "o3x")).toBeUndefined();
    expect(findModelPrice("openai", "gpt-4.7")).toBeUndefined();
  });

  test("Bedrock region and vendor prefixes, paths and version spellings", () => {
    expect(canonicalModelName("us.anthropic.claude-3-5-sonnet-20241022-v2:0")).toBe("claude-3-5-sonnet-20241022-v2:0");
    expect(findModelPrice("amazon-bedrock", "eu.anthropic.claude-3-7-sonnet-20250219-v1:0")?.input).toBe(3);
    expect(findModelPrice("amazon-bedrock", "apac.anthropic.claude-3-haiku-20240307-v1:0")?.input).toBe(0.25);
    expect(findModelPrice("amazon-bedrock", "meta.llama3-1-70b-instruct-v1:0")?.input).toBe(0.88);
    expect(findModelPrice("google-vertex", "claude-3-5-sonnet-v2@20241022")?.input).toBe(3);
    expect(findModelPrice("openrouter", "anthropic/claude-3.5-sonnet")?.input).toBe(3);
    expect(findModelPrice("google", "models/gemini-1.5-pro-002")?.output).toBe(5);
    expect(findModelPrice("groq", "meta-llama/Llama-4-Scout-17B-16E-Instruct")?.input).toBe(0.18);
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
});
