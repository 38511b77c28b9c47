import type { Sql } from "../../db/postgres";
import type { Logger } from "../../lib/log";
import type { ProjectSettings } from "../projects/model";
import type { ProjectRef } from "../traces/service";
import { readSeries, seasonalBaseline, seriesHours, stepDetector, type Baseline, type DetectorState } from "./detector";
import { closeOpenIncident, openIncident, type IncidentKind } from "./incidents";
import type { Measure, Measurer, WindowRequest } from "./measure";
import type { AlertDuration, AlertMetricThreshold, EscalatingCondition, ThresholdCondition } from "./model";
import { ensureSystemMonitors, streamOf, type MonitorRow } from "./service";
import type { SignalInfo, SignalSource } from "./signal-source";

const hour = 3600_000;
/** Match monitors re-read items touched this long before their watermark: inserts still committing are not missed. */
const matchOverlapMs = 5 * 60_000;
/** New items per match monitor and evaluation; more wait for the next one. */
const matchesPerEvaluation = 100;
/** The baseline of a detector moves slowly: it is recomputed from the full series once an hour. */
const baselineTtlMs = hour;

interface MonitorState {
  /** Match monitors: items touched up to here were read. */
  watermark?: number;
  /** Threshold and threshold-held escalating monitors: whether the condition held at the last evaluation, and since when. */
  active?: boolean;
  heldSince?: number | null;
  detector?: DetectorState;
  baseline?: Baseline & { at: number; historyHours: number };
  /** System monitors of signals: per signal. */
  signals?: Record<string, DetectorState>;
  regressed?: Record<string, string>;
}

export interface EvaluationCounts {
  monitors: number;
  opened: number;
  closed: number;
}

export const durationMs = (duration: AlertDuration) =>
  duration.unit === "minutes" ? duration.minutes * 60_000 : duration.unit === "hours" ? duration.hours * hour : duration.days * 24 * hour;

const compare = (value: number | null, threshold: number, direction: "above" | "below" | undefined) =>
  value !== null && (direction === "below" ? value < threshold : value > threshold);

/** Hours of data behind a series: up to the oldest hour with a value. */
function historyOf(series: number[]): number {
  for (let i = series.length - 1; i >= 0; i--) if (series[i] !== 0) return i + 1;
  return 0;
}

/**
 * One evaluation of a project's due monitors. Monitors are claimed by moving `next_evaluation_at`
 * forward in one UPDATE, so across the fleet each is evaluated once per interval; incidents open
 * and close idempotently (incidents.ts), so even overlapping evaluations open each incident once.
 */
export class MonitorEvaluator {
  constructor(
    private readonly sql: Sql,
    private readonly measurer: Measurer,
    private readonly signals: SignalSource,
    private readonly intervalSeconds: number,
    private readonly log: Logger,
  ) {}

  /** Projects with monitors due at `now`, after giving every project its system monitors. */
  async dueProjects(now: Date): Promise<string[]> {
    await ensureSystemMonitors(this.sql);
    const rows = await this.sql<{ project_id: string }[]>`
      SELECT DISTINCT project_id FROM monitors WHERE deleted_at IS NULL AND next_evaluation_at <= ${now}`;
    return rows.map((row) => row.project_id);
  }

  /** Every due monitor of every project, a few projects at a time. */
  async tick(now = new Date(), concurrency = 4): Promise<EvaluationCounts> {
    const projects = await this.dueProjects(now);
    const total: EvaluationCounts = { monitors: 0, opened: 0, closed: 0 };
    let next = 0;
    const worker = async () => {
      while (next < projects.length) {
        const counts = await this.evaluateProject(projects[next++], now);
        total.monitors += counts.monitors;
        total.opened += counts.opened;
        total.closed += counts.closed;
      }
    };
    await Promise.all(Array.from({ length: Math.min(concurrency, projects.length) }, worker));
    return total;
  }

