// Every test file runs in this one process: one embedded PostgreSQL server and one chdb engine
// serve them all, and each Vigil started by a test gets its own PostgreSQL and ClickHouse database.
import { afterAll } from "bun:test";
import { stopTestStores } from "./helpers";

afterAll(async () => {
  await stopTestStores();
});
