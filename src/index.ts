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
let signals = 0;
const shutdown = (signal: string) => {
  if (++signals > 1) process.exit(1);
  vigil.ctx.log.info("signal received", { signal });
  vigil.stop().then(
    () => process.exit(0),
    () => process.exit(1),
  );
};
process.on("SIGTERM", () => shutdown("SIGTERM"));
process.on("SIGINT", () => shutdown("SIGINT"));
