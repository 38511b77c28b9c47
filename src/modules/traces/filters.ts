import { badRequest } from "../../lib/errors";
import type { QueryParams } from "./params";
import type { TraceColumn } from "./relation";

/**
 * The trace filter compiler: a TraceFilterSet (SPEC.md §2 Filters) becomes one SQL condition over
 * the trace relation (relation.ts), with every caller value bound as a query parameter.
 *
 * Fields live in a registry. Core fields are registered below; other modules add theirs at import
 * time with `registerTraceFilterField` (one name) or `registerTraceFilterPrefix` (a family such as
 * `score.*` or `metadata.<key>`). A field either names an expression over the relation and gets the
 * standard operator semantics of its kind, or compiles its own SQL (usually
 * `trace_id IN (subquery)`, see `traceIdSubquery`).
 */

export const filterOperators = [
  "eq",
  "neq",
  "gt",
  "gte",
  "lt",
  "lte",
  "in",
  "notIn",
  "contains",
  "notContains",
  "gtePercentile",
] as const;
export type FilterOperator = (typeof filterOperators)[number];

export type FilterScalar = string | number | boolean;
export interface FilterCondition {
  op: string;
  value: unknown;
}
export type FilterSet = Record<string, FilterCondition[]>;

/**
 * How a field's values are validated and compared.
 * - string: `contains` is a case-insensitive substring match.
 * - stringList: the field is an array; `eq`/`neq` test for an element equal to the value, `in`/`notIn`
 *   for any element among the values, `contains`/`notContains` for an element containing the substring.
 * - time: ISO-8601 values, compared at nanosecond precision.
 * - enum: one of the field's `values`, case-insensitive.
 */
export type FilterKind = "string" | "number" | "boolean" | "time" | "stringList" | "enum";

const operatorsByKind: Record<FilterKind, readonly FilterOperator[]> = {
  string: ["eq", "neq", "in", "notIn", "contains", "notContains"],
  number: ["eq", "neq", "gt", "gte", "lt", "lte", "in", "notIn"],
  boolean: ["eq", "neq"],
  time: ["eq", "neq", "gt", "gte", "lt", "lte"],
  stringList: ["eq", "neq", "in", "notIn", "contains", "notContains"],
  enum: ["eq", "neq", "in", "notIn"],
};

/** A condition after validation: values converted to what the SQL parameter type expects. */
export interface ValidCondition {
  op: FilterOperator;
  /** The single value, or the list for `in`/`notIn`. For `gtePercentile`, the percentile 0–100. */
  value: FilterScalar | FilterScalar[];
}

export interface FilterSqlContext {
  params: QueryParams;
  database: string;
  /** Placeholders of the tenant, for subqueries against other tables. */
  organizationId: string;
  projectId: string;
  /**
   * Conditions a subquery over `spans` may AND in: a span-level time window implied by the trace
   * time filters, and the snapshot bound of a paged walk. Always valid SQL ("1" when empty).
   */
  spanScope: string;
  /** SQL of the fraction-quantile of `expression` over the project's traces within `window`. */
  percentile(expression: string, columns: readonly TraceColumn[], fraction: number, window: string): string;
}

export interface TraceFilterField {
  kind: FilterKind;
  /** For `enum`: the accepted values, lowercase. */
  values?: readonly string[];
  /** Whether `gtePercentile` applies (numbers only). */
  percentile?: boolean;
  /** Relation columns the expression reads. */
  columns?: readonly TraceColumn[];
  /** SQL over the trace relation, compared with the standard semantics of `kind`. */
  expression?: string;
  /** Own SQL for a validated condition, for fields that are not a relation column. */
  compile?(condition: ValidCondition, ctx: FilterSqlContext): string;
  /** Own SQL for every condition on the fields of one family at once, so the family is read in one scan. */
  group?: TraceFilterGroup;
}

