import { compareSql, registerTraceFilterPrefix, traceIdSubquery, type FilterKind } from "../traces/filters";

/** `score.<key>` → column of the ClickHouse score copy and how its values compare. */
const scoreFields: Record<string, { column: string; kind: FilterKind; values?: readonly string[] }> = {
  passed: { column: "passed", kind: "boolean" },
  errored: { column: "errored", kind: "boolean" },
  value: { column: "value", kind: "number" },
  source: { column: "source", kind: "enum", values: ["custom", "evaluation", "annotation"] },
  sourceId: { column: "source_id", kind: "string" },
  annotatorId: { column: "annotator_id", kind: "string" },
  signalId: { column: "signal_id", kind: "string" },
  simulationId: { column: "simulation_id", kind: "string" },
};

/**
 * `score.*` trace filters: a trace matches when one of its published scores matches the condition;
 * the negative operators match traces where none does, traces without scores included. Each field is
 * its own subquery, so `score.passed` and `score.source` may be met by different scores of a trace.
 */
registerTraceFilterPrefix("score.", (key) => {
  const field = Object.hasOwn(scoreFields, key) ? scoreFields[key]! : null;
  if (!field) return null;
  return {
    kind: field.kind,
    values: field.values,
    compile(condition, ctx) {
      return traceIdSubquery(
        condition,
        (positive) =>
          `SELECT trace_id FROM ${ctx.database}.scores FINAL WHERE organization_id = ${ctx.organizationId} AND project_id = ${ctx.projectId} AND drafted_at IS NULL AND ${compareSql(field.column, field.kind, positive, ctx.params)}`,
      );
    },
  };
});
