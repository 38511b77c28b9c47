import { ConfigError, loadConfig, type Config } from "./config";
import { openClickHouse, type ClickHouseStore } from "./db/clickhouse";
import { DataDirError, DataDirInUseError, lockDataDir } from "./db/data-dir";
import { migrateClickHouse, migratePostgres } from "./db/migrate";
import { openPostgres, type Sql } from "./db/postgres";
import { createLogger, type Logger } from "./lib/log";
import { ScoreCopier } from "./modules/scores/copy";
import { rebuildRollups, type RollupScope } from "./db/rollups";
import { parseArgs } from "node:util";
import { planLimits } from "./gateway/rate-limit";

interface Stores {
  sql: Sql;
  ch: ClickHouseStore;
  log: Logger;
}

/** A bad argument: printed as one line with the usage. */
class UsageError extends Error {}

/** `--project <id or slug>`, `--from <ISO instant>`, `--to <ISO instant>`. */
async function rollupScope(sql: Sql, args: string[]): Promise<RollupScope> {
  const { values } = parseArgs({ args, options: { project: { type: "string" }, from: { type: "string" }, to: { type: "string" } } });
  const scope: RollupScope = {};
  for (const bound of ["from", "to"] as const) {
    const value = values[bound];
    if (value === undefined) continue;
    const date = new Date(value);
    if (Number.isNaN(date.getTime())) throw new UsageError(`--${bound}: not an ISO 8601 instant: ${value}`);
    scope[bound] = date;
  }
  if (values.project !== undefined) {
    const projects = await sql<{ id: string; organization_id: string }[]>`
      SELECT id, organization_id FROM projects WHERE (id = ${values.project} OR slug = ${values.project}) AND deleted_at IS NULL`;
    if (projects.length === 0) throw new UsageError(`--project: no project has the id or slug ${values.project}`);
    if (projects.length > 1) throw new UsageError(`--project: several organizations have a project ${values.project}; give its id`);
    scope.organizationId = projects[0]!.organization_id;
    scope.projectId = projects[0]!.id;
  }
  return scope;
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
  "rebuild-rollups": {
    summary: "Recompute the trace and session roll-ups from spans [--project <id|slug>] [--from <ISO>] [--to <ISO>] (idempotent)",
    async run({ sql, ch }, args) {
      const rebuilt = await rebuildRollups(ch, await rollupScope(sql, args));
      return `rebuilt ${rebuilt.map(({ table, rows }) => `${rows} ${table}`).join(", ")} from spans`;
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
  const unlock = embedded ? await lockDataDir(config.dataDir) : () => {};
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
  if (error instanceof UsageError || (error as NodeJS.ErrnoException).code?.startsWith("ERR_PARSE_ARGS")) {
    console.error(`vigil: ${name}: ${(error as Error).message}`);
    process.exit(2);
  }
  if (error instanceof DataDirError) {
    console.error(`vigil: ${error.message}`);
    process.exit(2);
  }
  console.error(`vigil: ${name} failed: ${(error as Error).message}`);
  process.exit(1);
}
