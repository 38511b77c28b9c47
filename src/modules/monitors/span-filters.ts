import { badRequest } from "../../lib/errors";
import { compareSql, filterOperators, type FilterKind, type FilterSet, type ValidCondition } from "../traces/filters";
import type { QueryParams } from "../traces/params";

/**
 * Filters of span-stream monitors (tool targets), over the `spans` table's columns. The operators
 * and their meaning are the trace filters' (`compareSql`).
 */
const spanFields: Record<string, { kind: FilterKind; expression: string }> = {
  operation: { kind: "string", expression: "toString(operation)" },
  toolName: { kind: "string", expression: "toString(tool_name)" },
  name: { kind: "string", expression: "name" },
  status: { kind: "string", expression: "toString(status_code)" },
  userId: { kind: "string", expression: "user_id" },
  sessionId: { kind: "string", expression: "session_id" },
  model: { kind: "string", expression: "toString(model)" },
  provider: { kind: "string", expression: "toString(provider)" },
  serviceName: { kind: "string", expression: "toString(service_name)" },
  duration: { kind: "number", expression: "duration_ns" },
  cost: { kind: "number", expression: "cost_total_microcents" },
};

const stringOps = ["eq", "neq", "in", "notIn", "contains", "notContains"];
const numberOps = ["eq", "neq", "gt", "gte", "lt", "lte", "in", "notIn"];

export interface ValidSpanFilters {
  conditions: { expression: string; kind: FilterKind; condition: ValidCondition }[];
}

export function validateSpanFilters(filters: FilterSet): ValidSpanFilters {
  const conditions: ValidSpanFilters["conditions"] = [];
  for (const [name, list] of Object.entries(filters)) {
    const field = spanFields[name];
    if (!field) throw badRequest(`filterSet.${name}: unknown span filter field; use one of ${Object.keys(spanFields).join(", ")}`);
    if (!Array.isArray(list)) throw badRequest(`filterSet.${name} must be an array of conditions`);
    list.forEach((raw, index) => {
      const where = `filterSet.${name}[${index}]`;
      const { op, value } = (raw ?? {}) as { op?: string; value?: unknown };
      if (!op || !(filterOperators as readonly string[]).includes(op) || !(field.kind === "number" ? numberOps : stringOps).includes(op)) {
        throw badRequest(`${where}.op: ${JSON.stringify(op)} does not apply to ${name}`);
      }
      const many = op === "in" || op === "notIn";
      const values = many ? value : [value];
      if (!Array.isArray(values) || values.length === 0) throw badRequest(`${where}.value must be a non-empty array for ${op}`);
      const checked = values.map((item) => {
        if (field.kind === "number" ? typeof item !== "number" || !Number.isFinite(item) : typeof item !== "string") {
          throw badRequest(`${where}.value must be ${field.kind === "number" ? "a number" : "a string"}`);
        }
        return item as string | number;
      });
      conditions.push({ expression: field.expression, kind: field.kind, condition: { op: op as ValidCondition["op"], value: many ? checked : checked[0] } });
    });
  }
  return { conditions };
}

/** One SQL condition over `spans`; "1" without filters. */
export function compileSpanFilters(valid: ValidSpanFilters, params: QueryParams): string {
  if (!valid.conditions.length) return "1";
  return valid.conditions.map(({ expression, kind, condition }) => `(${compareSql(expression, kind, condition, params)})`).join(" AND ");
}
