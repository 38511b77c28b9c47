import type { QueryParams } from "./params";

/**
 * The trace relation: one row per trace, merged at read time from the `traces` roll-up (partial
 * aggregate states written per insert). Queries name the columns they need and only those are
 * aggregated, so picking a page of ids reads a few cheap columns, never message text.
 */

/** A span that is an LLM completion: not a usage wrapper repeating its steps' (Vercel `ai.generateText`). */
export const llmCompletion = "operation IN ('chat', 'text_completion', 'generate_content') AND NOT is_usage_wrapper";

/** Each stored column: its aggregate over the roll-up and the same aggregate over raw spans. */
const aggregates = {
  start_time: { rollup: "min(start_time)", spans: "min(start_time)" },
  end_time: { rollup: "max(end_time)", spans: "max(end_time)" },
  first_ingested_at: { rollup: "min(first_ingested_at)", spans: "min(ingested_at)" },
  span_count: { rollup: "sum(span_count)", spans: "count()" },
  error_count: { rollup: "sum(error_count)", spans: "countIf(status_code = 'error')" },
  tokens_input: { rollup: "sum(tokens_input)", spans: "sumIf(tokens_input, NOT is_usage_wrapper)" },
  tokens_output: { rollup: "sum(tokens_output)", spans: "sumIf(tokens_output, NOT is_usage_wrapper)" },
  tokens_cache_read: { rollup: "sum(tokens_cache_read)", spans: "sumIf(tokens_cache_read, NOT is_usage_wrapper)" },
  tokens_cache_create: { rollup: "sum(tokens_cache_create)", spans: "sumIf(tokens_cache_create, NOT is_usage_wrapper)" },
  tokens_reasoning: { rollup: "sum(tokens_reasoning)", spans: "sumIf(tokens_reasoning, NOT is_usage_wrapper)" },
  cost_input_microcents: { rollup: "sum(cost_input_microcents)", spans: "sumIf(cost_input_microcents, NOT is_usage_wrapper)" },
  cost_output_microcents: { rollup: "sum(cost_output_microcents)", spans: "sumIf(cost_output_microcents, NOT is_usage_wrapper)" },
  cost_total_microcents: { rollup: "sum(cost_total_microcents)", spans: "sumIf(cost_total_microcents, NOT is_usage_wrapper)" },
  session_id: { rollup: "any(session_id)", spans: "any(nullIf(session_id, ''))" },
  user_id: { rollup: "any(user_id)", spans: "any(nullIf(user_id, ''))" },
  simulation_id: { rollup: "any(simulation_id)", spans: "any(nullIf(simulation_id, ''))" },
  root_span_id: { rollup: "any(root_span_id)", spans: "any(if(parent_span_id = '', span_id, NULL))" },
  root_span_name: { rollup: "any(root_span_name)", spans: "any(if(parent_span_id = '', name, NULL))" },
  tags: { rollup: "groupUniqArrayArray(tags)", spans: "groupUniqArrayArray(tags)" },
  models: { rollup: "groupUniqArrayArray(models)", spans: "groupUniqArrayIf(toString(model), model != '')" },
  providers: { rollup: "groupUniqArrayArray(providers)", spans: "groupUniqArrayIf(toString(provider), provider != '')" },
  service_names: { rollup: "groupUniqArrayArray(service_names)", spans: "groupUniqArrayIf(toString(service_name), service_name != '')" },
  tools: {
    rollup: "groupUniqArrayArray(tools)",
    spans: "groupUniqArrayIf(toString(tool_name), operation = 'execute_tool' AND tool_name != '')",
  },
  defined_tools: { rollup: "groupUniqArrayArray(defined_tools)", spans: "groupUniqArrayArray(defined_tools)" },
  /** The first token of the trace's earliest completion that measured one; NULL when none did. */
  first_token_at: {
    rollup: "min(first_token_at)",
    spans: `minOrNullIf(fromUnixTimestamp64Nano(toInt64(toUnixTimestamp64Nano(start_time) + time_to_first_token_ns), 'UTC'), ${llmCompletion} AND time_to_first_token_ns > 0)`,
  },
  last_llm_span_id: { rollup: "argMaxMerge(last_llm_span_id)", spans: `argMaxIf(span_id, end_time, ${llmCompletion})` },
} as const;

