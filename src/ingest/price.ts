import { attributeNumber, isRecord, parseJsonValue, type AttributeValue } from "./attributes";
import { normalizeProvider } from "./map-operation";
import pricingTable from "./pricing.json";
import type { SpanRow } from "./row";

/** USD per 1M tokens, with the table's fallbacks applied: cache rates to the input rate, reasoning to output. */
export interface ModelPrice {
  input: number;
  output: number;
  cacheRead: number;
  cacheWrite: number;
  reasoning: number;
}

interface ListedPrice {
  input: number;
  output: number;
  cacheRead?: number;
  cacheWrite?: number;
  reasoning?: number;
}

const MICROCENTS_PER_USD = 100_000_000;
/** Tokens × USD per 1M tokens → microcents. */
const MICROCENTS_PER_TOKEN_AT_ONE_USD_PER_MILLION = MICROCENTS_PER_USD / 1_000_000;

/** One character step of a model-name trie; `price` marks the end of a listed model. */
interface PriceNode {
  children: Map<string, PriceNode>;
  price?: ModelPrice;
}

const newNode = (): PriceNode => ({ children: new Map() });

function insert(root: PriceNode, model: string, price: ModelPrice): void {
  let node = root;
  for (const char of model) {
    let child = node.children.get(char);
    if (!child) node.children.set(char, (child = newNode()));
    node = child;
  }
  node.price ??= price;
}

/**
 * A listed name prices a longer model name only up to one of these (`gpt-4` must not price `gpt-4o`);
 * `[` opens Claude Code's context suffix (`claude-opus-4-6[1m]`). A dot is not one: it continues a version
 * number, and a dotted version the table lacks gets no price rather than its family's, which is often
 * several times off (`gpt-5` is $1.25 per 1M input tokens, `gpt-5.5` $5).
 */
const NAME_BOUNDARIES = new Set(["-", ":", "@", "_", "["]);
/**
 * After a name ending in a digit, a dash and a one- or two-digit segment is a minor version (`claude-opus-4-7`,
 * `grok-4-1-fast`): another model, so `claude-opus-4` must not price it. `-0` (`claude-opus-4-0`) names the
 * same model, and longer numbers are dates (`claude-opus-4-20250514`, `grok-4-0709`).
 */