  async evaluateProject(projectId: string, now = new Date()): Promise<EvaluationCounts> {
    const monitors = await this.sql<MonitorRow[]>`
      UPDATE monitors SET next_evaluation_at = ${now}::timestamptz + make_interval(secs => ${this.intervalSeconds})
      WHERE project_id = ${projectId} AND deleted_at IS NULL AND next_evaluation_at <= ${now}
      RETURNING *`;
    const counts: EvaluationCounts = { monitors: monitors.length, opened: 0, closed: 0 };
    if (!monitors.length) return counts;
    const [project] = await this.sql<{ id: string; organization_id: string; settings: ProjectSettings | null }[]>`
      SELECT id, organization_id, settings FROM projects WHERE id = ${projectId} AND deleted_at IS NULL`;
    if (!project) return counts;
    const run = new ProjectEvaluation(this, { id: project.id, organizationId: project.organization_id }, project.settings ?? {}, now.getTime(), counts);
    await run.evaluate(monitors);
    return counts;
  }

  /** @internal for ProjectEvaluation */
  get deps() {
    return { sql: this.sql, measurer: this.measurer, signals: this.signals, log: this.log };
  }
}

/** One project's evaluation at one instant: measures its monitors in batches, then opens and closes incidents. */
class ProjectEvaluation {
  private readonly states = new Map<string, MonitorState>();
  private readonly sql: Sql;
  private readonly measurer: Measurer;
  private readonly signals: SignalSource;

  constructor(
    evaluator: MonitorEvaluator,
    private readonly project: ProjectRef,
    private readonly settings: ProjectSettings,
    private readonly now: number,
    private readonly counts: EvaluationCounts,
  ) {
    ({ sql: this.sql, measurer: this.measurer, signals: this.signals } = evaluator.deps);
  }

  private switchOn(kind: IncidentKind): boolean {
    const switches = this.settings.notifications?.incidents as Record<string, boolean | undefined> | undefined;
    const name = kind === "signal.new" || kind === "signal.regressed" ? "monitor.match" : kind;
    return switches?.[name] !== false;
  }

  private async open(monitor: MonitorRow, incident: { kind: IncidentKind; sourceType?: "monitor" | "signal"; sourceId?: string; itemKey?: string; details: Record<string, unknown>; startedAt?: Date; mutedSource?: boolean }) {
    const row = await openIncident(this.sql, {
      organizationId: this.project.organizationId,
      projectId: this.project.id,
      sourceType: incident.sourceType ?? "monitor",
      sourceId: incident.sourceId ?? monitor.id,
      kind: incident.kind,
      itemKey: incident.itemKey,
      severity: monitor.severity,
      condition: incident.kind === "monitor.threshold" || incident.kind === "monitor.escalating" ? (monitor.config.condition ?? null) : null,
      details: { monitor: { id: monitor.id, slug: monitor.slug, name: monitor.name }, ...incident.details },
      startedAt: incident.startedAt ?? new Date(this.now),
      notify: !monitor.muted_at && !incident.mutedSource && this.switchOn(incident.kind),
    });
    if (row) this.counts.opened++;
  }

  private async close(source: { sourceType: "monitor" | "signal"; sourceId: string; kind: IncidentKind }, details: Record<string, unknown>) {
    if (await closeOpenIncident(this.sql, source, new Date(this.now), details)) this.counts.closed++;
  }

  async evaluate(monitors: MonitorRow[]) {
    for (const monitor of monitors) this.states.set(monitor.id, { ...(monitor.state as MonitorState) });
    const user = monitors.filter((monitor) => !monitor.system_kind);
    const measures = await this.measures(user);
    const live = user.filter((monitor) => measures.has(monitor.id));
    await this.match(live.filter((monitor) => monitor.trigger === "match"), measures);
    await this.thresholds(live.filter((monitor) => monitor.trigger !== "match"), measures);
    const system = monitors.filter((monitor) => monitor.system_kind);
    if (system.length) await this.signalMonitors(system);
    await this.saveStates();
  }

  /** What each monitor measures; a monitor of a deleted saved search measures nothing. */
  private async measures(monitors: MonitorRow[]): Promise<Map<string, Measure>> {
    const searchIds = [...new Set(monitors.map((monitor) => monitor.target.savedSearchId).filter((id): id is string => Boolean(id)))];
    const searches = new Map(
      (searchIds.length
        ? await this.sql<{ id: string; query: string | null; filters: Measure["filters"] }[]>`
            SELECT id, query, filters FROM saved_searches WHERE id = ANY(${searchIds}) AND project_id = ${this.project.id} AND deleted_at IS NULL`
        : []
      ).map((search) => [search.id, search]),
    );
    const measures = new Map<string, Measure>();
    for (const monitor of monitors) {
      const searchId = monitor.target.savedSearchId;
      const search = searchId ? searches.get(searchId) : undefined;
      if (searchId && !search) continue;
      measures.set(monitor.id, {
        key: monitor.id,
        stream: streamOf(monitor.target),
        filters: search?.filters ?? ((monitor.config.filterSet ?? {}) as Measure["filters"]),
        query: search ? search.query : (monitor.config.query ?? null),
        metric: monitor.config.condition?.metric ?? monitor.config.metric ?? { kind: "count" },
      });
    }
    return measures;
  }

