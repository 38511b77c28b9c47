import { describe, expect, test } from "bun:test";
import { seasonalBaseline, stepDetector, type DetectorOptions, type DetectorState } from "../src/modules/monitors/detector";

const hour = 3600_000;
const week = 168;

/** The detector's view at absolute hour `t` of `counts` (counts[h] = the value of hour h): series[i] = counts[t - 1 - i]. */
const seriesAt = (counts: number[], t: number) => Array.from({ length: Math.min(t, 4 * week + 7) }, (_, i) => counts[t - 1 - i] ?? 0);
const flat = (hours: number, value: number) => Array.from({ length: hours }, () => value);

/** Walks the detector hour by hour over [from, to) and returns the hours it entered and exited. */
function walk(counts: number[], from: number, to: number, options: DetectorOptions, history = (t: number) => t) {
  let state: DetectorState = { escalating: false };
  const enters: number[] = [];
  const exits: { at: number; reason: string }[] = [];
  for (let t = from; t < to; t++) {
    const step = stepDetector(seriesAt(counts, t), history(t), t * hour, state, options);
    state = step.state;
    if (step.event === "enter") enters.push(t);
    if (step.event === "exit") exits.push({ at: t, reason: step.exitReason! });
  }
  return { enters, exits, state };
}

const options = (sensitivity: number, extra: Partial<DetectorOptions> = {}): DetectorOptions => ({ sensitivity, counts: true, ...extra });

describe("seasonal baseline", () => {
  test("pools the same weekday and hour of up to four weeks, ±1 hour: 12 samples", () => {
    const counts = flat(5 * week, 0);
    // Hour t-1 of each of the last four weeks carries w*10 at the hour, w*10+1 and w*10-1 beside it.
    const t = 5 * week;
    for (let w = 1; w <= 4; w++) {
      const at = t - 1 - w * week;
      counts[at] = w * 10;
      counts[at - 1] = w * 10 - 1;
      counts[at + 1] = w * 10 + 1;
    }
    const baseline = seasonalBaseline(seriesAt(counts, t), t);
    expect(baseline.weeks).toBe(4);
    expect(baseline.expected1).toBeCloseTo(25, 9);
    const samples = [1, 2, 3, 4].flatMap((w) => [w * 10 - 1, w * 10, w * 10 + 1]);
    const sigma = Math.sqrt(samples.reduce((sum, x) => sum + (x - 25) ** 2, 0) / samples.length);
    expect(baseline.sigma1).toBeCloseTo(sigma, 9);
    expect(seasonalBaseline(seriesAt(counts, t), 2 * week + 5).weeks).toBe(2);
    expect(seasonalBaseline(seriesAt(counts, t), 100).weeks).toBe(0);
  });
});

describe("entering", () => {
  test("a flat series never enters, at any sensitivity", () => {
    const counts = Array.from({ length: 6 * week }, (_, h) => 10 + ((h * 7) % 5) - 2);
    for (let k = 1; k <= 6; k++) expect(walk(counts, 5 * week, 6 * week, options(k)).enters).toEqual([]);
  });

  test("a spike enters at the sensitivities it exceeds and not at the others", () => {
    // Baseline 10/h: σ_eff = √10. 20/h for 6 hours beats 10 + k·√10 for k ≤ 3 (and the 6-hour window, k−1).
    const counts = [...flat(5 * week, 10), ...flat(6, 20)];
    const t = 5 * week + 6;
    const entered = [1, 2, 3, 4, 5, 6].filter((k) => stepDetector(seriesAt(counts, t), t, t * hour, { escalating: false }, options(k)).event === "enter");
    expect(entered).toEqual([1, 2, 3]);
    const reading = stepDetector(seriesAt(counts, t), t, t * hour, { escalating: false }, options(3)).reading;
    expect(reading).toMatchObject({ last1: 20, last6: 20, k: 3, kLong: 2 });
    expect(reading.threshold1).toBeCloseTo(10 + 3 * Math.sqrt(10), 9);
  });

  test("the last hour alone is not enough: the 6-hour window must be above too", () => {
    const counts = [...flat(5 * week, 10), 30];
    const t = 5 * week + 1;
    const step = stepDetector(seriesAt(counts, t), t, t * hour, { escalating: false }, options(3));
    expect(step.reading.last1).toBeGreaterThan(step.reading.threshold1);
    expect(step.event).toBeNull();
  });

  test("with fewer than 2 weeks of history k + 1 applies", () => {
    const counts = [...flat(5 * week, 10), ...flat(6, 21)];
    const t = 5 * week + 6;
    // k = 3: 21 > 10 + 3√10 = 19.5 enters with two weeks; with one, k = 4 needs 22.6.
    expect(stepDetector(seriesAt(counts, t), 2 * week + 10, t * hour, { escalating: false }, options(3)).event).toBe("enter");
    const young = stepDetector(seriesAt(counts, t), week + 10, t * hour, { escalating: false }, options(3));
    expect(young.event).toBeNull();
    expect(young.reading.k).toBe(4);
  });

  test("no history: the floor of 20 in 6 hours and 20/6 in the last hour", () => {
    const run = (last6: number[]) => stepDetector([...last6].reverse(), 50, 0, { escalating: false }, options(6)).event;
    expect(run([3, 3, 3, 3, 3, 5])).toBe("enter"); // 20 in 6 hours, last hour 5
    expect(run([3, 3, 3, 3, 3, 4])).toBeNull(); // 19
    expect(run([4, 4, 4, 4, 1, 4])).toBe("enter"); // 21, last hour 4 ≥ 3.33
    expect(run([5, 5, 5, 5, 5, 3])).toBeNull(); // 28, but the last hour 3 < 20/6
    expect(run([0, 0, 0, 0, 0, 20])).toBe("enter");
    expect(run([0, 0, 0, 0, 0, 19])).toBeNull();
  });

  test("a signal younger than 7 days never escalates", () => {
    const counts = [...flat(5 * week, 10), ...flat(6, 100)];
    const t = 5 * week + 6;
    const at = (days: number) => stepDetector(seriesAt(counts, t), t, t * hour, { escalating: false }, options(3, { firstSeenAt: t * hour - days * 24 * hour })).event;
    expect(at(6.9)).toBeNull();
    expect(at(7)).toBe("enter");
  });

  test("escalating monitors hold the condition for their window first", () => {
    const counts = [...flat(5 * week, 10), ...flat(6, 40)];
    const t = 5 * week + 6;
    const series = seriesAt(counts, t);
    const hold = options(3, { holdMinutes: 10 });
    let state: DetectorState = { escalating: false };
    const events: (string | null)[] = [];
    for (let minute = 0; minute <= 10; minute++) {
      const step = stepDetector(series, t, t * hour + minute * 60_000, state, hold);
      state = step.state;
      events.push(step.event);
    }
    expect(events.slice(0, 10).every((event) => event === null)).toBe(true);
    expect(events[10]).toBe("enter");
  });
});