type StoredColumn = keyof typeof aggregates;

/** Columns computed from stored ones, written over the inner aggregate aliases (`a_<column>`). */
const derived = {
  duration_ns: {
    needs: ["start_time", "end_time"],
    sql: "toInt64(toUnixTimestamp64Nano(a_end_time) - toUnixTimestamp64Nano(a_start_time))",
  },
  tokens_total: {
    needs: ["tokens_input", "tokens_output", "tokens_cache_read", "tokens_cache_create", "tokens_reasoning"],
    sql: "a_tokens_input + a_tokens_output + a_tokens_cache_read + a_tokens_cache_create + a_tokens_reasoning",
  },
  /** From the trace's start to its first token; 0 when no completion measured one. */
  time_to_first_token_ns: {
    needs: ["start_time", "first_token_at"],
    sql: "if(a_first_token_at IS NULL, 0, toUInt64(toUnixTimestamp64Nano(a_first_token_at) - toUnixTimestamp64Nano(a_start_time)))",
  },
  cache_hit_rate: {
    needs: ["tokens_input", "tokens_cache_read", "tokens_cache_create"],
    sql: "if(a_tokens_input + a_tokens_cache_read + a_tokens_cache_create = 0, 0, a_tokens_cache_read / (a_tokens_input + a_tokens_cache_read + a_tokens_cache_create))",
  },
} as const satisfies Record<string, { needs: readonly StoredColumn[]; sql: string }>;

type DerivedColumn = keyof typeof derived;
export type TraceColumn = StoredColumn | DerivedColumn;

export const traceColumns = [...Object.keys(aggregates), ...Object.keys(derived)] as TraceColumn[];

export function isTraceColumn(name: string): name is TraceColumn {
  return name in aggregates || name in derived;
}

/** Every column a Trace list item shows. */
export const traceItemColumns: readonly TraceColumn[] = [
  "start_time",
  "end_time",
  "duration_ns",
  "span_count",
  "error_count",
  "tokens_input",
  "tokens_output",
  "tokens_cache_read",
  "tokens_cache_create",
  "tokens_reasoning",
  "tokens_total",
  "cost_input_microcents",
  "cost_output_microcents",
  "cost_total_microcents",
  "session_id",
  "user_id",
  "simulation_id",
  "root_span_id",
  "root_span_name",
  "tags",
  "models",
  "providers",
  "service_names",
  "time_to_first_token_ns",
];

export interface TraceScope {
  database: string;
  /** Placeholders of the tenant, bound once per query. */
  organizationId: string;
  projectId: string;
  /** An IN operand limiting the relation to these traces: a bound `Array(String)` or a subquery. */
  traceIds?: string;
  /** Placeholders of `String`s: only traces whose id sorts after `traceIdAfter` and up to `traceIdThrough`. */
  traceIdAfter?: string;
  traceIdThrough?: string;
  /**
   * Placeholder of a `DateTime64(3, 'UTC')`: the relation as it was when the spans ingested up to
   * this instant were all there (see `TracesService.settledInstant`). Traces whose spans all arrived
   * later are absent; traces that gained spans later have their values at the instant.
   *
   * A roll-up row holds spans ingested between its `first_ingested_at` and `last_ingested_at`, so
   * rows ingested by the instant are kept and rows ingested after it dropped. A row that a merge
   * combined across the instant ("straddling") cannot be split: with `exact`, its traces are
   * recomputed from their spans ingested up to the instant; without, the relation only reads the
   * roll-up, and its column `straddles` is set on such traces (their values are then not the
   * snapshot's, and the statement must be run again with `exact`).
   */
  snapshot?: string;
  exact?: boolean;
}

