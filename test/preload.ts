// Every test file runs in this one process: one embedded PostgreSQL server and one chdb engine
// serve them all, and each Vigil started by a test gets its own PostgreSQL and ClickHouse database.
import { afterAll, setDefaultTimeout } from "bun:test";
import { stopTestStores } from "./helpers";

// Tests start servers and wait for background work; 5 s is too short on a loaded 2-core machine.
setDefaultTimeout(60_000);

afterAll(async () => {
  await stopTestStores();
});
