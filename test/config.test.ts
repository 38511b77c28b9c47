import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { chmodSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ConfigError, loadConfig } from "../src/config";
import { clientAddress } from "../src/lib/net";
import { testRoot } from "./helpers";

setDefaultTimeout(60_000);

const dataDir = join(testRoot, "config");
mkdirSync(dataDir, { recursive: true });
const aFile = join(dataDir, "a-file");
writeFileSync(aFile, "");

function configError(env: Record<string, string>): string {
  try {
    loadConfig({ DATA_DIR: dataDir, ...env });
  } catch (error) {
    if (error instanceof ConfigError) return error.message;
    throw error;
  }
  throw new Error(`expected ${JSON.stringify(env)} to be refused`);
}

describe("configuration validation", () => {
  const bad: [Record<string, string>, string][] = [
    [{ PORT: "eighty" }, "PORT"],
    [{ PORT: "70000" }, "PORT"],
    [{ PUBLIC_URL: "not a url" }, "PUBLIC_URL"],
    [{ PUBLIC_URL: "ftp://vigil.example" }, "PUBLIC_URL"],
    [{ DATABASE_URL: "http://db.example/vigil" }, "DATABASE_URL"],
    [{ CLICKHOUSE_URL: "clickhouse.example:8123" }, "CLICKHOUSE_URL"],
    [{ SMTP_URL: "mail.example" }, "SMTP_URL"],
    [{ LOG_LEVEL: "verbose" }, "LOG_LEVEL"],
    [{ CLICKHOUSE_CLUSTER: "my-cluster" }, "CLICKHOUSE_CLUSTER"],
    [{ CLICKHOUSE_CLUSTER: "c; DROP TABLE spans" }, "CLICKHOUSE_CLUSTER"],
    [{ CLICKHOUSE_DATABASE: "vigil.prod" }, "CLICKHOUSE_DATABASE"],
    [{ HOST: "not a host" }, "HOST"],
    [{ HOST: "999.1.1.1" }, "HOST"],
    [{ HOST: "http://0.0.0.0" }, "HOST"],
    [{ VIGIL_TEST_CRASH_AT: "spans-part" }, "VIGIL_TEST_CRASH_AT"],
    [{ VIGIL_TEST_CRASH_AT: "after-everything:2" }, "VIGIL_TEST_CRASH_AT"],
    [{ VIGIL_TEST_CRASH_AT: "log-removal:0" }, "VIGIL_TEST_CRASH_AT"],
    [{ HOST: "-vigil.example" }, "HOST"],
    [{ DATA_DIR: aFile }, "DATA_DIR"],
    [{ DATA_DIR: join(aFile, "below") }, "DATA_DIR"],
    [{ CHDB_PATH: aFile }, "CHDB_PATH"],
    [{ TRUSTED_PROXIES: "load-balancer" }, "TRUSTED_PROXIES"],
    [{ TRUSTED_PROXIES: "10.0.0.0/33" }, "TRUSTED_PROXIES"],
    [{ TRUSTED_PROXIES: "10.0.0.1, fd00::/129" }, "TRUSTED_PROXIES"],
    [{ TRUSTED_PROXIES: "10.0.0.0/8," }, "TRUSTED_PROXIES"],
  ];
  for (const [env, variable] of bad) {
    test(`${JSON.stringify(env)} is refused naming ${variable}`, () => {
      const message = configError(env);
      expect(message).toStartWith(`${variable} `);
      expect(message).not.toContain("\n");
    });
  }

  // Root may write anywhere.
  test.skipIf(process.getuid?.() === 0)("a directory that cannot be written is refused", () => {
    const readOnly = join(dataDir, "read-only");
    mkdirSync(readOnly, { recursive: true });
    chmodSync(readOnly, 0o500);
    expect(configError({ DATA_DIR: readOnly })).toBe(`DATA_DIR must be a writable directory: ${readOnly} is not writable`);
  });

  test("good values are accepted", () => {
    for (const host of ["0.0.0.0", "::", "::1", "localhost", "vigil.internal", "10.1.2.3"]) expect(loadConfig({ DATA_DIR: dataDir, HOST: host }).host).toBe(host);
    const fresh = join(dataDir, "created", "on", "start");
    expect(loadConfig({ DATA_DIR: fresh }).dataDir).toBe(fresh);
    const config = loadConfig({ DATA_DIR: dataDir, TRUSTED_PROXIES: " 10.0.0.0/8, 192.0.2.1 ,fd00::/8" });
    expect(config.trustedProxies?.check("10.9.9.9", "ipv4")).toBe(true);
    expect(config.trustedProxies?.check("192.0.2.1", "ipv4")).toBe(true);
    expect(config.trustedProxies?.check("fd00::1", "ipv6")).toBe(true);
    expect(config.trustedProxies?.check("192.0.2.2", "ipv4")).toBe(false);
    expect(loadConfig({ DATA_DIR: dataDir }).trustedProxies).toBeNull();
  });
});

describe("client address behind proxies", () => {
  const proxies = loadConfig({ DATA_DIR: dataDir, TRUSTED_PROXIES: "10.0.0.0/8, 2001:db8::/32" }).trustedProxies;

  test("without trusted proxies the peer is the client, whatever the header says", () => {
    expect(clientAddress("10.0.0.5", "203.0.113.1", null)).toBe("10.0.0.5");
    expect(clientAddress("198.51.100.7", "203.0.113.1", proxies)).toBe("198.51.100.7");
    expect(clientAddress(null, "203.0.113.1", proxies)).toBeNull();
  });

  test("from a trusted peer, the rightmost hop that is not a trusted proxy", () => {
    expect(clientAddress("10.0.0.5", "203.0.113.1", proxies)).toBe("203.0.113.1");
    expect(clientAddress("::ffff:10.0.0.5", "203.0.113.1", proxies)).toBe("203.0.113.1");
    expect(clientAddress("10.0.0.5", "198.51.100.66, 203.0.113.1, 10.0.0.9", proxies)).toBe("203.0.113.1");
    expect(clientAddress("2001:db8::1", "[2001:db8:ffff::2]:443, 203.0.113.1:5555", proxies)).toBe("203.0.113.1");
    expect(clientAddress("10.0.0.5", "2001:db9::7, 2001:db8::8", proxies)).toBe("2001:db9::7");
  });

  test("from a trusted peer without a usable header, the peer or the last proxy named", () => {
    expect(clientAddress("10.0.0.5", null, proxies)).toBe("10.0.0.5");
    expect(clientAddress("10.0.0.5", "", proxies)).toBe("10.0.0.5");
    expect(clientAddress("10.0.0.5", "10.0.0.7, 10.0.0.8", proxies)).toBe("10.0.0.7");
    expect(clientAddress("10.0.0.5", "203.0.113.1, unknown", proxies)).toBe("10.0.0.5");
    expect(clientAddress("10.0.0.5", "unknown, 10.0.0.8", proxies)).toBe("10.0.0.8");
  });
});
