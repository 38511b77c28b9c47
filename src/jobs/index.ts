import type { Context } from "../context";
import { RateLimiter } from "../lib/rate-limit";
import { deleteExpiredBootstrapOrganizations } from "./bootstrap-expiry";

interface Job {
  name: string;
  run(): Promise<unknown>;
}

/**
 * Runs the periodic maintenance jobs every `intervalMs` in every process; the jobs themselves are
 * safe to run concurrently across processes. A round never overlaps the previous one, and shutdown
 * waits for a round in progress.
 */
export function startJobs(ctx: Context, intervalMs = 60_000): void {
  const limiter = new RateLimiter(ctx.sql);
  const jobs: Job[] = [
    { name: "delete-expired-bootstrap-organizations", run: () => deleteExpiredBootstrapOrganizations(ctx) },
    { name: "purge-expired-rate-limits", run: () => limiter.purgeExpired() },
  ];
  let timer: ReturnType<typeof setTimeout> | null = null;
  let round: Promise<void> | null = null;
  let stopped = false;

  const runRound = async () => {
    for (const job of jobs) {
      try {
        await job.run();
      } catch (error) {
        ctx.log.error("job failed", { job: job.name, error: error as Error });
      }
    }
  };
  const schedule = () => {
    timer = setTimeout(() => {
      round = runRound().finally(() => {
        round = null;
        if (!stopped) schedule();
      });
    }, intervalMs);
  };

  schedule();
  ctx.onShutdown(async () => {
    stopped = true;
    if (timer) clearTimeout(timer);
    await round;
  });
}
