// Vigil as an operator runs it (`bun run src/index.ts`, JSON logs on stdout): request ids, what the
// logs must never hold, and what a failure shows the caller.
import { WebClient } from "./web-client";
import { afterAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { rmSync } from "node:fs";
import { join } from "node:path";
import { bootstrapAccount, testRoot } from "./helpers";
import { isAlive, killWithPostgres, postmasterPid, spawnVigil, type VigilProcess } from "./process";

setDefaultTimeout(60_000);

const dataDir = join(testRoot, "operations");
let vigil: VigilProcess;

afterAll(() => {
  if (vigil) killWithPostgres(vigil);
  rmSync(dataDir, { recursive: true, force: true });
});

type LogLine = { time: string; level: string; msg: string; requestId?: string; path?: string; status?: number; [key: string]: unknown };

describe("logs and failures of a running Vigil", () => {
  test("every request is logged with its request id, no credential ever is, and a 500 shows no internals", async () => {
    vigil = await spawnVigil(dataDir);
    const secrets: string[] = [];
    const { account, client } = await bootstrapAccount(vigil.url, { userEmail: "ops@example.com" });
    const claimToken = account.claimUrl.split("/claim/")[1]!;
    const created = await client.apiKeys.create({ name: "second" });
    secrets.push(account.apiKey, claimToken, created.token);

    const chosenId = await fetch(`${vigil.url}/v1/account`, { headers: { authorization: `Bearer ${account.apiKey}`, "x-request-id": "ops-test-0001" } });
    expect(chosenId.status).toBe(200);
    expect(chosenId.headers.get("x-request-id")).toBe("ops-test-0001");
    const generated = await fetch(`${vigil.url}/v1/projects`, { headers: { authorization: `Bearer ${created.token}` } });
    expect(generated.status).toBe(200);
    const generatedId = generated.headers.get("x-request-id");
    expect(generatedId).toMatch(/^[0-9a-f-]{36}$/);

    const claimUrl = `${vigil.url}/claim/${claimToken}`;
    const web = new WebClient(vigil.url);
    expect((await web.get(claimUrl)).status).toBe(200);
    const password = "ops password 123";
    secrets.push(password, web.csrf);
    expect((await web.post(claimUrl, { email: "ops@example.com", password })).status).toBe(303);
    secrets.push(web.cookies.get("vigil_session")!);
    const wrongKey = "vgl_wrong0but0secret0looking0credential000000";
    secrets.push(wrongKey);
    expect((await fetch(`${vigil.url}/v1/account`, { headers: { authorization: `Bearer ${wrongKey}` } })).status).toBe(401);

    // The database goes away: the next credential lookup fails inside Vigil.
    const postgresPid = postmasterPid(dataDir);
    process.kill(-postgresPid, "SIGKILL");
    while (isAlive(postgresPid)) await Bun.sleep(20);
    const uncachedKey = "vgl_never0seen0before0so0it0is0looked0up00000";
    secrets.push(uncachedKey);
    const failed = await fetch(`${vigil.url}/v1/account`, { headers: { authorization: `Bearer ${uncachedKey}` } });
    expect(failed.status).toBe(500);
    const failedText = await failed.text();
    expect(JSON.parse(failedText)).toEqual({ error: "Internal server error" });
    expect(failedText).not.toMatch(/ECONNREFUSED|\bat\b|\.ts|node_modules|postgres/i);
    const failedId = failed.headers.get("x-request-id");
    expect(failedId).toBeString();

    process.kill(vigil.child.pid!, "SIGTERM");
    expect(await vigil.exited).toBe(0);

    const output = vigil.output();
    const lines = output.trim().split("\n");
    const logs = lines.map((line) => JSON.parse(line) as LogLine);
    for (const log of logs) {
      expect(Date.parse(log.time)).not.toBeNaN();
      expect(["debug", "info", "warn", "error"]).toContain(log.level);
      expect(log.msg).toBeString();
    }
    const requests = logs.filter((log) => log.msg === "request");
    expect(requests.length).toBeGreaterThanOrEqual(8);
    for (const request of requests) {
      expect(request.requestId).toBeString();
      expect(request.path).toStartWith("/");
    }
    expect(requests.find((log) => log.requestId === "ops-test-0001")).toMatchObject({ method: "GET", path: "/v1/account", status: 200 });
    expect(requests.find((log) => log.requestId === generatedId)).toMatchObject({ path: "/v1/projects", status: 200 });
    expect(requests.filter((log) => log.path === "/claim/:token").map((log) => log.method)).toEqual(["GET", "POST"]);
    expect(requests.find((log) => log.requestId === failedId)).toMatchObject({ path: "/v1/account", status: 500 });
    const unhandled = logs.find((log) => log.msg === "unhandled error");
    expect(unhandled?.requestId).toBe(failedId!);
    expect(JSON.stringify(unhandled)).not.toContain("    at ");

    for (const secret of secrets) expect(output).not.toContain(secret);
    expect(output).not.toMatch(/bearer/i);
  });
});
