import type { Context } from "../context";
import { createMailer } from "../lib/mailer";
import { MonitorEvaluator } from "../modules/monitors/evaluate";
import { Measurer } from "../modules/monitors/measure";
import { IncidentNotifier, notifyQuarantine } from "../modules/monitors/notify";
import { createSignalSource } from "../modules/monitors/signal-source";
import { deliverWebhook, enqueueWebhook, webhookQueue, type WebhookJob } from "../modules/monitors/webhooks";
import { EmbeddingsClient } from "../modules/traces/embeddings";
import { TraceSearch } from "../modules/traces/search";
import { scheduleJob } from "./boss";

const projectQueue = "evaluate-project-monitors";

/**
 * Monitors on the fleet's queue. Every minute one tick (a singleton across processes) finds the
 * projects with monitors due and queues one evaluation per project; any process works them, and
 * each claims its monitors in PostgreSQL so a monitor is evaluated once per interval. With an
 * interval under a minute, the tick queues again every interval until the minute is over. Each
 * evaluation then mails and posts the notices it caused; webhook deliveries retry on their own queue.
 */
export async function startMonitorJobs(ctx: Context): Promise<void> {
  const settings = ctx.config.monitors;
  const mailer = createMailer(ctx.config, ctx.log);
  ctx.onShutdown(() => mailer.drain());
  const search = new TraceSearch(ctx.config.embeddings ? new EmbeddingsClient(ctx.config.embeddings) : null, ctx.log);
  const evaluator = new MonitorEvaluator(ctx.sql, new Measurer(ctx.ch, search), createSignalSource(ctx), settings.intervalSeconds || 60, ctx.log);
  const webhookSettings = { retryDelaySeconds: settings.webhookRetryDelaySeconds, maxAttempts: settings.webhookMaxAttempts };
  const notifier = new IncidentNotifier(ctx.sql, mailer, ctx.config.publicUrl, (row, event, project) => enqueueWebhook(ctx.sql, ctx.boss, webhookSettings, row, event, project), ctx.log);

  await ctx.boss.createQueue(webhookQueue);
  await ctx.boss.work<WebhookJob>(webhookQueue, async ([job]) =>
    deliverWebhook(ctx.sql, job!, settings.webhookMaxAttempts, (webhook) => notifyQuarantine(ctx.sql, mailer, webhook, ctx.log), ctx.log),
  );
  if (!settings.intervalSeconds) {
    ctx.log.info("scheduled monitor evaluation is off (MONITOR_INTERVAL_SECONDS=0)");
    return;
  }

  await ctx.boss.createQueue(projectQueue, { policy: "stately" });
  await ctx.boss.work<{ projectId: string }>(projectQueue, async ([job]) => {
    await evaluator.evaluateProject(job!.data.projectId);
    await notifier.run();
  });
  await scheduleJob(
    ctx.boss,
    "monitor-tick",
    "* * * * *",
    async () => {
      const minuteEnd = Date.now() + 60_000;
      for (;;) {
        const projects = await evaluator.dueProjects(new Date());
        if (projects.length) await ctx.boss.insert(projectQueue, projects.map((projectId) => ({ data: { projectId }, singletonKey: projectId })));
        await notifier.run();
        if (Date.now() + settings.intervalSeconds * 1000 >= minuteEnd) return;
        await Bun.sleep(settings.intervalSeconds * 1000);
      }
    },
    ctx.log,
  );
}