export interface TraceFilterGroup {
  compile(conditions: { name: string; condition: ValidCondition }[], ctx: FilterSqlContext): string;
}

const fields = new Map<string, TraceFilterField>();
const prefixes = new Map<string, (key: string) => TraceFilterField | null>();

export function registerTraceFilterField(name: string, field: TraceFilterField): void {
  if ([field.expression, field.compile, field.group].filter(Boolean).length !== 1) throw new Error(`filter field ${name}: give exactly one of expression, compile or group`);
  fields.set(name, field);
}

/** Registers every field `prefix + key`; `resolve` returns null for a key it does not accept. */
export function registerTraceFilterPrefix(prefix: string, resolve: (key: string) => TraceFilterField | null): void {
  prefixes.set(prefix, resolve);
}

export function traceFilterField(name: string): TraceFilterField | null {
  const direct = fields.get(name);
  if (direct) return direct;
  for (const [prefix, resolve] of prefixes) {
    if (name.startsWith(prefix) && name.length > prefix.length) return resolve(name.slice(prefix.length));
  }
  return null;
}

const negated: Partial<Record<FilterOperator, FilterOperator>> = { neq: "eq", notIn: "in", notContains: "contains" };

/**
 * For fields answered by a subquery of matching trace ids: `neq`, `notIn` and `notContains` mean "no
 * row of the trace matches the positive condition", so a trace without rows passes them.
 */
export function traceIdSubquery(condition: ValidCondition, subquery: (positive: ValidCondition) => string): string {
  const positive = negated[condition.op];
  return positive
    ? `trace_id NOT IN (${subquery({ op: positive, value: condition.value })})`
    : `trace_id IN (${subquery(condition)})`;
}

const sqlOperator: Partial<Record<FilterOperator, string>> = { eq: "=", neq: "!=", gt: ">", gte: ">=", lt: "<", lte: "<=" };

const paramType: Record<FilterKind, string> = {
  string: "String",
  number: "Float64",
  boolean: "Bool",
  time: "DateTime64(9, 'UTC')",
  stringList: "String",
  enum: "String",
};

/** The standard semantics of a kind: `expression` compared with a validated condition. */
export function compareSql(expression: string, kind: FilterKind, condition: ValidCondition, params: QueryParams): string {
  const { op, value } = condition;
  const type = paramType[kind];
  if (kind === "stringList") {
    if (op === "eq") return `has(${expression}, ${params.bind(value, type)})`;
    if (op === "neq") return `NOT has(${expression}, ${params.bind(value, type)})`;
    if (op === "in") return `hasAny(${expression}, ${params.bind(value, `Array(${type})`)})`;
    if (op === "notIn") return `NOT hasAny(${expression}, ${params.bind(value, `Array(${type})`)})`;
    const match = `arrayExists(element -> positionCaseInsensitiveUTF8(element, ${params.bind(value, type)}) > 0, ${expression})`;
    return op === "contains" ? match : `NOT ${match}`;
  }
  if (op === "in" || op === "notIn") {
    const list = params.bind(value, `Array(${type})`);
    const member = kind === "number" ? `has(${list}, toFloat64(${expression}))` : `${expression} IN ${list}`;
    return op === "in" ? member : `NOT (${member})`;
  }
  if (op === "contains") return `positionCaseInsensitiveUTF8(${expression}, ${params.bind(value, type)}) > 0`;
  if (op === "notContains") return `positionCaseInsensitiveUTF8(${expression}, ${params.bind(value, type)}) = 0`;
  const comparison = sqlOperator[op];
  if (!comparison) throw new Error(`operator ${op} has no comparison form`);
  return `${expression} ${comparison} ${params.bind(value, type)}`;
}

/**
 * What one filter set may ask for: enough for any screen of the product (a few dozen fields, a handful
 * of conditions each, value lists a person picks from), small enough that the compiled query stays
 * far below ClickHouse's query size limit and one request cannot hold the engine for long.
 */