  private async match(monitors: MonitorRow[], measures: Map<string, Measure>) {
    if (!monitors.length) return;
    const watermarks = monitors.map((monitor) => this.states.get(monitor.id)!.watermark ?? monitor.created_at.getTime());
    const touchedSince = Math.min(...watermarks) - matchOverlapMs;
    // Nothing ingested since the oldest watermark: no item can be new, and the match read is skipped.
    const found =
      (await this.measurer.lastIngestedAt(this.project)) > touchedSince
        ? await this.measurer.matches(
            this.project,
            monitors.map((monitor) => ({ ...measures.get(monitor.id)!, notBefore: monitor.created_at.getTime() })),
            touchedSince,
            matchesPerEvaluation,
          )
        : new Map<string, never[]>();
    for (const monitor of monitors) {
      for (const item of found.get(monitor.id) ?? []) {
        await this.open(monitor, { kind: "monitor.match", itemKey: item.itemKey, startedAt: new Date(item.at), details: { traceId: item.traceId, itemKey: item.itemKey, stream: measures.get(monitor.id)!.stream } });
      }
      this.states.get(monitor.id)!.watermark = this.now;
    }
  }

  /** The windows a threshold is measured over: the current one, and the baseline of a multiplier. */
  private static thresholdWindows(threshold: AlertMetricThreshold, current: number, now: number): { current: [number, number]; baseline?: [number, number]; scale: number } {
    if (threshold.mode !== "multiplier") return { current: [now - current, now], scale: 1 };
    const lookback = durationMs(threshold.baseline.lookback);
    if (threshold.baseline.kind === "period") return { current: [now - lookback, now], baseline: [now - 2 * lookback, now - lookback], scale: 1 };
    // `average`: the rolling rate over the lookback, per current window.
    return { current: [now - current, now], baseline: [now - lookback, now], scale: current / lookback };
  }

  private async thresholds(monitors: MonitorRow[], measures: Map<string, Measure>) {
    if (!monitors.length) return;
    const requests: WindowRequest[] = [];
    const plans = new Map<string, { current: number; baseline?: number; scale: number; condition: ThresholdCondition | EscalatingCondition }>();
    const detectors: MonitorRow[] = [];
    for (const monitor of monitors) {
      const condition = monitor.config.condition;
      if (!condition) continue;
      const threshold = condition.threshold;
      if (!threshold || threshold.mode === "expected") {
        detectors.push(monitor);
        continue;
      }
      const span = condition.trigger === "escalating" ? condition.window.minutes * 60_000 : hour;
      const windows = ProjectEvaluation.thresholdWindows(threshold, span, this.now);
      const scaled = condition.metric.kind === "count" || condition.metric.kind === "sum" ? windows.scale : 1;
      const plan: { current: number; baseline?: number; scale: number; condition: typeof condition } = { current: requests.length, scale: scaled, condition };
      requests.push({ key: monitor.id, from: windows.current[0], to: windows.current[1] });
      if (windows.baseline) {
        plan.baseline = requests.length;
        requests.push({ key: monitor.id, from: windows.baseline[0], to: windows.baseline[1] });
      }
      plans.set(monitor.id, plan);
    }
    const values = await this.measurer.windows(this.project, [...measures.values()].filter((measure) => plans.has(measure.key)), requests);
    for (const monitor of monitors) {
      const plan = plans.get(monitor.id);
      if (!plan) continue;
      const threshold = plan.condition.threshold as Exclude<AlertMetricThreshold, { mode: "expected" }>;
      const value = values.get(`${monitor.id}|${plan.current}`) ?? null;
      let limit: number | null;
      let baselineValue: number | null = null;
      if (threshold.mode === "absolute") limit = threshold.value;
      else {
        baselineValue = values.get(`${monitor.id}|${plan.baseline}`) ?? null;
        limit = baselineValue === null ? null : baselineValue * plan.scale * threshold.factor;
      }
      const holds = limit !== null && compare(value, limit, plan.condition.direction);
      await this.sustain(monitor, holds, { value, threshold: limit, baseline: baselineValue, metric: plan.condition.metric, direction: plan.condition.direction ?? "above" });
    }
    if (detectors.length) await this.detectorMonitors(detectors, measures);
  }

