/**
 * The seasonal escalation detector (SIGNALS.md, "Escalation"), as pure functions over an hourly
 * series: `series[i]` is the value of the hour ending `i` hours before the evaluation instant
 * (`series[0]` the last hour). Signals feed it failed-score counts; escalating monitors and
 * "expected" thresholds feed it their metric.
 */

const hour = 3600_000;
const week = 168;
export const maxWeeks = 4;
/** Hours of series the detector reads: four weeks back, pooled ±1 hour, plus a 6-hour window. */
export const seriesHours = maxWeeks * week + 1 + 6;

export interface Baseline {
  /** Weeks of history the baseline pools (0: none, the no-history floor applies). */
  weeks: number;
  expected1: number;
  sigma1: number;
  /** Expected value and σ of the 6-hour window, per hour. */
  expected6: number;
  sigma6: number;
}

const mean = (values: number[]) => values.reduce((sum, value) => sum + value, 0) / values.length;
const deviation = (values: number[]) => {
  const center = mean(values);
  return Math.sqrt(mean(values.map((value) => (value - center) ** 2)));
};
const windowPerHour = (series: number[], from: number, hours: number) => {
  let sum = 0;
  for (let i = from; i < from + hours; i++) sum += series[i] ?? 0;
  return sum / hours;
};

/**
 * The same weekday and hour over the previous weeks (at most 4, as far as history goes), pooling
 * ±1 hour: 3 samples a week, 12 with four weeks, for the last hour and for the last 6 hours per hour.
 */
export function seasonalBaseline(series: number[], historyHours: number): Baseline {
  const weeks = Math.max(0, Math.min(maxWeeks, Math.floor(historyHours / week)));
  const last1: number[] = [];
  const last6: number[] = [];
  for (let w = 1; w <= weeks; w++) {
    for (const shift of [-1, 0, 1]) {
      const at = w * week + shift;
      last1.push(series[at] ?? 0);
      last6.push(windowPerHour(series, at, 6));
    }
  }
  if (!weeks) return { weeks: 0, expected1: 0, sigma1: 0, expected6: 0, sigma6: 0 };
  return { weeks, expected1: mean(last1), sigma1: deviation(last1), expected6: mean(last6), sigma6: deviation(last6) };
}

export type Direction = "above" | "below";

export interface DetectorOptions {
  /** 1 (most sensitive) to 6. */
  sensitivity: number;
  direction?: Direction;
  /** Counts get the Poisson floors of σ (√expected, 1) and the no-history floor; other metrics neither. */
  counts: boolean;
  /** Minutes the entry condition must hold before entering (escalating monitors; 0 for signals). */
  holdMinutes?: number;
  /** A signal first seen less than 7 days before never escalates. */
  firstSeenAt?: number;
}

export interface DetectorState {
  escalating: boolean;
  enteredAt?: number;
  /** The 24-hour count at entry: the detector exits when it falls below half of it. */
  entryCount24?: number;
  /** Since when both windows have stayed calm (below expected + 0.7·k·σ), while escalating. */
  calmSince?: number | null;
  /** Since when the entry condition has held, while not escalating. */
  heldSince?: number | null;
  /** After a timeout the condition must lapse once before the detector can enter again. */
  timedOut?: boolean;
}

export type ExitReason = "timeout" | "halved" | "calm";

export interface DetectorReading {
  last1: number;
  last6: number;
  count24: number;
  k: number;
  kLong: number;
  threshold1: number;
  threshold6: number;
  baseline: Baseline;
  entryCondition: boolean;
}

export interface DetectorStep {
  state: DetectorState;
  event: "enter" | "exit" | null;
  exitReason?: ExitReason;
  reading: DetectorReading;
}

export const escalationTimeoutHours = 72;
export const calmMinutes = 30;
export const youngSignalDays = 7;
/** With no history: at least this many in the last 6 hours, and this many / 6 in the last hour. */
export const noHistoryFloor = 20;

/** The effective σ: at least √expected and 1 for counts; at least 5% of the expected value otherwise. */
function sigmaEffective(sigma: number, expected: number, counts: boolean): number {
  return counts ? Math.max(sigma, Math.sqrt(Math.max(expected, 0)), 1) : Math.max(sigma, Math.abs(expected) * 0.05, Number.EPSILON);
}

