const levels = { debug: 10, info: 20, warn: 30, error: 40, silent: 100 } as const;
export type LogLevel = keyof typeof levels;
export type Fields = Record<string, unknown>;

const secretKey = /authorization|password|secret|token|api[-_]?key|cookie/i;

/** Drops values whose key looks like a credential, so a careless field never reaches the log. */
function scrub(fields: Fields): Fields {
  const out: Fields = {};
  for (const [key, value] of Object.entries(fields)) {
    if (value instanceof Error) out[key] = { name: value.name, message: value.message };
    else out[key] = secretKey.test(key) ? "[redacted]" : value;
  }
  return out;
}

export interface Logger {
  debug(msg: string, fields?: Fields): void;
  info(msg: string, fields?: Fields): void;
  warn(msg: string, fields?: Fields): void;
  error(msg: string, fields?: Fields): void;
  child(fields: Fields): Logger;
}

/** Structured JSON lines on stdout. */
export function createLogger(level: LogLevel, base: Fields = {}): Logger {
  const threshold = levels[level];
  const write = (lvl: Exclude<LogLevel, "silent">, msg: string, fields?: Fields) => {
    if (levels[lvl] < threshold) return;
    const line = JSON.stringify({ time: new Date().toISOString(), level: lvl, msg, ...base, ...(fields ? scrub(fields) : {}) });
    process.stdout.write(line + "\n");
  };
  return {
    debug: (m, f) => write("debug", m, f),
    info: (m, f) => write("info", m, f),
    warn: (m, f) => write("warn", m, f),
    error: (m, f) => write("error", m, f),
    child: (fields) => createLogger(level, { ...base, ...scrub(fields) }),
  };
}
