import type { Context } from "../context";
import { RateLimiter } from "../lib/rate-limit";
import { deleteExpiredBootstrapOrganizations } from "./bootstrap-expiry";
import { scheduleJob } from "./boss";
import { purgeExpiredPeopleAndOAuth } from "../oauth/purge";
import { startGatewayWorker } from "../gateway";
import { startSignalJobs } from "../modules/signals/jobs";
import { startMonitorJobs } from "./monitors";

/**
 * Everything that runs in the background, in one place. Work lives in pg-boss queues in PostgreSQL,
 * so several Vigil processes share it and each scheduled job runs once per tick across the fleet;
 * shutdown (pg-boss's graceful stop, registered in server.ts) waits for jobs in progress.
 */
export async function startJobs(ctx: Context): Promise<void> {
  const limiter = new RateLimiter(ctx.sql);
  await scheduleJob(ctx.boss, "delete-expired-bootstrap-organizations", "* * * * *", () => deleteExpiredBootstrapOrganizations(ctx), ctx.log);
  await scheduleJob(ctx.boss, "purge-expired-rate-limits", "*/10 * * * *", () => limiter.purgeExpired(), ctx.log);
  await scheduleJob(ctx.boss, "purge-expired-sign-in-and-oauth", "*/10 * * * *", () => purgeExpiredPeopleAndOAuth(ctx.sql), ctx.log);
  await startGatewayWorker(ctx);
  await startSignalJobs(ctx);
  await startMonitorJobs(ctx);
}
