// Child of the data directory lock race test: waits for a common start time, tries to lock the
// directory, prints "locked" or "refused", holds a won lock for a while. Args: <dataDir> <startAtMs>.
import { DataDirInUseError, lockDataDir } from "../src/db/data-dir";

const [dataDir, startAt] = process.argv.slice(2);
while (Date.now() < Number(startAt));
try {
  const unlock = lockDataDir(dataDir!);
  console.log("locked");
  await Bun.sleep(1_500);
  unlock();
} catch (error) {
  if (!(error instanceof DataDirInUseError)) throw error;
  console.log("refused");
}
