import { afterAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { existsSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { connect } from "node:net";
import { join } from "node:path";
import { LatitudeClient } from "@latitude-data/sdk";
import { bootstrapAccount, testRoot } from "./helpers";
import { isAlive, killGroup, killWithPostgres, postmasterPid, spawnVigil, type VigilProcess } from "./process";

setDefaultTimeout(60_000);

const dataDir = join(testRoot, "restart");
const started: VigilProcess[] = [];

async function start() {
  const vigil = await spawnVigil(dataDir);
  started.push(vigil);
  return vigil;
}

/** The process group of a running process, from /proc/<pid>/stat (field 5). */
const processGroup = (pid: number) => {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[2]);
};

/** Pids of the processes that stop the postmaster `postgresPid` when Vigil dies. */
const watchdogsOf = (postgresPid: number) =>
  readdirSync("/proc")
    .filter((entry) => /^\d+$/.test(entry))
    .filter((pid) => {
      try {
        const args = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
        return args.includes("vigil-postgres-watchdog") && args.includes(String(postgresPid));
      } catch {
        return false;
      }
    })
    .map(Number);

afterAll(() => {
  for (const vigil of started) killWithPostgres(vigil);
  for (const dir of new Set(started.map((vigil) => vigil.dataDir))) rmSync(dir, { recursive: true, force: true });
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

  test("after a SIGKILL of Vigil's process group its postgres stops by itself, and a restart works", async () => {
    const vigil = await start();
    const postgresPid = postmasterPid(dataDir);
    killGroup(vigil.child, "SIGKILL");
    const deadline = performance.now() + 15_000;
    while (isAlive(postgresPid) && performance.now() < deadline) await Bun.sleep(50);
    expect(isAlive(postgresPid)).toBe(false);

    const next = await start();
    const client = new LatitudeClient({ baseUrl: next.url, apiKey } as never);
    expect((await client.projects.get(projectSlug)).name).toBe("Survivor");
    killGroup(next.child, "SIGTERM");
    expect(await next.exited).toBe(0);
  });

  test("a restart right after a SIGKILL of Vigil's process group starts, as a supervisor's would", async () => {
    const vigil = await start();
    killGroup(vigil.child, "SIGKILL");
    // Not waiting for the killed process to be reaped, nor for its postgres to stop.
    await Bun.sleep(300);
    const next = await start();
    const client = new LatitudeClient({ baseUrl: next.url, apiKey } as never);
    expect((await client.projects.get(projectSlug)).name).toBe("Survivor");
    killGroup(next.child, "SIGTERM");
    expect(await next.exited).toBe(0);
  });

  test("restart after SIGKILL of Vigil and its postgres watchdog reclaims the orphaned postgres", async () => {
    const vigil = await start();
    const postgresPid = postmasterPid(dataDir);
    const watchdogs = watchdogsOf(postgresPid);
    expect(watchdogs).toHaveLength(1);
    for (const pid of watchdogs) process.kill(pid, "SIGKILL");
    process.kill(vigil.child.pid!, "SIGKILL");
    await vigil.exited;
    await Bun.sleep(1_000);
    expect(isAlive(postgresPid)).toBe(true);

    const next = await start();
    expect(isAlive(postgresPid)).toBe(false);
    const client = new LatitudeClient({ baseUrl: next.url, apiKey } as never);
    const project = await client.projects.get(projectSlug);
    expect(project.name).toBe("Survivor");
    killGroup(next.child, "SIGTERM");
    await next.exited;
  });

  test("restart after SIGKILL of Vigil and postgres alike (stale postmaster.pid)", async () => {
    const vigil = await start();
    const postgresPid = postmasterPid(dataDir);
    killGroup(vigil.child, "SIGKILL");
    // PostgreSQL runs in its own process group: kill it and its backends too, as a machine crash would.
    process.kill(-postgresPid, "SIGKILL");
    await vigil.exited;
    while (isAlive(postgresPid)) await Bun.sleep(20);
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
  const runWith = async (env: Record<string, string>) => {
    const proc = Bun.spawn(["bun", "run", "src/index.ts"], {
      cwd: join(import.meta.dir, ".."),
      env: { ...process.env, DATA_DIR: join(testRoot, "badcfg"), ...env },
      stderr: "pipe",
      stdout: "pipe",
    });
    return { code: await proc.exited, stderr: (await new Response(proc.stderr).text()).trim() };
  };

  const badValues: Record<string, string>[] = [
    { PORT: "eighty" },
    { HOST: "not a host" },
    { DATA_DIR: join(import.meta.dir, "restart.test.ts") },
    { LOG_LEVEL: "verbose" },
    { PUBLIC_URL: "vigil.example.com" },
    { CLICKHOUSE_CLUSTER: "prod-cluster" },
    { TRUSTED_PROXIES: "10.0.0.0/40" },
  ];
  for (const env of badValues) {
    const variable = Object.keys(env)[0]!;
    test(`a bad ${variable} stops the process with one line naming the variable`, async () => {
      const { code, stderr } = await runWith(env);
      expect(code).toBe(2);
      expect(stderr.split("\n")).toHaveLength(1);
      expect(stderr).toStartWith(`vigil: invalid configuration: ${variable} `);
    });
  }

  test("an address that cannot be listened on stops the process with one line, after stopping postgres", async () => {
    const dir = join(testRoot, "unlistenable");
    // TEST-NET-3: a valid address, but not one of this machine's.
    const { code, stderr } = await runWith({ DATA_DIR: dir, HOST: "203.0.113.7", PORT: "0", OTLP_GRPC_PORT: "0" });
    expect(code).toBe(2);
    expect(stderr.split("\n")).toHaveLength(1);
    expect(stderr).toStartWith("vigil: cannot listen on HOST=203.0.113.7 PORT=0:");
    expect(existsSync(join(dir, "pg", "postmaster.pid"))).toBe(false);
    expect(existsSync(join(dir, "vigil.lock"))).toBe(false);
  });
});

describe("graceful shutdown", () => {
  /** Sends the headers and half the body of a project creation, the rest only when told. */
  async function slowCreateProject(url: string, apiKey: string, name: string) {
    const body = JSON.stringify({ name });
    const socket = connect(Number(new URL(url).port), "127.0.0.1");
    let response = "";
    socket.on("data", (chunk) => (response += chunk));
    const closed = new Promise((resolve) => socket.on("close", resolve));
    await new Promise((resolve) => socket.once("connect", resolve));
    socket.write(
      `POST /v1/projects HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${apiKey}\r\nContent-Type: application/json\r\n` +
        `Content-Length: ${body.length}\r\nConnection: close\r\n\r\n${body.slice(0, 5)}`,
    );
    return {
      async finish() {
        socket.write(body.slice(5));
        await closed;
        const [head = "", payload = ""] = response.split("\r\n\r\n");
        return { status: Number(head.split(" ")[1]), body: JSON.parse(payload) as { name: string } };
      },
    };
  }

  const bunRunStart = ["run", "start"];
  const signals: [string, string, (vigil: VigilProcess) => void, string[]?][] = [
    ["SIGTERM to Vigil", "sigterm", (vigil) => process.kill(vigil.child.pid!, "SIGTERM")],
    ["Ctrl-C (SIGINT to its whole process group)", "ctrl-c", (vigil) => killGroup(vigil.child, "SIGINT")],
    // What systemd's KillMode=control-group and `kill -TERM -PGID` do.
    ["With `bun run start`, SIGTERM to the whole process group", "start-group", (vigil) => killGroup(vigil.child, "SIGTERM"), bunRunStart],
    // What `docker stop` does: the top process alone.
    ["With `bun run start`, SIGTERM to the top process", "start-top", (vigil) => process.kill(vigil.child.pid!, "SIGTERM"), bunRunStart],
    ["With `bun run start`, Ctrl-C", "start-ctrl-c", (vigil) => killGroup(vigil.child, "SIGINT"), bunRunStart],
  ];
  for (const [signal, name, send, command] of signals) {
    test(`${signal} finishes the request in flight, then stops postgres and exits 0`, async () => {
      const dir = join(testRoot, `shutdown-${name}`);
      const vigil = await spawnVigil(dir, {}, 60_000, command);
      started.push(vigil);
      const { account } = await bootstrapAccount(vigil.url);
      const postgresPid = postmasterPid(dir);
      // Out of Vigil's process group, so a Ctrl-C in its terminal reaches Vigil alone.
      expect(processGroup(postgresPid)).not.toBe(processGroup(vigil.child.pid!));

      const request = await slowCreateProject(vigil.url, account.apiKey, "Created during shutdown");
      await Bun.sleep(300);
      send(vigil);
      await Bun.sleep(700);
      expect(isAlive(postgresPid)).toBe(true);
      const created = await request.finish();
      expect(created.status).toBe(201);
      expect(created.body.name).toBe("Created during shutdown");

      expect(await vigil.exited).toBe(0);
      expect(vigil.output()).toContain('"msg":"stopped"');
      expect(isAlive(postgresPid)).toBe(false);
      expect(existsSync(join(dir, "vigil.lock"))).toBe(false);
    });
  }

  test("a database that went away first does not hold up the shutdown", async () => {
    const dir = join(testRoot, "shutdown-without-db");
    const vigil = await spawnVigil(dir);
    started.push(vigil);
    const postgresPid = postmasterPid(dir);
    process.kill(postgresPid, "SIGINT");
    while (isAlive(postgresPid)) await Bun.sleep(20);
    process.kill(vigil.child.pid!, "SIGTERM");
    const code = await Promise.race([vigil.exited, Bun.sleep(15_000).then(() => "still running")]);
    expect(code).toBe(0);
    expect(vigil.output()).toContain('"msg":"stopped"');
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
