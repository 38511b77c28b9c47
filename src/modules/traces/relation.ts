import type { QueryParams } from "./params";

/**
 * The trace relation: one row per trace, merged at read time from the `traces` roll-up (partial
 * aggregate states written per insert). Queries name the columns they need and only those are
 * aggregated, so picking a page of ids reads a few cheap columns, never message text.
 */

const llmCompletion = "operation IN ('chat', 'text_completion', 'generate_content') AND NOT is_usage_wrapper";

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
  time_to_first_token_ns: {
    rollup: "argMinMerge(time_to_first_token_ns)",
    spans: `argMinIf(time_to_first_token_ns, start_time, ${llmCompletion})`,
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
  /** Placeholder of a `String`: only traces whose id sorts after it (keyset walks in id order). */
  traceIdAfter?: string;
  /**
   * Placeholder of a `DateTime64(3, 'UTC')`: the relation as it was when spans ingested up to this
   * instant were all there. Traces whose spans all arrived later are absent; traces that gained
   * spans later are recomputed from their spans ingested up to the instant.
   */
  snapshot?: string;
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

/** Spans a snapshot must recompute: traces with at least one span ingested after the instant. */
export function changedSinceSnapshotSql(scope: TraceScope): string {
  return `SELECT DISTINCT trace_id FROM ${scope.database}.spans WHERE organization_id = ${scope.organizationId} AND project_id = ${scope.projectId} AND ingested_at > ${scope.snapshot}`;
}

/**
 * SQL of a subquery yielding `trace_id` and the requested columns, one row per trace of the scope.
 * With a snapshot the caller must define the CTE `changed_since_snapshot` (see `withSnapshot`).
 */
export function traceRelationSql(columns: Iterable<TraceColumn>, scope: TraceScope): string {
  const wanted = new Set(columns);
  const stored = storedColumnsFor(wanted);
  const tenant = `organization_id = ${scope.organizationId} AND project_id = ${scope.projectId}`;
  let idFilter = scope.traceIds ? ` AND trace_id IN ${scope.traceIds}` : "";
  if (scope.traceIdAfter) idFilter += ` AND trace_id > ${scope.traceIdAfter}`;
  const branch = (source: "rollup" | "spans") =>
    ["trace_id", ...stored.map((column) => `${aggregates[column][source]} AS a_${column}`)].join(", ");

  let inner = `SELECT ${branch("rollup")} FROM ${scope.database}.traces WHERE ${tenant}${idFilter}`;
  if (scope.snapshot) {
    inner += ` AND trace_id NOT IN changed_since_snapshot GROUP BY trace_id`;
    inner += ` UNION ALL SELECT ${branch("spans")} FROM ${scope.database}.spans WHERE ${tenant}${idFilter}`;
    inner += ` AND trace_id IN changed_since_snapshot AND ingested_at <= ${scope.snapshot} GROUP BY trace_id`;
  } else {
    inner += " GROUP BY trace_id";
  }

  const outer = ["trace_id"];
  for (const column of wanted) {
    outer.push(column in derived ? `${derived[column as DerivedColumn].sql} AS ${column}` : `a_${column} AS ${column}`);
  }
  return `(SELECT ${outer.join(", ")} FROM (${inner}))`;
}

/** Prefixes a statement with the CTE a snapshot relation reads; returns the statement unchanged otherwise. */
export function withSnapshot(scope: TraceScope, statement: string): string {
  return scope.snapshot ? `WITH changed_since_snapshot AS (${changedSinceSnapshotSql(scope)}) ${statement}` : statement;
}
