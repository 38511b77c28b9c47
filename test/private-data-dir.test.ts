// A private DATA_DIR (mode 0700, as `mktemp -d` makes it) when Vigil runs as root, as containers do: the embedded
// PostgreSQL runs as the `postgres` user and must reach its cluster without the directory opening to others.
import { afterAll, expect, setDefaultTimeout, test } from "bun:test";
import { chmodSync, mkdirSync, mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { bootstrapAccount } from "./helpers";
import { killGroup, killWithPostgres, spawnVigil, type VigilProcess } from "./process";

setDefaultTimeout(60_000);

const asRoot = process.getuid?.() === 0;
const dirs: string[] = [];
const started: VigilProcess[] = [];

afterAll(() => {
  for (const vigil of started) killWithPostgres(vigil);
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

test.skipIf(!asRoot)("as root, a 0700 DATA_DIR starts, and only the postgres user gains search permission on it", async () => {
  const dir = mkdtempSync(join(tmpdir(), "vigil-private-"));
  dirs.push(dir);
  expect(statSync(dir).mode & 0o777).toBe(0o700);
  const vigil = await spawnVigil(dir);
  started.push(vigil);
  const { account } = await bootstrapAccount(vigil.url, { projectName: "Private" });
  expect(account.projectSlug).toBeTruthy();
  const stat = statSync(dir);
  expect(stat.mode & 0o777).toBe(0o710);
  expect(stat.uid).toBe(0);
  expect(stat.gid).toBe(Number(Bun.spawnSync(["id", "-g", "postgres"]).stdout.toString().trim()));
  killGroup(vigil.child, "SIGTERM");
  expect(await vigil.exited).toBe(0);
}, 180_000);

test.skipIf(!asRoot)("as root, a DATA_DIR the postgres user cannot reach stops the start with one line naming it and the fix", async () => {
  const parent = mkdtempSync(join(tmpdir(), "vigil-closed-"));
  dirs.push(parent);
  const dir = join(parent, "data");
  mkdirSync(dir);
  chmodSync(dir, 0o755);
  const proc = Bun.spawn(["bun", "run", "src/index.ts"], {
    cwd: join(import.meta.dir, ".."),
    env: { ...process.env, DATA_DIR: dir, PORT: "0", OTLP_GRPC_PORT: "0" },
    stdout: "pipe",
    stderr: "pipe",
  });
  expect(await proc.exited).toBe(2);
  const stderr = (await new Response(proc.stderr).text()).trim();
  expect(stderr.split("\n")).toHaveLength(1);
  expect(stderr).toStartWith(`vigil: DATA_DIR ${dir} cannot be entered by the user "postgres"`);
  expect(stderr).toContain("chmod o+x");
  // Nothing changed where it would not have helped.
  expect(statSync(parent).mode & 0o777).toBe(0o700);
  expect(statSync(dir).mode & 0o777).toBe(0o755);
});