export const filterLimits = {
  fields: 32,
  conditionsPerField: 8,
  conditions: 64,
  listValues: 100,
  values: 1000,
  stringLength: 1000,
  /** Characters of all string values together: each one is carried, parsed and compared by every query of a list. */
  valueCharacters: 65_536,
} as const;

/** DateTime64(9) holds 1900-01-01 to 2262-04-11; filter and analytics instants stay inside whole years of it. */
export const timeRange = { minYear: 1900, maxYear: 2261 } as const;

const isoDateTime = /^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?)?(Z|[+-]\d{2}:?\d{2})?$/;

/** ISO-8601 to ClickHouse `DateTime64(9)` text in UTC, keeping sub-millisecond digits; null when invalid. */
export function isoToDateTime64(value: string): string | null {
  const match = isoDateTime.exec(value.trim());
  if (!match) return null;
  const [, year, month, day, hour = "00", minute = "00", second = "00", fraction = "", zone = "Z"] = match;
  const offset = zone === "Z" ? "Z" : zone.includes(":") ? zone : `${zone.slice(0, 3)}:${zone.slice(3)}`;
  const millis = Date.parse(`${year}-${month}-${day}T${hour}:${minute}:${second}${offset}`);
  if (Number.isNaN(millis)) return null;
  const utc = new Date(millis);
  if (zone === "Z" && (utc.getUTCDate() !== Number(day) || utc.getUTCHours() !== Number(hour))) return null;
  if (utc.getUTCFullYear() < timeRange.minYear || utc.getUTCFullYear() > timeRange.maxYear) return null;
  const nanos = fraction.padEnd(9, "0");
  return `${utc.toISOString().slice(0, 19).replace("T", " ")}.${nanos}`;
}

class FilterError {
  constructor(readonly message: string) {}
}

/**
 * A number, given as a number or as its decimal text, within ±(2^53 − 1): past it a JSON number is
 * no longer exact, and ClickHouse parameters refuse it. null otherwise.
 */
function numberOf(raw: unknown): number | null {
  const number = typeof raw === "string" && /^-?\d+(\.\d+)?([eE][-+]?\d+)?$/.test(raw.trim()) ? Number(raw) : raw;
  return typeof number === "number" && Math.abs(number) <= Number.MAX_SAFE_INTEGER ? number : null;
}

function scalarFor(field: TraceFilterField, raw: unknown, where: string): FilterScalar {
  switch (field.kind) {
    case "string":
    case "stringList":
      if (typeof raw === "number" && Number.isFinite(raw)) return String(raw);
      if (typeof raw !== "string") throw new FilterError(`${where} must be a string`);
      if (raw.length > filterLimits.stringLength) throw new FilterError(`${where} is longer than ${filterLimits.stringLength} characters`);
      return raw;
    case "number": {
      const number = numberOf(raw);
      if (number === null) throw new FilterError(`${where} must be a number from -${Number.MAX_SAFE_INTEGER} to ${Number.MAX_SAFE_INTEGER}`);
      return number;
    }
    case "boolean":
      if (raw === "true" || raw === "false") return raw === "true";
      if (typeof raw !== "boolean") throw new FilterError(`${where} must be a boolean`);
      return raw;
    case "time": {
      const time = typeof raw === "string" ? isoToDateTime64(raw) : null;
      if (!time) throw new FilterError(`${where} must be an ISO-8601 timestamp from ${timeRange.minYear} to ${timeRange.maxYear}`);
      return time;
    }
    case "enum": {
      const value = typeof raw === "string" ? raw.toLowerCase() : null;
      if (!value || !field.values?.includes(value)) throw new FilterError(`${where} must be one of ${field.values?.join(", ")}`);
      return value;
    }
  }
}

