import { t, type Static } from "elysia";
import { FilterCondition } from "../traces/model";

const Severity = t.UnionEnum(["low", "medium", "high", "urgent"]);
export type Severity = Static<typeof Severity>;
const FilterSet = t.Record(t.String(), t.Array(FilterCondition));
const Nullable = <T extends Parameters<typeof t.Union>[0][number]>(schema: T) => t.Union([schema, t.Null()]);

const numericFields = t.UnionEnum(["duration", "cost", "tokens"], {
  description: "duration in milliseconds, cost in microcents, tokens as counted",
});
export const MonitorMetric = t.Union([
  t.Object({ kind: t.Literal("count") }),
  t.Object({ kind: t.Literal("errorRate") }),
  t.Object({ kind: t.Literal("cacheHitRate") }),
  t.Object({ kind: t.UnionEnum(["avg", "sum", "min", "max", "median"]), field: numericFields }),
]);
export type MonitorMetric = Static<typeof MonitorMetric>;

export const AlertDuration = t.Union([
  t.Object({ unit: t.Literal("minutes"), minutes: t.Number({ exclusiveMinimum: 0 }) }),
  t.Object({ unit: t.Literal("hours"), hours: t.Number({ exclusiveMinimum: 0 }) }),
  t.Object({ unit: t.Literal("days"), days: t.Number({ exclusiveMinimum: 0, maximum: 28 }) }),
]);
export type AlertDuration = Static<typeof AlertDuration>;

const Sensitivity = t.Integer({ minimum: 1, maximum: 6, description: "1 noisiest to 6 strictest; default 3" });
export const AlertMetricThreshold = t.Union([
  t.Object({ mode: t.Literal("absolute"), value: t.Number() }),
  t.Object({
    mode: t.Literal("multiplier"),
    factor: t.Number({ exclusiveMinimum: 0 }),
    baseline: t.Object({ kind: t.UnionEnum(["average", "period"]), lookback: AlertDuration }),
  }),
  t.Object({ mode: t.Literal("expected"), sensitivity: t.Optional(Sensitivity) }),
]);
export type AlertMetricThreshold = Static<typeof AlertMetricThreshold>;

const Direction = t.UnionEnum(["above", "below"]);
export const ThresholdCondition = t.Object({
  trigger: t.Literal("threshold"),
  metric: MonitorMetric,
  threshold: AlertMetricThreshold,
  direction: t.Optional(Direction),
});
export const EscalatingCondition = t.Object({
  trigger: t.Literal("escalating"),
  metric: MonitorMetric,
  threshold: t.Optional(AlertMetricThreshold),
  direction: t.Optional(Direction),
  sensitivity: t.Optional(Sensitivity),
  window: t.Object({ minutes: t.Number({ minimum: 5, description: "How long the condition must hold; at least 5" }) }),
});
export const AlertCondition = t.Union([ThresholdCondition, EscalatingCondition]);
export type ThresholdCondition = Static<typeof ThresholdCondition>;
export type EscalatingCondition = Static<typeof EscalatingCondition>;
export type AlertCondition = Static<typeof AlertCondition>;

const targetTypes = t.UnionEnum(["savedSearch", "tool", "user", "session"]);
export type TargetType = "savedSearch" | "tool" | "user" | "session";
const streams = t.UnionEnum(["traces", "spans", "sessions"]);

export const MonitorTarget = t.Object({
  type: targetTypes,
  id: Nullable(t.String()),
  filterSet: t.Optional(FilterSet),
  query: t.Optional(Nullable(t.String({ maxLength: 500 }))),
  kind: t.Optional(targetTypes),
  stream: t.Optional(streams),
  savedSearchId: t.Optional(Nullable(t.String())),
  metric: t.Optional(MonitorMetric),
});
export type MonitorTarget = Static<typeof MonitorTarget>;

const common = {
  name: t.String({ minLength: 1, maxLength: 128 }),
  description: t.Optional(t.String({ maxLength: 2000 })),
  target: MonitorTarget,
  severity: Severity,
  metric: t.Optional(MonitorMetric),
};
export const CreateMonitorBody = t.Union([
  t.Object({ trigger: t.Literal("match"), ...common }),
  t.Object({ trigger: t.Literal("threshold"), ...common, condition: ThresholdCondition }),
  t.Object({ trigger: t.Literal("escalating"), ...common, condition: EscalatingCondition }),
]);
export type CreateMonitorBody = Static<typeof CreateMonitorBody>;