  /**
   * Threshold monitors open while the condition holds and close when it stops; escalating monitors
   * with a threshold open once it has held for their window.
   */
  private async sustain(monitor: MonitorRow, holds: boolean, details: Record<string, unknown>) {
    const state = this.states.get(monitor.id)!;
    const kind: IncidentKind = monitor.trigger === "escalating" ? "monitor.escalating" : "monitor.threshold";
    const condition = monitor.config.condition;
    const hold = condition?.trigger === "escalating" ? condition.window.minutes * 60_000 : 0;
    state.heldSince = holds ? (state.heldSince ?? this.now) : null;
    const active = holds && this.now - state.heldSince! >= hold;
    if (active && !state.active) await this.open(monitor, { kind, details });
    if (!holds && state.active) await this.close({ sourceType: "monitor", sourceId: monitor.id, kind }, details);
    state.active = active || (Boolean(state.active) && holds);
  }

  /** Monitors read against their seasonal baseline: escalating ones without a threshold, and `expected` thresholds. */
  private async detectorMonitors(monitors: MonitorRow[], measures: Map<string, Measure>) {
    const stale = monitors.filter((monitor) => {
      const cached = this.states.get(monitor.id)!.baseline;
      return !cached || this.now - cached.at >= baselineTtlMs;
    });
    if (stale.length) {
      const full = await this.measurer.hourly(this.project, stale.map((monitor) => measures.get(monitor.id)!), this.now, seriesHours);
      for (const monitor of stale) {
        const series = full.get(monitor.id)!;
        const historyHours = historyOf(series);
        this.states.get(monitor.id)!.baseline = { ...seasonalBaseline(series, historyHours), at: this.now, historyHours };
      }
    }
    const recent = await this.measurer.hourly(this.project, monitors.map((monitor) => measures.get(monitor.id)!), this.now, 24);
    for (const monitor of monitors) {
      const state = this.states.get(monitor.id)!;
      const condition = monitor.config.condition!;
      const cached = state.baseline!;
      const historyHours = cached.historyHours + (this.now - cached.at) / hour;
      const series = recent.get(monitor.id)!;
      const threshold = condition.threshold;
      const sensitivity = (condition.trigger === "escalating" ? condition.sensitivity : undefined) ?? (threshold?.mode === "expected" ? threshold.sensitivity : undefined) ?? 3;
      const options = { sensitivity, direction: condition.direction, counts: condition.metric.kind === "count" };
      if (condition.trigger === "threshold") {
        const reading = readSeries(series, historyHours, options, cached);
        await this.sustain(monitor, reading.entryCondition, { value: reading.last1, threshold: reading.threshold1, expected: cached.expected1, metric: condition.metric, direction: condition.direction ?? "above" });
        continue;
      }
      const step = stepDetector(series, historyHours, this.now, state.detector ?? { escalating: false }, { ...options, holdMinutes: condition.window.minutes }, cached);
      state.detector = step.state;
      const details = { value: step.reading.last1, last6PerHour: step.reading.last6, threshold: step.reading.threshold1, expected: cached.expected1, metric: condition.metric, direction: condition.direction ?? "above" };
      if (step.event === "enter") await this.open(monitor, { kind: "monitor.escalating", details });
      if (step.event === "exit") await this.close({ sourceType: "monitor", sourceId: monitor.id, kind: "monitor.escalating" }, { ...details, reason: step.exitReason });
    }
  }