/** Reads the series against its baseline: the entry condition and the thresholds it used. */
export function readSeries(series: number[], historyHours: number, options: DetectorOptions, cached?: Baseline): DetectorReading {
  const baseline = cached ?? seasonalBaseline(series, historyHours);
  const last1 = series[0] ?? 0;
  const last6 = windowPerHour(series, 0, 6);
  const count24 = windowPerHour(series, 0, 24) * 24;
  const k = options.sensitivity + (baseline.weeks < 2 ? 1 : 0);
  const kLong = k - 1;
  const below = options.direction === "below";
  const sigma1 = sigmaEffective(baseline.sigma1, baseline.expected1, options.counts);
  const sigma6 = sigmaEffective(baseline.sigma6, baseline.expected6, options.counts);
  if (baseline.weeks === 0) {
    // No history: only counts above a floor can enter.
    const threshold1 = noHistoryFloor / 6;
    const threshold6 = noHistoryFloor / 6;
    const entryCondition = options.counts && !below && last6 * 6 >= noHistoryFloor && last1 >= threshold1;
    return { last1, last6, count24, k, kLong, threshold1, threshold6, baseline, entryCondition };
  }
  const sign = below ? -1 : 1;
  const threshold1 = baseline.expected1 + sign * k * sigma1;
  const threshold6 = baseline.expected6 + sign * kLong * sigma6;
  const entryCondition = below ? last1 < threshold1 && last6 < threshold6 : last1 > threshold1 && last6 > threshold6;
  return { last1, last6, count24, k, kLong, threshold1, threshold6, baseline, entryCondition };
}

/** Both windows back within expected ± 0.7·k·σ (or, without history, below 0.7 of the floor). */
function isCalm(reading: DetectorReading, options: DetectorOptions): boolean {
  const { baseline, last1, last6, k } = reading;
  if (baseline.weeks === 0) return last1 < 0.7 * (noHistoryFloor / 6) && last6 < 0.7 * (noHistoryFloor / 6);
  const sigma1 = sigmaEffective(baseline.sigma1, baseline.expected1, options.counts);
  const sigma6 = sigmaEffective(baseline.sigma6, baseline.expected6, options.counts);
  if (options.direction === "below") return last1 > baseline.expected1 - 0.7 * k * sigma1 && last6 > baseline.expected6 - 0.7 * k * sigma6;
  return last1 < baseline.expected1 + 0.7 * k * sigma1 && last6 < baseline.expected6 + 0.7 * k * sigma6;
}

/**
 * One evaluation at `now` (ms): enters when the last hour and the last 6 hours are both above their
 * thresholds (for `holdMinutes`); exits on the 72-hour timeout, when the 24-hour count falls below
 * half of its value at entry, or after both windows stay calm for 30 minutes. A timed-out series
 * enters again only after its condition has lapsed once.
 */
export function stepDetector(
  series: number[],
  historyHours: number,
  now: number,
  previous: DetectorState,
  options: DetectorOptions,
  /** The baseline computed earlier from the full series (it moves slowly); then `series` needs only its last 24 hours. */
  cached?: Baseline,
): DetectorStep {
  const reading = readSeries(series, historyHours, options, cached);
  if (previous.escalating) {
    let exitReason: ExitReason | undefined;
    const calmSince = isCalm(reading, options) ? (previous.calmSince ?? now) : null;
    if (now - (previous.enteredAt ?? now) >= escalationTimeoutHours * hour) exitReason = "timeout";
    else if (options.direction !== "below" && previous.entryCount24 !== undefined && reading.count24 < previous.entryCount24 / 2) exitReason = "halved";
    else if (calmSince !== null && now - calmSince >= calmMinutes * 60_000) exitReason = "calm";
    if (exitReason) return { state: { escalating: false, heldSince: null, timedOut: exitReason === "timeout" }, event: "exit", exitReason, reading };
    return { state: { ...previous, calmSince }, event: null, reading };
  }
  const young = options.firstSeenAt !== undefined && now - options.firstSeenAt < youngSignalDays * 24 * hour;
  const timedOut = Boolean(previous.timedOut) && reading.entryCondition;
  const holds = reading.entryCondition && !young && !timedOut;
  const heldSince = holds ? (previous.heldSince ?? now) : null;
  if (holds && now - heldSince! >= (options.holdMinutes ?? 0) * 60_000) {
    return { state: { escalating: true, enteredAt: now, entryCount24: reading.count24, calmSince: null, heldSince: null }, event: "enter", reading };
  }
  return { state: { escalating: false, heldSince, ...(timedOut ? { timedOut } : {}) }, event: null, reading };
}