export const UpdateMonitorBody = t.Object({
  name: t.Optional(common.name),
  description: t.Optional(t.String({ maxLength: 2000 })),
  severity: t.Optional(Severity),
});
export type UpdateMonitorBody = Static<typeof UpdateMonitorBody>;

export const MonitorConfig = t.Object({
  filterSet: t.Optional(FilterSet),
  query: t.Optional(Nullable(t.String())),
  metric: t.Optional(MonitorMetric),
  condition: t.Optional(AlertCondition),
});
export type MonitorConfig = Static<typeof MonitorConfig>;

export const Monitor = t.Object({
  id: t.String(),
  organizationId: t.String(),
  projectId: t.String(),
  slug: t.String(),
  name: t.String(),
  description: t.String(),
  system: t.Boolean(),
  target: MonitorTarget,
  rule: t.Object({ trigger: t.UnionEnum(["match", "threshold", "escalating"]), config: MonitorConfig, severity: Severity }),
  mutedAt: Nullable(t.String()),
  deletedAt: Nullable(t.String()),
  createdAt: t.String(),
  updatedAt: t.String(),
});
export type Monitor = Static<typeof Monitor>;

export const PaginatedMonitors = t.Object({ items: t.Array(Monitor), nextCursor: Nullable(t.String()), hasMore: t.Boolean() });
export const MonitorList = t.Object({ items: t.Array(Monitor) });

export const Incident = t.Object({
  id: t.String(),
  organizationId: t.String(),
  projectId: t.String(),
  sourceType: t.UnionEnum(["monitor", "signal"]),
  sourceId: t.String(),
  severity: Severity,
  startedAt: t.String(),
  endedAt: Nullable(t.String()),
  createdAt: t.String(),
  condition: Nullable(AlertCondition),
});
export type Incident = Static<typeof Incident>;
export const MonitorIncident = t.Composite([Incident, t.Object({ notified: t.Boolean() })]);
export type MonitorIncident = Static<typeof MonitorIncident>;
export const PaginatedMonitorIncidents = t.Object({ items: t.Array(MonitorIncident), nextCursor: Nullable(t.String()), hasMore: t.Boolean() });
export const ListIncidentsResponse = t.Object({ items: t.Array(Incident) });

export const MonitorParams = t.Object({ projectSlug: t.String(), monitorSlug: t.String() });
export const IncidentParams = t.Object({ projectSlug: t.String(), incidentId: t.String() });
export const ListMonitorsQuery = t.Object({
  cursor: t.Optional(t.String()),
  limit: t.Optional(t.Integer({ minimum: 1, maximum: 100 })),
  search: t.Optional(t.String({ maxLength: 200 })),
});
export const ListMonitorIncidentsQuery = t.Object({ cursor: t.Optional(t.String()), limit: t.Optional(t.Integer({ minimum: 1, maximum: 100 })) });
export const ForTargetBody = t.Object({
  // A plain string: Elysia would fill an absent enum with its first value.
  targetType: t.Optional(t.String({ pattern: "^(savedSearch|tool|user|session)$", description: "savedSearch, tool, user or session" })),
  filterSetContains: FilterSet,
});
export const ListIncidentsQuery = t.Object({
  fromIso: t.Optional(t.String()),
  toIso: t.Optional(t.String()),
  // Plain strings: Elysia would fill an absent enum query parameter with its first value.
  source_type: t.Optional(t.String({ pattern: "^(monitor|signal)$", description: "monitor or signal" })),
  source_id: t.Optional(t.String()),
  severities: t.Optional(t.Union([t.String(), t.Array(t.String())], { description: "low, medium, high, urgent" })),
});

export const WebhookBody = t.Object({ url: t.String({ format: "uri", maxLength: 2000 }) });
export const Webhook = t.Object({
  url: t.String(),
  quarantinedAt: Nullable(t.String()),
  lastError: Nullable(t.String()),
  createdAt: t.String(),
  secret: t.Optional(t.String({ description: "HMAC-SHA256 key; shown only when the webhook is set" })),
});