  /** The system monitors: new, regressed and escalating signals, through the signal source. */
  private async signalMonitors(monitors: MonitorRow[]) {
    const signals = await this.signals.activeSignals(this.project);
    const byKind = new Map(monitors.map((monitor) => [monitor.system_kind, monitor]));
    const created = byKind.get("signal.new");
    if (created) {
      const state = this.states.get(created.id)!;
      const since = state.watermark ?? created.created_at.getTime();
      for (const signal of signals.filter((signal) => signal.firstSeenAt.getTime() > since)) {
        await this.open(created, { kind: "signal.new", sourceType: "signal", sourceId: signal.id, itemKey: `new:${signal.id}`, startedAt: signal.firstSeenAt, mutedSource: Boolean(signal.mutedAt), details: { signal: { id: signal.id, name: signal.name } } });
      }
      state.watermark = this.now;
    }
    const regressed = byKind.get("signal.regressed");
    if (regressed) await this.regressions(regressed, signals);
    const escalating = byKind.get("signal.escalating");
    if (escalating && signals.length) await this.escalations(escalating, signals);
  }

  private async regressions(monitor: MonitorRow, signals: SignalInfo[]) {
    const state = this.states.get(monitor.id)!;
    const seen = state.regressed ?? {};
    const now: Record<string, string> = {};
    for (const signal of signals) {
      const regressedAt = signal.regressedAt;
      if (!regressedAt || (signal.resolvedAt && signal.resolvedAt > regressedAt)) continue;
      now[signal.id] = regressedAt.toISOString();
      if (seen[signal.id] !== now[signal.id]) {
        await this.open(monitor, { kind: "signal.regressed", sourceType: "signal", sourceId: signal.id, startedAt: regressedAt, mutedSource: Boolean(signal.mutedAt), details: { signal: { id: signal.id, name: signal.name } } });
      }
    }
    for (const id of Object.keys(seen)) if (!now[id]) await this.close({ sourceType: "signal", sourceId: id, kind: "signal.regressed" }, {});
    state.regressed = now;
  }

  /** Each active signal through the detector, with the project's escalation sensitivity. */
  private async escalations(monitor: MonitorRow, signals: SignalInfo[]) {
    const state = this.states.get(monitor.id)!;
    const previous = state.signals ?? {};
    // Counts come per UTC hour: series[0] is the last complete hour.
    const currentHour = Math.floor(this.now / hour) * hour;
    const counts = await this.signals.hourlyCounts(this.project, signals.map((signal) => signal.id), new Date(currentHour - seriesHours * hour), new Date(currentHour));
    const series = new Map(signals.map((signal) => [signal.id, new Array<number>(seriesHours).fill(0)]));
    for (const { signalId, hour: start, count } of counts) {
      const index = Math.round((currentHour - Date.parse(start)) / hour) - 1;
      const list = series.get(signalId);
      if (list && index >= 0 && index < seriesHours) list[index] = Number(count);
    }
    const sensitivity = this.settings.escalation?.sensitivity ?? 3;
    const next: Record<string, DetectorState> = {};
    for (const signal of signals) {
      const historyHours = (this.now - signal.firstSeenAt.getTime()) / hour;
      const step = stepDetector(series.get(signal.id)!, historyHours, this.now, previous[signal.id] ?? { escalating: false }, { sensitivity, counts: true, firstSeenAt: signal.firstSeenAt.getTime() });
      next[signal.id] = step.state;
      const details = { signal: { id: signal.id, name: signal.name }, value: step.reading.last1, last6PerHour: step.reading.last6, threshold: step.reading.threshold1, expected: step.reading.baseline.expected1, sensitivity };
      if (step.event === "enter") {
        await this.open(monitor, { kind: "signal.escalating", sourceType: "signal", sourceId: signal.id, mutedSource: Boolean(signal.mutedAt), details });
        await this.signals.recordEscalation(this.project, signal.id, true, new Date(this.now));
      }
      if (step.event === "exit") {
        await this.close({ sourceType: "signal", sourceId: signal.id, kind: "signal.escalating" }, { ...details, reason: step.exitReason });
        await this.signals.recordEscalation(this.project, signal.id, false, new Date(this.now));
      }
    }
    state.signals = next;
  }

  private async saveStates() {
    const rows = [...this.states].map(([id, state]) => ({ id, state }));
    if (!rows.length) return;
    await this.sql`
      UPDATE monitors SET state = changed.state
      FROM jsonb_to_recordset(${this.sql.json(rows as never)}) AS changed(id text, state jsonb)
      WHERE monitors.id = changed.id`;
  }
}
