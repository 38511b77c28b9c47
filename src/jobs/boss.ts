import { PgBoss, type Db } from "pg-boss";
import type { Queryable } from "../db/postgres";
import type { Logger } from "../lib/log";

export type Boss = PgBoss;

/**
 * The fleet's shared job queue: pg-boss in PostgreSQL's `pgboss` schema. Every Vigil process on the
 * same database works the same queues, so a job or a scheduled tick runs once across the fleet.
 */
export async function startBoss(url: string, log: Logger): Promise<Boss> {
  const boss = new PgBoss({ connectionString: url, schema: "pgboss", max: 4, application_name: "vigil-jobs" });
  boss.on("error", (error) => log.error("job queue error", { error }));
  await boss.start();
  return boss;
}

/**
 * A job run on a cron schedule (pg-boss's resolution is one minute): one queue of the same name,
 * at most one run at a time across the fleet.
 */
export async function scheduleJob(boss: Boss, name: string, cron: string, run: () => Promise<unknown>, log: Logger): Promise<void> {
  await boss.createQueue(name, { policy: "singleton" });
  await boss.schedule(name, cron);
  await boss.work(name, async () => {
    try {
      await run();
    } catch (error) {
      log.error("job failed", { job: name, error: error as Error });
      throw error;
    }
  });
}

/** A PostgreSQL transaction as pg-boss's database: a job sent through it commits or rolls back with the transaction. */
export const inTransaction = (tx: Queryable): Db => ({
  executeSql: async (text: string, values: unknown[] = []) => ({ rows: await tx.unsafe(text, values as never[]) }),
});