function validateCondition(name: string, field: TraceFilterField, condition: unknown, index: number): ValidCondition {
  const where = `filters.${name}[${index}]`;
  if (typeof condition !== "object" || condition === null || Array.isArray(condition)) {
    throw new FilterError(`${where} must be an object with op and value`);
  }
  const { op, value } = condition as { op?: unknown; value?: unknown };
  if (typeof op !== "string" || !(filterOperators as readonly string[]).includes(op)) {
    throw new FilterError(`${where}.op: unknown operator ${JSON.stringify(op)}; expected one of ${filterOperators.join(", ")}`);
  }
  const operator = op as FilterOperator;
  if (value === undefined || value === null) throw new FilterError(`${where}.value is required`);
  if (operator === "gtePercentile") {
    if (!field.percentile) throw new FilterError(`${where}.op: gtePercentile is supported only on duration, ttft and cost`);
    const percentile = numberOf(value);
    if (percentile === null || percentile < 0 || percentile > 100) throw new FilterError(`${where}.value must be a percentile between 0 and 100`);
    return { op: operator, value: percentile };
  }
  if (!operatorsByKind[field.kind].includes(operator)) {
    throw new FilterError(`${where}.op: ${operator} does not apply to ${name}; use one of ${operatorsByKind[field.kind].join(", ")}`);
  }
  if (operator === "in" || operator === "notIn") {
    if (!Array.isArray(value) || value.length === 0) throw new FilterError(`${where}.value must be a non-empty array for ${operator}`);
    if (value.length > filterLimits.listValues) throw new FilterError(`${where}.value has more than ${filterLimits.listValues} items`);
    return { op: operator, value: value.map((item, i) => scalarFor(field, item, `${where}.value[${i}]`)) };
  }
  if (Array.isArray(value)) throw new FilterError(`${where}.value must be a single value for ${operator}; arrays are for in and notIn`);
  return { op: operator, value: scalarFor(field, value, `${where}.value`) };
}

export interface ValidFilterSet {
  conditions: { name: string; field: TraceFilterField; condition: ValidCondition }[];
}

/** Validates a filter set; throws a 400 naming the offending field, operator or value, or the limit it passes. */
export function validateTraceFilters(filters: unknown): ValidFilterSet {
  if (filters === undefined || filters === null) return { conditions: [] };
  if (typeof filters !== "object" || Array.isArray(filters)) throw badRequest("filters must be an object of field to conditions");
  const entries = Object.entries(filters as Record<string, unknown>);
  if (entries.length > filterLimits.fields) throw badRequest(`filters has more than ${filterLimits.fields} fields`);
  const conditions: ValidFilterSet["conditions"] = [];
  let values = 0;
  let characters = 0;
  try {
    for (const [name, list] of entries) {
      const field = traceFilterField(name);
      if (!field) throw new FilterError(`filters.${name}: unknown filter field`);
      if (!Array.isArray(list)) throw new FilterError(`filters.${name} must be an array of conditions`);
      if (list.length > filterLimits.conditionsPerField) throw new FilterError(`filters.${name} has more than ${filterLimits.conditionsPerField} conditions`);
      if (conditions.length + list.length > filterLimits.conditions) throw new FilterError(`filters has more than ${filterLimits.conditions} conditions in all`);
      list.forEach((condition, index) => {
        const valid = validateCondition(name, field, condition, index);
        const scalars = Array.isArray(valid.value) ? valid.value : [valid.value];
        values += scalars.length;
        for (const scalar of scalars) if (typeof scalar === "string") characters += scalar.length;
        if (values > filterLimits.values) throw new FilterError(`filters has more than ${filterLimits.values} values in all`);
        if (characters > filterLimits.valueCharacters) throw new FilterError(`filters has more than ${filterLimits.valueCharacters} characters of values in all`);
        conditions.push({ name, field, condition: valid });
      });
    }
  } catch (error) {
    if (error instanceof FilterError) throw badRequest(error.message);
    throw error;
  }
  return { conditions };
}

