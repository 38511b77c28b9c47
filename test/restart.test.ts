import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { LatitudeClient } from "@latitude-data/sdk";
import { bootstrapAccount, testRoot } from "./helpers";
import { killGroup, spawnVigil, type VigilProcess } from "./process";

const dataDir = join(testRoot, "restart");
const started: VigilProcess[] = [];

async function start() {
  const vigil = await spawnVigil(dataDir);
  started.push(vigil);
  return vigil;
}

function isAlive(pid: number) {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

afterAll(() => {
  for (const vigil of started) killGroup(vigil.child, "SIGKILL");
  rmSync(dataDir, { recursive: true, force: true });
});

describe("restart on the same data directory", () => {
  let apiKey = "";
  let projectSlug = "";

  test("graceful restart keeps projects and keys", async () => {
    const first = await start();
    const { account, client } = await bootstrapAccount(first.url, { projectName: "Survivor" });
    apiKey = account.apiKey;
    projectSlug = account.projectSlug;
    await client.projects.create({ name: "Second" } as never);
    killGroup(first.child, "SIGTERM");
    expect(await first.exited).toBe(0);
    expect(first.output()).toContain('"msg":"stopped"');

    const second = await start();
    const client2 = new LatitudeClient({ baseUrl: second.url, apiKey } as never);
    const projects = await client2.projects.list({} as never);
    expect(projects.items.map((project: { name: string }) => project.name).sort()).toEqual(["Second", "Survivor"]);
    killGroup(second.child, "SIGTERM");
    expect(await second.exited).toBe(0);
  });

  test("restart after SIGKILL of Vigil alone reclaims the orphaned postgres", async () => {
    const vigil = await start();
    const pidFile = join(dataDir, "pg", "postmaster.pid");
    const postgresPid = Number(readFileSync(pidFile, "utf8").split("\n")[0]);
    process.kill(vigil.child.pid!, "SIGKILL");
    await vigil.exited;
    expect(isAlive(postgresPid)).toBe(true);

    const next = await start();
    expect(isAlive(postgresPid)).toBe(false);
    const client = new LatitudeClient({ baseUrl: next.url, apiKey } as never);
    const project = await client.projects.get(projectSlug);
    expect(project.name).toBe("Survivor");
    killGroup(next.child, "SIGTERM");
    await next.exited;
  });

  test("restart after SIGKILL of the whole process group (stale postmaster.pid)", async () => {
    const vigil = await start();
    killGroup(vigil.child, "SIGKILL");
    await vigil.exited;
    await Bun.sleep(200);
    expect(existsSync(join(dataDir, "pg", "postmaster.pid"))).toBe(true);

    const next = await start();
    const client = new LatitudeClient({ baseUrl: next.url, apiKey } as never);
    const list = await client.projects.list({} as never);
    expect(list.items.length).toBe(2);
    killGroup(next.child, "SIGTERM");
    expect(await next.exited).toBe(0);
  });
});

describe("configuration", () => {
  test("a bad value stops the process with one line naming the variable", async () => {
    const proc = Bun.spawn(["bun", "run", "src/index.ts"], {
      cwd: join(import.meta.dir, ".."),
      env: { ...process.env, PORT: "eighty", DATA_DIR: join(testRoot, "badcfg") },
      stderr: "pipe",
      stdout: "pipe",
    });
    expect(await proc.exited).toBe(2);
    const stderr = (await new Response(proc.stderr).text()).trim();
    expect(stderr.split("\n")).toHaveLength(1);
    expect(stderr).toContain("PORT");
  });
});

describe("one Vigil per data directory", () => {
  test("a second process on the same DATA_DIR refuses to start and leaves the first one serving", async () => {
    const dir = join(testRoot, "locked");
    const first = await spawnVigil(dir);
    started.push(first);
    const second = Bun.spawn(["bun", "run", "src/index.ts"], {
      cwd: join(import.meta.dir, ".."),
      env: { ...process.env, DATA_DIR: dir, PORT: "0", OTLP_GRPC_PORT: "0" },
      stderr: "pipe",
      stdout: "pipe",
    });
    expect(await second.exited).toBe(2);
    expect(await new Response(second.stderr).text()).toContain("in use by another Vigil process");
    expect((await fetch(`${first.url}/health`)).status).toBe(200);
    killGroup(first.child, "SIGTERM");
    expect(await first.exited).toBe(0);
  });
});
