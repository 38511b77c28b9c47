import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { createLogger } from "../src/lib/log";
import { sha256Hex } from "../src/lib/ids";
import {
  MigrationError,
  migrateClickHouse,
  migratePostgres,
  readMigrations,
  renderClickHouseStatements,
  type MigrationFile,
} from "../src/db/migrate";
import { startTestVigil } from "./helpers";

setDefaultTimeout(60_000);

const log = createLogger("silent");
const file = (name: string, text: string): MigrationFile => ({ name, text, checksum: sha256Hex(text) });

describe("migrations", () => {
  test("the cluster variant of every ClickHouse statement parses, with ON CLUSTER and Replicated engines", async () => {
    const vigil = await startTestVigil();
    const files = readMigrations("clickhouse");
    expect(files.length).toBeGreaterThan(0);
    for (const migration of files) {
      for (const statement of renderClickHouseStatements(migration, "vigil", "prod")) {
        const result = await vigil.ctx.ch.client.query({
          query: "SELECT formatQuery({statement:String}) AS formatted",
          query_params: { statement },
          format: "JSONEachRow",
        });
        const [{ formatted }] = await result.json<{ formatted: string }>();
        if (/^\s*CREATE/i.test(statement)) expect(formatted).toContain("ON CLUSTER prod");
        if (/ENGINE\s*=/i.test(statement)) expect(formatted).toMatch(/ENGINE = Replicated\w*MergeTree\('\/clickhouse\/tables\/\{shard\}/);
      }
    }
    await vigil.stop();
  });

  test("applying again is a no-op, and a changed applied file is an error", async () => {
    const vigil = await startTestVigil();
    const { sql, ch } = vigil.ctx;
    const before = await sql`SELECT name, applied_at FROM schema_migrations ORDER BY name`;
    await migratePostgres(sql, log);
    expect(await sql`SELECT name, applied_at FROM schema_migrations ORDER BY name`).toEqual(before);

    const original = file("900_probe.sql", "CREATE TABLE IF NOT EXISTS probe (id int);");
    await migratePostgres(sql, log, [original]);
    const [{ checksum }] = await sql`SELECT checksum FROM schema_migrations WHERE name = '900_probe.sql'`;
    expect(checksum).toBe(original.checksum);
    const changed = file("900_probe.sql", "CREATE TABLE IF NOT EXISTS probe (id bigint);");
    await expect(migratePostgres(sql, log, [changed])).rejects.toBeInstanceOf(MigrationError);

    const chProbe = file("900_probe.sql", "CREATE TABLE IF NOT EXISTS {{db}}.probe (id UInt8) ENGINE = MergeTree ORDER BY id;");
    await migrateClickHouse(ch, null, log, [chProbe]);
    await migrateClickHouse(ch, null, log, [chProbe]);
    const changedCh = file("900_probe.sql", "CREATE TABLE IF NOT EXISTS {{db}}.probe (id UInt16) ENGINE = MergeTree ORDER BY id;");
    await expect(migrateClickHouse(ch, null, log, [changedCh])).rejects.toBeInstanceOf(MigrationError);
    await vigil.stop();
  });
});
