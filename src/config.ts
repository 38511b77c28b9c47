import { accessSync, constants, mkdirSync } from "node:fs";
import { BlockList, isIP } from "node:net";
import { resolve } from "node:path";
import { providerEnv, type ProviderEnv } from "./gateway/providers";
import { addAddressRange } from "./lib/net";

export interface Config {
  port: number;
  host: string;
  dataDir: string;
  /** chdb data directory; one per process, shared by every store opened in it. */
  chdbPath: string;
  databaseUrl: string | null;
  clickhouse: {
    url: string | null;
    user: string;
    password: string;
    database: string;
    cluster: string | null;
  };
  /** Origin used in links; without PUBLIC_URL it follows the port actually bound. */
  publicUrl: string;
  publicUrlConfigured: boolean;
  smtpUrl: string | null;
  mailFrom: string;
  pseudonymSecret: string | null;
  otlpGrpcPort: number;
  logLevel: "debug" | "info" | "warn" | "error" | "silent";
  bootstrapRateLimitPerHour: number;
  /** Trace exports per organization per hour (EXPORT_RATE_LIMIT). */
  exportRateLimitPerHour: number;
  /** OAuth dynamic client registrations per client address per hour (OAUTH_REGISTRATION_RATE_LIMIT). */
  oauthRegistrationRateLimitPerHour: number;
  /** Console sign-in attempts per client address per 15 minutes (SIGN_IN_ADDRESS_RATE_LIMIT). */
  signInAddressRateLimit: number;
  /** Peers whose `X-Forwarded-For` names the client (TRUSTED_PROXIES); null trusts no one. */
  trustedProxies: BlockList | null;
  ingest: {
    maxBodyBytes: number;
    maxDecompressedBytes: number;
    bodyGraceMs: number;
    bodyMinBytesPerSecond: number;
    /** A span starting more than this after now is rejected (partial success). */
    maxFutureSkewMs: number;
    /** Longest attribute value stored; longer ones are truncated with a marker. */
    maxAttributeValueBytes: number;
    /** Attributes stored per span; the rest are dropped and counted. */
    maxAttributesPerSpan: number;
    queueBytes: number;
    maxConcurrentExports: number;
    flushRows: number;
    flushIntervalMs: number;
    /**
     * Test-only fault injection (VIGIL_TEST_CRASH_AT=`<window>:<n>`): the process dies in a window of its n-th segment
     * insert. `spans-part`: after the `spans` part commits and before the views' parts do. `log-removal`: after the
     * whole insert commits and before the write-ahead log segment is removed.
     */
    crashAt: CrashPoint | null;
  };
  embeddings: { baseUrl: string; apiKey: string | null; model: string } | null;
  /** Largest API request body (JSON or form), bytes; OTLP bodies have the ingest limits. */
  apiMaxBodyBytes: number;
  /** Limits of every ClickHouse read (READ_TIMEOUT_SECONDS, READ_MAX_MEMORY_BYTES, READ_CONCURRENCY_PER_ORGANIZATION). */
  reads: { timeoutSeconds: number; maxMemoryBytes: number; concurrencyPerOrganization: number | null };
  /** AI provider variables for the prompt gateway (see src/gateway/providers.ts). */
  providers: ProviderEnv;
  signals: {
    /** Seconds without new spans after which a trace counts as finished for flaggers and custom signals. */
    traceQuietSeconds: number;
    /** Provider (as a prompt names one: openai, anthropic or a custom name) and model of the signal judge and names. */
    judgeProvider: string;
    judgeModel: string;
  };
  monitors: {
    /** Seconds between two evaluations of a monitor (MONITOR_INTERVAL_SECONDS); 0 turns scheduled evaluation off. */
    intervalSeconds: number;
    /** First retry delay of a failed webhook delivery, doubled on each retry (WEBHOOK_RETRY_DELAY_SECONDS). */
    webhookRetryDelaySeconds: number;
    /** Delivery attempts before the webhook is quarantined (WEBHOOK_MAX_ATTEMPTS). */
    webhookMaxAttempts: number;
  };
}

export class ConfigError extends Error {}

type Env = Record<string, string | undefined>;

function intVar(env: Env, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === "") return fallback;
  if (!/^\d+$/.test(raw)) throw new ConfigError(`${name} must be an integer, got "${raw}"`);
  const value = Number(raw);
  if (value < min || value > max) throw new ConfigError(`${name} must be between ${min} and ${max}, got ${value}`);
  return value;
}

export interface CrashPoint {
  window: "spans-part" | "log-removal";
  /** The n-th segment insert of the process, from 1. */
  segment: number;
}

