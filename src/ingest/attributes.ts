/**
 * An OTLP AnyValue as a plain JSON value. Ints outside ±2^53 are decimal strings (exact, never rounded);
 * bytes are base64 strings; an empty AnyValue is null.
 */
export type AttributeValue = string | number | boolean | null | AttributeValue[] | { [key: string]: AttributeValue };

export type Attributes = Map<string, AttributeValue>;

/** The value as display text: strings as they are, structured values as JSON, nothing as "". */
export function attributeText(value: AttributeValue | undefined): string {
  if (value === null || value === undefined) return "";
  if (typeof value === "string") return value;
  if (typeof value === "object") return JSON.stringify(value);
  return String(value);
}

/** A finite number from a number or a numeric string. */
export function attributeNumber(value: AttributeValue | undefined): number | undefined {
  if (typeof value === "number") return Number.isFinite(value) ? value : undefined;
  if (typeof value === "string" && value.trim() !== "") {
    const parsed = Number(value);
    return Number.isFinite(parsed) ? parsed : undefined;
  }
  return undefined;
}

export function attributeBoolean(value: AttributeValue | undefined): boolean | undefined {
  if (typeof value === "boolean") return value;
  if (value === "true") return true;
  if (value === "false") return false;
  return undefined;
}

/** Instrumentations send structured content either as AnyValue structures or as JSON strings. */
export function parseJsonValue(value: AttributeValue | undefined): unknown {
  if (typeof value !== "string") return value;
  const first = value.trimStart()[0];
  if (first !== "[" && first !== "{" && first !== '"') return value;
  try {
    return JSON.parse(value);
  } catch {
    return value;
  }
}

export const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value);

/** Sets an own property even for the key "__proto__", which plain assignment would turn into a prototype. */
export function setOwn<T>(object: Record<string, T>, key: string, value: T): void {
  if (key === "__proto__") Object.defineProperty(object, key, { value, enumerable: true, writable: true, configurable: true });
  else object[key] = value;
}

export function attributesToObject(attributes: Attributes): Record<string, AttributeValue> {
  const object: Record<string, AttributeValue> = {};
  for (const [key, value] of attributes) setOwn(object, key, value);
  return object;
}

/**
 * Reads a span's attributes by the resolution lists of INGEST.md ("the first attribute that yields a value
 * wins"). The typed maps keep every attribute as sent but those read by `readContent`, whose content a column of
 * its own stores whole: keeping them twice would double the storage.
 */
export class AttributeReader {
  /** Keys whose content a content column stores (messages, system instructions, tool definitions, tool arguments and results). */
  readonly content = new Set<string>();
  private readingContent = false;

  constructor(readonly values: Attributes) {}

  /** First non-empty value among `keys`, marking its key consumed. */
  first(keys: readonly string[]): AttributeValue | undefined {
    for (const key of keys) {
      const value = this.values.get(key);
      if (value === undefined || value === null || value === "") continue;
      if (Array.isArray(value) && value.length === 0) continue;
      this.mark(key);
      return value;
    }
    return undefined;
  }

  text(keys: readonly string[]): string {
    return attributeText(this.first(keys));
  }

  /** First key whose value is a number (or numeric string): a non-numeric value does not stop the search. */
  number(keys: readonly string[]): number | undefined {
    return this.numberEntry(keys)?.value;
  }

  numberEntry(keys: readonly string[]): { key: string; value: number } | undefined {
    for (const key of keys) {
      const value = attributeNumber(this.values.get(key));
      if (value === undefined) continue;
      this.mark(key);
      return { key, value };
    }
    return undefined;
  }

  has(key: string): boolean {
    return this.values.has(key);
  }

  /** Keys under `prefix`. */
  keysWithPrefix(prefix: string): string[] {
    const keys: string[] = [];
    for (const key of this.values.keys()) if (key.length > prefix.length && key.startsWith(prefix)) keys.push(key);
    return keys;
  }

  /**
   * Flattened keys under `prefix` (`llm.input_messages.0.message.role`, …) as one nested object
   * (`{"0": {message: {role}}}`), the keys consumed; undefined when there are none.
   */
  unflatten(prefix: string): Record<string, unknown> | undefined {
    let root: Record<string, unknown> | undefined;
    entries: for (const key of this.keysWithPrefix(prefix)) {
      const value = this.values.get(key);
      if (value === null || value === undefined) continue;
      root ??= Object.create(null) as Record<string, unknown>;
      const segments = key.slice(prefix.length).split(".");
      let node = root;
      for (let i = 0; i < segments.length - 1; i++) {
        const child = node[segments[i]];
        if (child === undefined) node = node[segments[i]] = Object.create(null) as Record<string, unknown>;
        else if (isRecord(child)) node = child;
        else continue entries;
      }
      node[segments[segments.length - 1]] ??= value;
      this.mark(key);
    }
    return root;
  }

  /** Every entry under `prefix`, keyed by the rest of its key, consumed. */
  prefixed(prefix: string): [string, AttributeValue][] {
    return this.keysWithPrefix(prefix).map((key) => {
      this.mark(key);
      return [key.slice(prefix.length), this.values.get(key) ?? null];
    });
  }

  boolean(key: string): boolean | undefined {
    const value = attributeBoolean(this.values.get(key));
    if (value !== undefined) this.mark(key);
    return value;
  }

  get(key: string): AttributeValue | undefined {
    return this.values.get(key);
  }

  consume(key: string): void {
    this.mark(key);
  }

  /** Runs `read`, which fills a content column: the keys it consumes are left out of the typed maps. */
  readContent<T>(read: () => T): T {
    this.readingContent = true;
    try {
      return read();
    } finally {
      this.readingContent = false;
    }
  }

  private mark(key: string) {
    if (this.readingContent) this.content.add(key);
  }
}

export interface TypedAttributes {
  attr_string: Record<string, string>;
  attr_int: Record<string, number>;
  attr_float: Record<string, number>;
  attr_bool: Record<string, boolean>;
}

/**
 * Spreads attributes over the typed maps. Integral numbers go to attr_int: OTLP's int/double distinction
 * is not kept through decoding (the JavaScript SDK itself encodes every integral number as an int).
 */
export function typedAttributes(attributes: Attributes, skip: ReadonlySet<string>): TypedAttributes {
  const typed: TypedAttributes = { attr_string: {}, attr_int: {}, attr_float: {}, attr_bool: {} };
  for (const [key, value] of attributes) {
    if (value === null || skip.has(key)) continue;
    if (typeof value === "string") setOwn(typed.attr_string, key, value);
    else if (typeof value === "boolean") setOwn(typed.attr_bool, key, value);
    else if (typeof value === "number") {
      if (Number.isSafeInteger(value)) setOwn(typed.attr_int, key, value);
      else if (Number.isFinite(value)) setOwn(typed.attr_float, key, value);
      else setOwn(typed.attr_string, key, String(value));
    } else setOwn(typed.attr_string, key, JSON.stringify(value));
  }
  return typed;
}

export function stringAttributes(attributes: Attributes): Record<string, string> {
  const strings: Record<string, string> = {};
  for (const [key, value] of attributes) if (value !== null) setOwn(strings, key, attributeText(value));
  return strings;
}
