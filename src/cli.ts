import { ConfigError, loadConfig, type Config } from "./config";
import { openClickHouse, type ClickHouseStore } from "./db/clickhouse";
import { DataDirInUseError, lockDataDir } from "./db/data-dir";
import { migrateClickHouse, migratePostgres } from "./db/migrate";
import { openPostgres, type Sql } from "./db/postgres";
import { createLogger, type Logger } from "./lib/log";
import { ScoreCopier } from "./modules/scores/copy";
import { planLimits } from "./gateway/rate-limit";

interface Stores {
  sql: Sql;
  ch: ClickHouseStore;
  log: Logger;
}

/** Maintenance commands; each returns the line it prints. */
const commands: Record<string, { summary: string; run(stores: Stores, args: string[]): Promise<string> }> = {
  "rebuild-score-copy": {
    summary: "Re-copy every score and annotation from PostgreSQL into ClickHouse (idempotent)",
    async run({ sql, ch, log }) {
      const copied = await new ScoreCopier(sql, ch, log).rebuild();
      return `rebuilt the ClickHouse copy of ${copied} scores`;
    },
  },
  "set-plan": {
    summary: "set-plan <organization id or slug> <hobby|team|enterprise>: the plan that sets its gateway rate limits",
    async run({ sql }, [organization = "", plan = ""]) {
      if (!Object.hasOwn(planLimits, plan)) throw new Error(`plan must be one of ${Object.keys(planLimits).join(", ")}, got "${plan}"`);
      const [row] = await sql<{ id: string }[]>`
        UPDATE organizations SET plan = ${plan}, updated_at = now() WHERE id = ${organization} OR slug = ${organization} RETURNING id`;
      if (!row) throw new Error(`no organization "${organization}"`);
      return `organization ${row.id} is on the ${plan} plan (running processes apply it within 5 seconds)`;
    },
  },
};

/**
 * Opens the stores the server would open, with its migrations applied (a lost ClickHouse database
 * gets its tables back). Embedded stores belong to one process, so with either of them the data
 * directory must not be in use by a running Vigil; with DATABASE_URL and CLICKHOUSE_URL both set the
 * command can run beside it.
 */
async function withStores<T>(config: Config, log: Logger, use: (stores: Stores) => Promise<T>): Promise<T> {
  const embedded = config.databaseUrl === null || config.clickhouse.url === null;
  const unlock = embedded ? lockDataDir(config.dataDir) : () => {};
  try {
    const pg = await openPostgres(config.databaseUrl, config.dataDir, log);
    const ch = openClickHouse(config);
    try {
      await migratePostgres(pg.sql, log);
      await migrateClickHouse(ch, config.clickhouse.cluster, log);
      return await use({ sql: pg.sql, ch, log });
    } finally {
      await ch.close();
      await pg.close();
    }
  } finally {
    unlock();
  }
}

const name = process.argv[2] ?? "";
const command = Object.hasOwn(commands, name) ? commands[name]! : null;
if (!command) {
  const usage = Object.entries(commands).map(([key, { summary }]) => `  ${key.padEnd(20)} ${summary}`);
  console.error(["usage: bun run src/cli.ts <command>", "", "commands:", ...usage].join("\n"));
  process.exit(2);
}

try {
  const config = loadConfig(process.env);
  console.log(await withStores(config, createLogger(config.logLevel), (stores) => command.run(stores, process.argv.slice(3))));
} catch (error) {
  if (error instanceof ConfigError) {
    console.error(`vigil: invalid configuration: ${error.message}`);
    process.exit(2);
  }
  if (error instanceof DataDirInUseError) {
    console.error(`vigil: ${error.message}; stop it first, or set DATABASE_URL and CLICKHOUSE_URL`);
    process.exit(2);
  }
  console.error(`vigil: ${name} failed: ${(error as Error).message}`);
  process.exit(1);
}