describe("exiting", () => {
  const spikeStart = 5 * week;

  test("calm: both windows below expected + 0.7·k·σ for 30 minutes", () => {
    const counts = [...flat(spikeStart, 10), ...flat(6, 25), ...flat(40, 10)];
    // The 6-hour window falls below 10 + 0.7·3·√10 = 16.6 four hours after the spike (150 − 15·4 < 99.6).
    const firstCalm = spikeStart + 10;
    const hourly = walk(counts, spikeStart + 1, spikeStart + 20, options(3));
    expect(hourly.enters).toHaveLength(1);
    expect(hourly.exits).toEqual([{ at: firstCalm + 1, reason: "calm" }]);
    // Minute by minute from the first calm evaluation: the exit comes after 30 minutes, not before.
    let current = walk(counts, spikeStart + 1, firstCalm, options(3)).state;
    expect(current.escalating).toBe(true);
    const t = firstCalm;
    const events: (string | null)[] = [];
    for (let minute = 0; minute <= 30; minute++) {
      const step = stepDetector(seriesAt(counts, t), t, t * hour + minute * 60_000, current, options(3));
      current = step.state;
      events.push(step.exitReason ?? step.event);
    }
    expect(events.slice(0, 30).every((event) => event === null)).toBe(true);
    expect(events[30]).toBe("calm");
  });

  test("halved: the 24-hour count falls below half of its value at entry", () => {
    // First evaluated after 24 hours at 60/h, then 18/h: never calm (18 > 10 + 0.7·3·√10 = 16.6).
    const counts = [...flat(spikeStart, 10), ...flat(24, 60), ...flat(48, 18)];
    const { enters, exits } = walk(counts, spikeStart + 24, spikeStart + 72, options(3));
    expect(enters).toEqual([spikeStart + 24]);
    // 1440 − 42·h < 720 first at h = 18.
    expect(exits).toEqual([{ at: spikeStart + 24 + 18, reason: "halved" }]);
  });

  test("timeout: 72 hours after entry, and no re-entry until the condition lapses", () => {
    const counts = [...flat(spikeStart, 10), ...flat(100, 40), ...flat(12, 10), ...flat(6, 40)];
    const { enters, exits } = walk(counts, spikeStart + 1, spikeStart + 80, options(3));
    expect(enters).toHaveLength(1);
    expect(exits).toEqual([{ at: enters[0] + 72, reason: "timeout" }]);
    const later = walk(counts, spikeStart + 1, spikeStart + 118, options(3));
    expect(later.enters).toHaveLength(2);
    expect(later.enters[1]).toBeGreaterThan(spikeStart + 112);
  });

  test("below: a drop enters when direction is below", () => {
    const counts = [...flat(spikeStart, 40), ...flat(6, 5)];
    const t = spikeStart + 6;
    expect(stepDetector(seriesAt(counts, t), t, t * hour, { escalating: false }, options(3, { direction: "below" })).event).toBe("enter");
    expect(stepDetector(seriesAt(counts, t), t, t * hour, { escalating: false }, options(3)).event).toBeNull();
  });
});

test("sensitivity 1 opens more incidents than 6 on the same series", () => {
  // Five weeks of a daily rhythm with deterministic noise, then a week with bursts of several sizes.
  let seed = 42;
  const noise = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31 - 0.5) * 6;
  const counts = Array.from({ length: 6 * week }, (_, h) => Math.max(0, Math.round(20 + 8 * Math.sin((2 * Math.PI * (h % 24)) / 24) + noise())));
  for (const [start, extra] of [[5 * week + 10, 8], [5 * week + 40, 14], [5 * week + 80, 25], [5 * week + 120, 45]]) {
    for (let h = start; h < start + 6; h++) counts[h] += extra;
  }
  const incidents = (k: number) => walk(counts, 5 * week, 6 * week, options(k)).enters.length;
  const noisy = incidents(1);
  const strict = incidents(6);
  expect(strict).toBeGreaterThanOrEqual(1);
  expect(noisy).toBeGreaterThan(strict);
  for (let k = 1; k < 6; k++) expect(incidents(k)).toBeGreaterThanOrEqual(incidents(k + 1));
});