export interface CompiledFilters {
  /** One condition over the trace relation; "1" when there are no filters. */
  where: string;
  /** Relation columns the condition reads. */
  columns: Set<TraceColumn>;
  /** Span-level window implied by the trace time filters ("1" when none), for span subqueries. */
  spanWindow: string;
}

const timeFields: Record<string, "start_time" | "end_time"> = { startTime: "start_time", endTime: "end_time" };

/**
 * Span conditions implied by trace time bounds: every span of a trace starting at or after t starts at
 * or after t, and every span of a trace ending at or before t ends at or before t.
 */
function spanWindowFor(valid: ValidFilterSet, params: QueryParams): string[] {
  const window: string[] = [];
  for (const { name, condition } of valid.conditions) {
    const column = timeFields[name];
    if (!column || Array.isArray(condition.value)) continue;
    const bound = () => params.bind(condition.value, paramType.time);
    if (column === "start_time" && (condition.op === "gte" || condition.op === "gt" || condition.op === "eq")) {
      window.push(`start_time >= ${bound()}`);
    }
    if (column === "end_time" && (condition.op === "lte" || condition.op === "lt" || condition.op === "eq")) {
      window.push(`end_time <= ${bound()}`);
    }
  }
  return window;
}

/**
 * Compiles validated filters. `ctx.spanScope` is extended with the span window the time filters
 * imply before fields compile their subqueries.
 */
export function compileTraceFilters(valid: ValidFilterSet, ctx: FilterSqlContext): CompiledFilters {
  const columns = new Set<TraceColumn>();
  const spanWindow = spanWindowFor(valid, ctx.params);
  const scoped: FilterSqlContext = { ...ctx, spanScope: [ctx.spanScope, ...spanWindow].join(" AND ") };

  // The percentile window: this filter set's own time conditions, over the project's traces.
  const timeConditions = valid.conditions.filter(({ name }) => name in timeFields);
  const windowColumns = new Set<TraceColumn>(timeConditions.map(({ name }) => timeFields[name]));
  const window = timeConditions.map(({ field, condition }) => compareSql(field.expression!, field.kind, condition, ctx.params)).join(" AND ") || "1";

  const groups = new Map<TraceFilterGroup, { name: string; condition: ValidCondition }[]>();
  for (const { name, field, condition } of valid.conditions) {
    if (field.group) groups.set(field.group, [...(groups.get(field.group) ?? []), { name, condition }]);
  }
  const parts = valid.conditions.filter(({ field }) => !field.group).map(({ field, condition }) => {
    for (const column of field.columns ?? []) columns.add(column);
    if (field.compile) return field.compile(condition, scoped);
    const expression = field.expression!;
    if (condition.op === "gtePercentile") {
      const needed = [...new Set([...(field.columns ?? []), ...windowColumns])];
      return `${expression} >= ${ctx.percentile(expression, needed, (condition.value as number) / 100, window)}`;
    }
    return compareSql(expression, field.kind, condition, ctx.params);
  });
  for (const [group, conditions] of groups) parts.push(group.compile(conditions, scoped));
  return { where: parts.length ? parts.map((part) => `(${part})`).join(" AND ") : "1", columns, spanWindow: spanWindow.join(" AND ") || "1" };
}

function column(kind: FilterKind, name: TraceColumn, extra: Partial<TraceFilterField> = {}): TraceFilterField {
  return { kind, expression: name, columns: [name], ...extra };
}

const nullableString = (name: TraceColumn): TraceFilterField => ({ kind: "string", expression: `ifNull(${name}, '')`, columns: [name] });

/**
 * Trace status: `error` when a span errored, else `ok` when a span reported ok, else `unset`. The
 * roll-up counts errors only, so ok and unset look at the spans.
 */