const DASHED_MINOR_VERSION = /^-[1-9]\d?(?=[-:@_[]|$)/;
const isDigit = (char: string) => char >= "0" && char <= "9";

/** Whether a listed name that is `model`'s first `length` characters names `model` or a snapshot of it. */
function endsListedName(model: string, length: number): boolean {
  if (length === model.length) return true;
  if (!NAME_BOUNDARIES.has(model[length])) return false;
  return !(isDigit(model[length - 1]) && DASHED_MINOR_VERSION.test(model.slice(length)));
}

/** Price of the longest listed name that prefixes `model` at a name boundary. O(model length). */
function longestPrefix(root: PriceNode, model: string): ModelPrice | undefined {
  let node: PriceNode | undefined = root;
  let found: ModelPrice | undefined;
  for (let i = 0; node && i < model.length; i++) {
    node = node.children.get(model[i]);
    if (node?.price && endsListedName(model, i + 1)) found = node.price;
  }
  return found;
}

const withFallbacks = (listed: ListedPrice): ModelPrice => ({
  input: listed.input,
  output: listed.output,
  cacheRead: listed.cacheRead ?? listed.input,
  cacheWrite: listed.cacheWrite ?? listed.input,
  reasoning: listed.reasoning ?? listed.output,
});

const providerPrices = new Map<string, PriceNode>();
/** Every listed model, for hosts that resell them (Bedrock, Vertex, Azure, gateways): first provider wins. */
const anyProviderPrices = newNode();
for (const [provider, models] of Object.entries(pricingTable.providers as Record<string, Record<string, ListedPrice>>)) {
  const root = newNode();
  for (const [model, listed] of Object.entries(models)) {
    const price = withFallbacks(listed);
    insert(root, model, price);
    insert(anyProviderPrices, model, price);
  }
  providerPrices.set(provider, root);
}

const CLOUD_REGION_PREFIX = /^(us|us-gov|eu|apac|jp|au|global)\./;
const VENDOR_PREFIX = /^(anthropic|meta|mistral|amazon|cohere|ai21|deepseek|openai|google|xai)\./;
/** Fireworks writes versions with a `p`: `deepseek-v3p2`, `llama-v3p3-70b-instruct`. */
const FIREWORKS_VERSION = /(^|-)v(\d+)p(\d+)(?=-|$)/;
const LLAMA_VERSION = /^llama-?v?(\d)(?:[.-](\d)(?=[-:_]|$))?/;

/**
 * The model name as the table lists it: lowercase, without a path (`openai/gpt-4o`, `models/gemini-…`),
 * Bedrock region and vendor prefixes (`us.anthropic.claude-…`), with dotted Claude versions dashed
 * (`claude-3.5-sonnet`), Fireworks versions dotted (`deepseek-v3p2`) and Llama versions dotted
 * (`llama3-1-70b` → `llama-3.1-70b`).
 */
export function canonicalModelName(model: string): string {
  let name = model.trim().toLowerCase();
  name = name.slice(name.lastIndexOf("/") + 1);
  name = name.replace(CLOUD_REGION_PREFIX, "").replace(VENDOR_PREFIX, "");
  if (name.startsWith("claude")) name = name.replace(/(\d)\.(\d)/g, "$1-$2");
  name = name.replace(FIREWORKS_VERSION, "$1v$2.$3");
  return name.replace(LLAMA_VERSION, (_match, major: string, minor?: string) => (minor ? `llama-${major}.${minor}` : `llama-${major}`));
}

/** The listed price of a model: the provider's own list first, then any provider's. */
export function findModelPrice(provider: string, model: string): ModelPrice | undefined {
  if (!model) return undefined;
  const name = canonicalModelName(model);
  const own = providerPrices.get(normalizeProvider(provider));
  return (own && longestPrefix(own, name)) ?? longestPrefix(anyProviderPrices, name);
}

const EXPLICIT_INPUT_COST = ["gen_ai.usage.input_cost", "llm.cost.prompt"];
const EXPLICIT_OUTPUT_COST = ["gen_ai.usage.output_cost", "llm.cost.completion"];

/** Explicit USD cost attributes, left in the typed maps by `mapSpan`. */
function explicitCost(row: SpanRow, keys: string[]): number | undefined {
  for (const key of keys) {
    const value = row.attr_float[key] ?? row.attr_int[key] ?? attributeNumber(row.attr_string[key]);
    if (value !== undefined && value >= 0) return value;
  }
  return undefined;
}

/** Langfuse `cost_details` in USD: `{"input", "output", "total", "input_cached_tokens", …}`; each side is the sum of its keys. */
function langfuseCost(row: SpanRow): { input: number; output: number } | undefined {
  const details = row.attr_string["langfuse.observation.cost_details"];
  if (!details) return undefined;
  const parsed = parseJsonValue(details);
  if (!isRecord(parsed)) return undefined;
  let input: number | undefined;
  let output: number | undefined;
  for (const [key, value] of Object.entries(parsed)) {
    const usd = attributeNumber(value as AttributeValue);
    if (usd === undefined || usd < 0) continue;
    if (key.startsWith("input")) input = (input ?? 0) + usd;
    else if (key.startsWith("output")) output = (output ?? 0) + usd;
  }
  return input !== undefined && output !== undefined ? { input, output } : undefined;
}

const toMicrocents = (usd: number) => Math.round(usd * MICROCENTS_PER_USD);

/**
 * Fills the cost columns: explicit input and output costs when the span carries both (not estimated),
 * otherwise tokens × the listed price (estimated), otherwise zero (not estimated).
 */
export function priceSpan(row: SpanRow): SpanRow {
  const langfuse = langfuseCost(row);
  const inputUsd = explicitCost(row, EXPLICIT_INPUT_COST) ?? langfuse?.input;
  const outputUsd = explicitCost(row, EXPLICIT_OUTPUT_COST) ?? langfuse?.output;
  if (inputUsd !== undefined && outputUsd !== undefined) {
    row.cost_input_microcents = toMicrocents(inputUsd);
    row.cost_output_microcents = toMicrocents(outputUsd);
    row.cost_is_estimated = false;
  } else {
    const price = findModelPrice(row.provider, row.response_model) ?? findModelPrice(row.provider, row.model);
    const rate = MICROCENTS_PER_TOKEN_AT_ONE_USD_PER_MILLION;
    row.cost_input_microcents = price
      ? Math.round((row.tokens_input * price.input + row.tokens_cache_read * price.cacheRead + row.tokens_cache_create * price.cacheWrite) * rate)
      : 0;
    row.cost_output_microcents = price ? Math.round((row.tokens_output * price.output + row.tokens_reasoning * price.reasoning) * rate) : 0;
    row.cost_is_estimated = price !== undefined;
  }
  row.cost_total_microcents = row.cost_input_microcents + row.cost_output_microcents;
  return row;
}
