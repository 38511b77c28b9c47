import type { Context } from "../../context";
import { scheduleJob } from "../../jobs/boss";
import { refreshAlignment } from "./alignment";
import { detectorRetryQueue, TraceDetectors, type DetectorRetryJob } from "./detectors";
import { runSignalsExport, signalsExportQueue } from "./export";
import { signalsRuntime } from "./runtime";

/** Background work of signals, on pg-boss queues the fleet shares. */
export async function startSignalJobs(ctx: Context) {
  const { discovery } = signalsRuntime(ctx);
  // Each process drains with SKIP LOCKED, so ticks that overlap across processes split the events.
  await scheduleJob(ctx.boss, "signal-discovery", "* * * * *", () => discovery.drain(), ctx.log);
  const detectors = new TraceDetectors(ctx);
  // Before the scan that queues into it. A throw leaves the job to pg-boss's retries (flags and verdicts already written are not written twice).
  await ctx.boss.createQueue(detectorRetryQueue);
  await ctx.boss.work<DetectorRetryJob>(detectorRetryQueue, async ([job]) => {
    if (job) await detectors.runTraces(job.data.organizationId, job.data.projectId, job.data.traceIds);
  });
  await scheduleJob(ctx.boss, "signal-detectors", "* * * * *", () => detectors.scanUntilCaughtUp(), ctx.log);
  await scheduleJob(ctx.boss, "signal-names", "*/15 * * * *", () => discovery.renameStale(), ctx.log);
  await scheduleJob(ctx.boss, "evaluation-alignment", "* * * * *", () => refreshAlignment(ctx.sql), ctx.log);
  await ctx.boss.createQueue(signalsExportQueue);
  await ctx.boss.work<Parameters<typeof runSignalsExport>[1]>(signalsExportQueue, async ([job]) => {
    if (job) await runSignalsExport(ctx, job.data);
  });
}
