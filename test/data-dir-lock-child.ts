// Child of the data directory lock tests: waits for a common start time, tries to lock the directory (waiting at
// most <waitMs> for a holder), prints "locked" or "refused", and holds a won lock for <holdMs> (forever when
// "forever"). Args: <dataDir> <startAtMs> <waitMs> <holdMs>.
import { DataDirInUseError, lockDataDir } from "../src/db/data-dir";

const [dataDir, startAt, waitMs, holdMs] = process.argv.slice(2);
while (Date.now() < Number(startAt));
try {
  const unlock = await lockDataDir(dataDir!, Number(waitMs));
  console.log("locked");
  if (holdMs === "forever") setInterval(() => {}, 1 << 30);
  else {
    await Bun.sleep(Number(holdMs));
    unlock();
  }
} catch (error) {
  if (!(error instanceof DataDirInUseError)) throw error;
  console.log("refused");
}