function crashPoint(raw: string | undefined): CrashPoint | null {
  if (!raw) return null;
  const match = /^(spans-part|log-removal):([1-9]\d{0,5})$/.exec(raw);
  if (!match) throw new ConfigError(`VIGIL_TEST_CRASH_AT must be spans-part:<n> or log-removal:<n>, got "${raw}"`);
  return { window: match[1] as CrashPoint["window"], segment: Number(match[2]) };
}

function urlVar(env: Env, name: string, protocols: string[]): string | null {
  const raw = env[name];
  if (raw === undefined || raw === "") return null;
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new ConfigError(`${name} must be a URL`);
  }
  if (!protocols.includes(url.protocol)) {
    throw new ConfigError(`${name} must use ${protocols.map((p) => p.replace(":", "")).join(" or ")}, got ${url.protocol.replace(":", "")}`);
  }
  return raw.replace(/\/+$/, "");
}

function enumVar<T extends string>(env: Env, name: string, values: readonly T[], fallback: T): T {
  const raw = env[name];
  if (raw === undefined || raw === "") return fallback;
  if (!values.includes(raw as T)) throw new ConfigError(`${name} must be one of ${values.join(", ")}, got "${raw}"`);
  return raw as T;
}

function identifierVar(env: Env, name: string, fallback: string | null): string | null {
  const raw = env[name];
  if (raw === undefined || raw === "") return fallback;
  if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(raw)) throw new ConfigError(`${name} must be a plain identifier, got "${raw}"`);
  return raw;
}

const hostLabel = /^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$/;

function hostVar(env: Env, name: string, fallback: string): string {
  const raw = env[name];
  if (raw === undefined || raw === "") return fallback;
  const isHostName = raw.length <= 253 && !/^[\d.]+$/.test(raw) && raw.split(".").every((label) => hostLabel.test(label));
  if (isIP(raw) === 0 && !isHostName) throw new ConfigError(`${name} must be an IP address or a host name, got "${raw}"`);
  return raw;
}

/** The directory a variable names, created when missing; it must be writable. */
function writableDirectory(name: string, value: string): string {
  const path = resolve(value);
  try {
    mkdirSync(path, { recursive: true });
    accessSync(path, constants.W_OK);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const reason =
      code === "EEXIST" || code === "ENOTDIR"
        ? "is not a directory"
        : code === "EACCES" || code === "EPERM" || code === "EROFS"
          ? "is not writable"
          : `cannot be created (${code})`;
    throw new ConfigError(`${name} must be a writable directory: ${path} ${reason}`);
  }
  return path;
}

function addressRangesVar(env: Env, name: string): BlockList | null {
  const raw = env[name];
  if (raw === undefined || raw.trim() === "") return null;
  const ranges = new BlockList();
  for (const entry of raw.split(",").map((part) => part.trim())) {
    if (!addAddressRange(ranges, entry)) throw new ConfigError(`${name} must be a comma-separated list of IP addresses or CIDR ranges, got "${entry}"`);
  }
  return ranges;
}

/** The AI provider variables, each `*_BASE_URL` checked to be an http(s) URL. */
function providersVar(env: Env): ProviderEnv {
  const providers = providerEnv(env);
  for (const name of Object.keys(providers)) if (name.endsWith("_BASE_URL")) providers[name] = urlVar(env, name, ["http:", "https:"])!;
  return providers;
}

