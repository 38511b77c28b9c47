import { RE2JS } from "re2js";
import { calibratedSimilarity } from "./discovery";
import { cosine, type FeedbackEmbedder } from "./embedding";
import type { EvaluationSettings, RuleCondition } from "./model";
import { isFailedToolResult, messageText, partsOf, type TraceFacts, type TraceMetrics } from "./trace-facts";

type Rule = Extract<EvaluationSettings, { kind: "rule" }>;
type TextMatch = Extract<RuleCondition, { type: "text_match" }>;

const compiledPatterns = new WeakMap<TextMatch, RE2JS>();

/**
 * A `text_match` condition's regular expression, in RE2 syntax, run by RE2's linear-time matcher (re2js):
 * a pattern a project member writes runs in the event loop on every quiet trace, and with a backtracking
 * engine one like `(a+)+$` would stall the process. Compiled once per condition object (one scan's
 * evaluations); throws on a pattern RE2 does not accept (lookarounds, backreferences).
 */
function conditionPattern(condition: TextMatch): RE2JS {
  let pattern = compiledPatterns.get(condition);
  if (!pattern) {
    pattern = RE2JS.compile(condition.value, condition.caseSensitive ? 0 : RE2JS.CASE_INSENSITIVE);
    compiledPatterns.set(condition, pattern);
  }
  return pattern;
}

/** The first regular expression of a rule that cannot run, with why; null when every one compiles. */
export function invalidPattern(rule: Rule): { index: number; reason: string } | null {
  for (const [index, condition] of rule.conditions.entries()) {
    if (condition.type !== "text_match" || !condition.operator.endsWith("regex")) continue;
    try {
      conditionPattern(condition);
    } catch (error) {
      return { index, reason: (error as Error).message };
    }
  }
  return null;
}

type Comparison = "gt" | "gte" | "lt" | "lte";

const compare = (left: number, operator: Comparison, right: number) =>
  operator === "gt" ? left > right : operator === "gte" ? left >= right : operator === "lt" ? left < right : left <= right;

/** Metrics of the other traces of a session, for `metric` conditions aggregated over the session. */
export type SessionMetrics = TraceMetrics[];

function lastAssistantText(facts: TraceFacts): string {
  const last = facts.conversation.filter((message) => message.role === "assistant").at(-1);
  return last ? messageText(last) : "";
}

/** The texts a `text_match` scope covers. */
function scopeTexts(facts: TraceFacts, scope: string): string[] {
  const of = (role: string) => facts.conversation.filter((message) => message.role === role).map(messageText);
  if (scope === "last_assistant") return [lastAssistantText(facts)];
  if (scope === "any_assistant") return of("assistant");
  if (scope === "any_user") return of("user");
  if (scope === "any_tool") {
    const inMessages = facts.conversation.flatMap((message) =>
      partsOf(message)
        .filter((part) => part.type === "tool_call_response")
        .map((part) => (typeof part.response === "string" ? part.response : JSON.stringify(part.response ?? null))),
    );
    const fromSpans = facts.toolResults.filter((result) => result.messageIndex === null).map((result) => (typeof result.response === "string" ? result.response : JSON.stringify(result.response)));
    return [...of("tool").concat(inMessages), ...fromSpans];
  }
  return facts.conversation.map(messageText);
}

const metricValue = (metrics: TraceMetrics, field: string): number =>
  field === "duration"
    ? metrics.durationMs
    : field === "cost"
      ? metrics.cost
      : field === "tokensTotal"
        ? metrics.tokensInput + metrics.tokensOutput
        : field === "tokensInput"
          ? metrics.tokensInput
          : field === "tokensOutput"
            ? metrics.tokensOutput
            : field === "errorCount"
              ? metrics.errorCount
              : field === "spanCount"
                ? metrics.spanCount
                : 1; // traceCount of one trace

function isValidJson(text: string): boolean {
  const body = text.trim().replace(/^```(?:json)?\s*([\s\S]*?)\s*```$/i, "$1");
  if (!body) return false;
  try {
    JSON.parse(body);
    return true;
  } catch {
    return false;
  }
}

/** Whether one condition holds on the trace (`metric` over the session when it says so). */
export async function conditionHolds(condition: RuleCondition, facts: TraceFacts, session: SessionMetrics, embedder: FeedbackEmbedder): Promise<boolean> {
  switch (condition.type) {
    case "always":
      return true;
    case "text_match": {
      const texts = scopeTexts(facts, condition.scope ?? "conversation");
      const regex = condition.operator.endsWith("regex") ? conditionPattern(condition) : null;
      const needle = condition.caseSensitive ? condition.value : condition.value.toLowerCase();
      const found = texts.some((text) => (regex ? regex.test(text) : (condition.caseSensitive ? text : text.toLowerCase()).includes(needle)));
      return condition.operator.startsWith("not_") ? !found : found;
    }
    case "empty_output":
      return lastAssistantText(facts).trim() === "";
    case "output_length": {
      const text = lastAssistantText(facts);
      const length = condition.unit === "words" ? text.split(/\s+/).filter(Boolean).length : [...text].length;
      return compare(length, condition.operator, condition.value);
    }
    case "json_output":
      return isValidJson(lastAssistantText(facts)) === (condition.expectation === "valid");
    case "metric": {
      const traces = condition.aggregation && session.length ? session : [facts.metrics];
      if (condition.aggregation === "session") {
        const total = condition.field === "traceCount" ? traces.length : traces.reduce((sum, metrics) => sum + metricValue(metrics, condition.field), 0);
        return compare(total, condition.operator, condition.value);
      }
      const holds = (metrics: TraceMetrics) => compare(metricValue(metrics, condition.field), condition.operator, condition.value);
      return condition.aggregation === "allTraces" ? traces.every(holds) : traces.some(holds);
    }
    case "tool_used":
      return facts.toolCalls.some((call) => call.name === condition.toolName) || facts.toolResults.some((result) => result.name === condition.toolName);
    case "tool_failed":
      return facts.toolResults.some((result) => {
        const name = result.name ?? facts.toolCalls.find((call) => call.id === result.id)?.name ?? null;
        return isFailedToolResult(result.response) && (!condition.toolName || name === condition.toolName);
      });
    case "tool_call_count":
      return compare(facts.toolCalls.length, condition.operator, condition.value);
    case "error":
      return facts.metrics.errorCount > 0;
    case "finish_reason":
      return facts.finishReasons.includes(condition.value);
    case "semantic_similarity": {
      const [query, output] = await embedder.embed([condition.query, lastAssistantText(facts)]);
      const similarity = calibratedSimilarity(embedder.mode, cosine(query!, output!));
      return compare(similarity, condition.operator ?? "gte", condition.threshold);
    }
  }
}

/** A rule matches when all (default) or any of its conditions hold; the result names those that held. */
export async function ruleMatches(rule: Rule, facts: TraceFacts, session: SessionMetrics, embedder: FeedbackEmbedder): Promise<{ matched: boolean; held: string[] }> {
  const held: string[] = [];
  for (const condition of rule.conditions) if (await conditionHolds(condition, facts, session, embedder)) held.push(condition.type);
  const matched = rule.match === "any" ? held.length > 0 : held.length === rule.conditions.length;
  return { matched, held };
}
