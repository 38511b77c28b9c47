// Every test file runs in this one process: one embedded PostgreSQL server and one chdb engine
// serve them all, and each Vigil started by a test gets its own PostgreSQL and ClickHouse database.
//
// Tests start servers and wait for background work, for which bun's default of 5 s per test is too short on a
// loaded 2-core machine. setDefaultTimeout applies only to the file that calls it (not to every file when called
// here, and bunfig has no such key), so each test file sets 60 s itself.
import { afterAll } from "bun:test";
import { stopTestStores } from "./helpers";

// Stopping every Vigil and the embedded PostgreSQL takes longer than bun's 5 s hook default on a loaded machine.
afterAll(async () => {
  const started = performance.now();
  await stopTestStores();
  if (process.env.TEST_REPORT_STOP) console.log(`stores stopped in ${Math.round(performance.now() - started)} ms`);
}, 60_000);