const statusField: TraceFilterField = {
  kind: "enum",
  values: ["ok", "error", "unset"],
  columns: ["error_count"],
  compile(condition, ctx) {
    const okSpans = `SELECT trace_id FROM ${ctx.database}.spans WHERE organization_id = ${ctx.organizationId} AND project_id = ${ctx.projectId} AND status_code = 'ok' AND ${ctx.spanScope}`;
    const is = (status: FilterScalar) =>
      status === "error"
        ? "error_count > 0"
        : `error_count = 0 AND trace_id ${status === "ok" ? "IN" : "NOT IN"} (${okSpans})`;
    const statuses = Array.isArray(condition.value) ? condition.value : [condition.value];
    const any = statuses.map((status) => `(${is(status)})`).join(" OR ");
    return condition.op === "eq" || condition.op === "in" ? any : `NOT (${any})`;
  },
};

registerTraceFilterField("status", statusField);
registerTraceFilterField("name", nullableString("root_span_name"));
registerTraceFilterField("traceId", { kind: "string", expression: "trace_id", columns: [] });
registerTraceFilterField("sessionId", nullableString("session_id"));
registerTraceFilterField("simulationId", nullableString("simulation_id"));
registerTraceFilterField("userId", nullableString("user_id"));
registerTraceFilterField("tags", column("stringList", "tags"));
registerTraceFilterField("models", column("stringList", "models"));
registerTraceFilterField("providers", column("stringList", "providers"));
registerTraceFilterField("serviceNames", column("stringList", "service_names"));
registerTraceFilterField("tools", column("stringList", "tools"));
registerTraceFilterField("definedTools", column("stringList", "defined_tools"));
registerTraceFilterField("duration", column("number", "duration_ns", { percentile: true }));
registerTraceFilterField("ttft", column("number", "time_to_first_token_ns", { percentile: true }));
registerTraceFilterField("cost", column("number", "cost_total_microcents", { percentile: true }));
registerTraceFilterField("spanCount", column("number", "span_count"));
registerTraceFilterField("errorCount", column("number", "error_count"));
registerTraceFilterField("tokensInput", column("number", "tokens_input"));
registerTraceFilterField("tokensOutput", column("number", "tokens_output"));
registerTraceFilterField("cacheHitRate", column("number", "cache_hit_rate"));
registerTraceFilterField("startTime", column("time", "start_time"));
registerTraceFilterField("endTime", column("time", "end_time"));

const metadataKey = /^[^\u0000-\u001f]{1,256}$/;
const metadataPrefix = "metadata.";

/**
 * `metadata.<key>`: a trace matches when one of its spans carries the key with a matching value; the
 * negative operators match traces where none does. Every metadata condition of a filter set is
 * answered by one scan of the spans carrying metadata, however many keys and conditions it has.
 */
const metadataGroup: TraceFilterGroup = {
  compile(conditions, ctx) {
    const checks = conditions.map(({ name, condition }) => {
      const keyParam = ctx.params.bind(name.slice(metadataPrefix.length), "String");
      const positive = negated[condition.op];
      const match = `mapContains(metadata, ${keyParam}) AND ${compareSql(`metadata[${keyParam}]`, "string", positive ? { op: positive, value: condition.value } : condition, ctx.params)}`;
      return { match, negative: Boolean(positive) };
    });
    const spans = `FROM ${ctx.database}.spans WHERE organization_id = ${ctx.organizationId} AND project_id = ${ctx.projectId} AND ${ctx.spanScope} AND notEmpty(metadata)`;
    // Only negative conditions: a trace without any matching span passes, whether or not it has metadata.
    if (checks.every((check) => check.negative)) {
      return `trace_id NOT IN (SELECT trace_id ${spans} AND (${checks.map((check) => `(${check.match})`).join(" OR ")}))`;
    }
    const having = checks.map((check) => `countIf(${check.match}) ${check.negative ? "= 0" : "> 0"}`).join(" AND ");
    return `trace_id IN (SELECT trace_id ${spans} GROUP BY trace_id HAVING ${having})`;
  },
};

registerTraceFilterPrefix(metadataPrefix, (key) => (metadataKey.test(key) ? { kind: "string", group: metadataGroup } : null));