/** Binds the tenant of a query and returns its scope. */
export function bindScope(params: QueryParams, database: string, organizationId: string, projectId: string): TraceScope {
  return {
    database,
    organizationId: params.bind(organizationId, "String"),
    projectId: params.bind(projectId, "String"),
  };
}

function storedColumnsFor(columns: Iterable<TraceColumn>): StoredColumn[] {
  const stored = new Set<StoredColumn>();
  for (const column of columns) {
    if (column in derived) for (const need of derived[column as DerivedColumn].needs) stored.add(need);
    else stored.add(column as StoredColumn);
  }
  return [...stored];
}

/** Traces with a roll-up row that holds spans ingested both up to and after the snapshot. */
export function straddlingSql(scope: TraceScope): string {
  return `SELECT trace_id FROM ${scope.database}.traces WHERE organization_id = ${scope.organizationId} AND project_id = ${scope.projectId}
    AND first_ingested_at <= ${scope.snapshot} AND last_ingested_at > ${scope.snapshot}`;
}

/** `fn(args)` as `fnIf(args, condition)`: a roll-up aggregate over the rows meeting the condition. */
const aggregateIf = (aggregate: string, condition: string) => aggregate.replace(/^(\w+)\((.*)\)$/, `$1If($2, ${condition})`);

/**
 * SQL of a subquery yielding `trace_id` and the requested columns, one row per trace of the scope;
 * with a snapshot, also `straddles` (see `TraceScope.snapshot`).
 */
export function traceRelationSql(columns: Iterable<TraceColumn>, scope: TraceScope): string {
  const wanted = new Set(columns);
  const stored = storedColumnsFor(wanted);
  const tenant = `organization_id = ${scope.organizationId} AND project_id = ${scope.projectId}`;
  let idFilter = scope.traceIds ? ` AND trace_id IN ${scope.traceIds}` : "";
  if (scope.traceIdAfter) idFilter += ` AND trace_id > ${scope.traceIdAfter}`;
  if (scope.traceIdThrough) idFilter += ` AND trace_id <= ${scope.traceIdThrough}`;
  const branch = (source: "rollup" | "spans", rowsAtSnapshot?: string) =>
    [
      "trace_id",
      ...stored.map((column) => {
        const aggregate = aggregates[column][source];
        return `${rowsAtSnapshot ? aggregateIf(aggregate, rowsAtSnapshot) : aggregate} AS a_${column}`;
      }),
    ].join(", ");

  const outer = ["trace_id"];
  for (const column of wanted) {
    outer.push(column in derived ? `${derived[column as DerivedColumn].sql} AS ${column}` : `a_${column} AS ${column}`);
  }
  const rollup = `FROM ${scope.database}.traces WHERE ${tenant}${idFilter}`;
  if (!scope.snapshot) return `(SELECT ${outer.join(", ")} FROM (SELECT ${branch("rollup")} ${rollup} GROUP BY trace_id))`;

  const ingestedBySnapshot = ` AND first_ingested_at <= ${scope.snapshot}`;
  if (scope.exact) {
    const straddling = straddlingSql(scope);
    const inner = `SELECT ${branch("rollup")} ${rollup}${ingestedBySnapshot} AND trace_id NOT IN (${straddling}) GROUP BY trace_id
      UNION ALL SELECT ${branch("spans")} FROM ${scope.database}.spans WHERE ${tenant}${idFilter}
        AND trace_id IN (${straddling}) AND ingested_at <= ${scope.snapshot} GROUP BY trace_id`;
    return `(SELECT ${outer.join(", ")}, 0 AS straddles FROM (${inner}))`;
  }
  const inner = `SELECT ${branch("rollup", `last_ingested_at <= ${scope.snapshot}`)}, max(last_ingested_at > ${scope.snapshot}) AS a_straddles
    ${rollup}${ingestedBySnapshot} GROUP BY trace_id`;
  return `(SELECT ${outer.join(", ")}, a_straddles AS straddles FROM (${inner}))`;
}
