import { ConfigError, loadConfig } from "./config";
import { DataDirError } from "./db/data-dir";
import { ListenError, startVigil } from "./server";

let config;
try {
  config = loadConfig(process.env);
} catch (error) {
  if (error instanceof ConfigError) {
    console.error(`vigil: invalid configuration: ${error.message}`);
    process.exit(2);
  }
  throw error;
}

const vigil = await startVigil(config).catch((error) => {
  if (error instanceof DataDirError || error instanceof ListenError) {
    console.error(`vigil: ${error.message}`);
    process.exit(2);
  }
  throw error;
});
/**
 * `bun run start` forwards the signals it gets to Vigil, so a signal sent to the whole process group (systemd's
 * default, a terminal's Ctrl-C) arrives twice within moments: that is one request to stop. Only a Ctrl-C pressed
 * again later forces the exit; a supervisor that runs out of patience sends SIGKILL.
 */
let shutdownStartedAt: number | null = null;
const shutdown = (signal: string) => {
  if (shutdownStartedAt !== null) {
    if (signal === "SIGINT" && performance.now() - shutdownStartedAt > 1_000) process.exit(1);
    return;
  }
  shutdownStartedAt = performance.now();
  vigil.ctx.log.info("signal received", { signal });
  vigil.stop().then(
    () => process.exit(0),
    () => process.exit(1),
  );
};
process.on("SIGTERM", () => shutdown("SIGTERM"));
process.on("SIGINT", () => shutdown("SIGINT"));
// A promise of background work that fails unobserved (a job queue query cut by a PostgreSQL restart) must not
// take ingest and the API down with it: it is logged, and the work is retried by its own schedule.
process.on("unhandledRejection", (error) => vigil.ctx.log.error("unhandled rejection", { error: error as Error }));