/** Reads and validates the environment; throws ConfigError naming the first bad variable. */
export function loadConfig(env: Env = process.env): Config {
  const port = intVar(env, "PORT", 3000, 0, 65535);
  const host = hostVar(env, "HOST", "127.0.0.1");
  const dataDir = writableDirectory("DATA_DIR", env.DATA_DIR || "./data");
  const configuredPublicUrl = urlVar(env, "PUBLIC_URL", ["http:", "https:"]);
  const embeddingsUrl = urlVar(env, "EMBEDDINGS_BASE_URL", ["http:", "https:"]);
  return {
    port,
    host,
    dataDir,
    chdbPath: env.CHDB_PATH ? writableDirectory("CHDB_PATH", env.CHDB_PATH) : resolve(dataDir, "ch"),
    databaseUrl: urlVar(env, "DATABASE_URL", ["postgres:", "postgresql:"]),
    clickhouse: {
      url: urlVar(env, "CLICKHOUSE_URL", ["http:", "https:"]),
      user: env.CLICKHOUSE_USER || "default",
      password: env.CLICKHOUSE_PASSWORD || "",
      database: identifierVar(env, "CLICKHOUSE_DATABASE", "vigil")!,
      cluster: identifierVar(env, "CLICKHOUSE_CLUSTER", null),
    },
    publicUrl: configuredPublicUrl ?? `http://localhost:${port}`,
    publicUrlConfigured: configuredPublicUrl !== null,
    smtpUrl: urlVar(env, "SMTP_URL", ["smtp:", "smtps:"]),
    mailFrom: env.MAIL_FROM || "Vigil <vigil@localhost>",
    pseudonymSecret: env.PSEUDONYM_SECRET || null,
    otlpGrpcPort: intVar(env, "OTLP_GRPC_PORT", 4317, 0, 65535),
    logLevel: enumVar(env, "LOG_LEVEL", ["debug", "info", "warn", "error", "silent"] as const, "info"),
    bootstrapRateLimitPerHour: intVar(env, "BOOTSTRAP_RATE_LIMIT", 10, 1, 1_000_000),
    exportRateLimitPerHour: intVar(env, "EXPORT_RATE_LIMIT", 10, 1, 1_000_000),
    oauthRegistrationRateLimitPerHour: intVar(env, "OAUTH_REGISTRATION_RATE_LIMIT", 30, 1, 1_000_000),
    signInAddressRateLimit: intVar(env, "SIGN_IN_ADDRESS_RATE_LIMIT", 50, 1, 1_000_000),
    trustedProxies: addressRangesVar(env, "TRUSTED_PROXIES"),
    ingest: {
      maxBodyBytes: intVar(env, "INGEST_MAX_BODY_BYTES", 16 << 20, 1024, 1 << 30),
      maxDecompressedBytes: intVar(env, "INGEST_MAX_DECOMPRESSED_BYTES", 64 << 20, 1024, 1 << 30),
      bodyGraceMs: intVar(env, "INGEST_BODY_GRACE_MS", 10_000, 100, 600_000),
      bodyMinBytesPerSecond: intVar(env, "INGEST_BODY_MIN_BYTES_PER_SECOND", 16 << 10, 1, 1 << 30),
      maxFutureSkewMs: intVar(env, "INGEST_MAX_FUTURE_SECONDS", 86_400, 0, 365 * 86_400) * 1000,
      maxAttributeValueBytes: intVar(env, "INGEST_MAX_ATTRIBUTE_VALUE_BYTES", 1 << 20, 1024, 1 << 30),
      maxAttributesPerSpan: intVar(env, "INGEST_MAX_ATTRIBUTES_PER_SPAN", 1024, 16, 1_000_000),
      queueBytes: intVar(env, "INGEST_QUEUE_BYTES", 256 << 20, 1 << 20, 8 * 2 ** 30),
      maxConcurrentExports: intVar(env, "INGEST_MAX_CONCURRENT_EXPORTS", 32, 1, 100_000),
      flushRows: intVar(env, "INGEST_FLUSH_ROWS", 10_000, 1, 1_000_000),
      flushIntervalMs: intVar(env, "INGEST_FLUSH_MS", 200, 1, 60_000),
      crashAt: crashPoint(env.VIGIL_TEST_CRASH_AT),
    },
    embeddings: embeddingsUrl
      ? { baseUrl: embeddingsUrl, apiKey: env.EMBEDDINGS_API_KEY || null, model: env.EMBEDDINGS_MODEL || "text-embedding-3-small" }
      : null,
    apiMaxBodyBytes: intVar(env, "API_MAX_BODY_BYTES", 4 << 20, 64 << 10, 1 << 30),
    reads: {
      timeoutSeconds: intVar(env, "READ_TIMEOUT_SECONDS", 30, 1, 3600),
      maxMemoryBytes: intVar(env, "READ_MAX_MEMORY_BYTES", 2 ** 30, 64 << 20, 2 ** 40),
      concurrencyPerOrganization: env.READ_CONCURRENCY_PER_ORGANIZATION ? intVar(env, "READ_CONCURRENCY_PER_ORGANIZATION", 1, 1, 1000) : null,
    },
    providers: providersVar(env),
    signals: {
      traceQuietSeconds: intVar(env, "TRACE_QUIET_SECONDS", 90, 0, 86_400),
      judgeProvider: env.SIGNALS_JUDGE_PROVIDER || "openai",
      judgeModel: env.SIGNALS_JUDGE_MODEL || "gpt-4o-mini",
    },
    monitors: {
      intervalSeconds: intVar(env, "MONITOR_INTERVAL_SECONDS", 60, 0, 86_400),
      webhookRetryDelaySeconds: intVar(env, "WEBHOOK_RETRY_DELAY_SECONDS", 30, 1, 3600),
      webhookMaxAttempts: intVar(env, "WEBHOOK_MAX_ATTEMPTS", 6, 1, 50),
    },
  };
}
