import type { SpanRow } from "./row";
import { SpanKeys } from "./span-keys";

/** How a column travels in RowBinary. LowCardinality(String) is sent as String; ClickHouse converts on insert. */
const wireTypes = [
  "String",
  "UInt16",
  "UInt32",
  "UInt64",
  "DateTime64(9, 'UTC')",
  "Bool",
  "Array(String)",
  "Map(String, String)",
  "Map(String, Int64)",
  "Map(String, Float64)",
  "Map(String, Bool)",
] as const;
type WireType = (typeof wireTypes)[number];
export type RowColumn = readonly [name: string, type: WireType];

/**
 * The columns of `spans` that Vigil writes, in the order the encoder emits them. The one place the insert's column
 * list, the file() structure and the encoder come from; checked against `DESCRIBE TABLE spans` when the writer starts.
 */
export const spanColumns = [
  ["organization_id", "String"],
  ["project_id", "String"],
  ["trace_id", "String"],
  ["span_id", "String"],
  ["parent_span_id", "String"],
  ["name", "String"],
  ["kind", "String"],
  ["status_code", "String"],
  ["status_message", "String"],
  ["trace_state", "String"],
  ["trace_flags", "UInt32"],
  ["scope_name", "String"],
  ["scope_version", "String"],
  ["service_name", "String"],
  ["start_time", "DateTime64(9, 'UTC')"],
  ["end_time", "DateTime64(9, 'UTC')"],
  ["duration_ns", "UInt64"],
  ["api_key_id", "String"],
  ["operation", "String"],
  ["provider", "String"],
  ["model", "String"],
  ["response_model", "String"],
  ["response_id", "String"],
  ["finish_reasons", "Array(String)"],
  ["error_type", "String"],
  ["session_id", "String"],
  ["user_id", "String"],
  ["simulation_id", "String"],
  ["tags", "Array(String)"],
  ["metadata", "Map(String, String)"],
  ["tokens_input", "UInt64"],
  ["tokens_output", "UInt64"],
  ["tokens_cache_read", "UInt64"],
  ["tokens_cache_create", "UInt64"],
  ["tokens_reasoning", "UInt64"],
  ["cost_input_microcents", "UInt64"],
  ["cost_output_microcents", "UInt64"],
  ["cost_total_microcents", "UInt64"],
  ["cost_is_estimated", "Bool"],
  ["time_to_first_token_ns", "UInt64"],
  ["is_streaming", "Bool"],
  ["is_usage_wrapper", "Bool"],
  ["tool_call_id", "String"],
  ["tool_name", "String"],
  ["tool_input", "String"],
  ["tool_output", "String"],
  ["defined_tools", "Array(String)"],
  ["tool_definitions", "String"],
  ["system_instructions", "String"],
  ["input_messages", "String"],
  ["output_messages", "String"],
  ["message_text", "String"],
  ["memory_store_id", "String"],
  ["memory_record_id", "String"],
  ["attr_string", "Map(String, String)"],
  ["attr_int", "Map(String, Int64)"],
  ["attr_float", "Map(String, Float64)"],
  ["attr_bool", "Map(String, Bool)"],
  ["resource_string", "Map(String, String)"],
  ["events_json", "String"],
  ["links_json", "String"],
  ["retention_days", "UInt16"],
] as const satisfies readonly (readonly [keyof SpanRow, WireType])[];

// Compile-time guard: a SpanRow field without a column here fails the typecheck.
type AssertNone<T extends never> = T;
type UnwrittenField = AssertNone<Exclude<keyof SpanRow, (typeof spanColumns)[number][0]>>;

export const spanColumnList = spanColumns.map(([name]) => name).join(", ");
/** The structure argument of `file(path, 'RowBinary', structure)`. */
export const spanStructure = spanColumns.map(([name, type]) => `${name} ${type}`).join(", ");

/** The columns of a structure string as `spanStructure` writes them; null when a type is not one this encoder knows. */
export function parseStructure(structure: string): RowColumn[] | null {
  const columns: RowColumn[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i <= structure.length; i++) {
    const char = structure[i];
    if (char === "(") depth++;
    else if (char === ")") depth--;
    else if ((char === "," && depth === 0) || i === structure.length) {
      const column = structure.slice(start, i).trim();
      const space = column.indexOf(" ");
      const type = column.slice(space + 1) as WireType;
      if (space < 1 || !wireTypes.includes(type)) return null;
      columns.push([column.slice(0, space), type]);
      start = i + 1;
    }
  }
  return columns;
}

const twoTo32 = 4294967296;

const varintSize = (value: number) => (value < 0x80 ? 1 : value < 0x4000 ? 2 : value < 0x200000 ? 3 : value < 0x10000000 ? 4 : 5);

/** A growable little-endian byte buffer. */
class ByteWriter {
  private buffer: Buffer;
  private view: DataView;
  length = 0;

  constructor(capacity: number) {
    this.buffer = Buffer.allocUnsafe(Math.max(capacity, 1024));
    this.view = new DataView(this.buffer.buffer, this.buffer.byteOffset, this.buffer.byteLength);
  }

  bytes(): Uint8Array {
    return this.buffer.subarray(0, this.length);
  }

  private reserve(count: number) {
    if (this.length + count <= this.buffer.length) return;
    const grown = Buffer.allocUnsafe(Math.max(this.buffer.length * 2, this.length + count));
    this.buffer.copy(grown, 0, 0, this.length);
    this.buffer = grown;
    this.view = new DataView(grown.buffer, grown.byteOffset, grown.byteLength);
  }

  private varintAt(offset: number, value: number) {
    while (value >= 0x80) {
      this.buffer[offset++] = (value & 0x7f) | 0x80;
      value >>>= 7;
    }
    this.buffer[offset] = value;
  }

  varint(value: number) {
    this.reserve(5);
    this.varintAt(this.length, value);
    this.length += varintSize(value);
  }

  /** Length-prefixed UTF-8. */
  string(value: string) {
    const units = value.length;
    // Reserve the prefix for the worst case (3 bytes per UTF-16 unit), encode once, then close the gap if the
    // actual byte length needs a shorter prefix.
    const prefix = varintSize(units * 3);
    this.reserve(prefix + units * 3);
    const start = this.length;
    let written: number;
    if (units < 64 && isShortAscii(value)) {
      for (let i = 0; i < units; i++) this.buffer[start + prefix + i] = value.charCodeAt(i);
      written = units;
    } else {
      written = this.buffer.write(value, start + prefix);
    }
    const needed = varintSize(written);
    if (needed < prefix) this.buffer.copyWithin(start + needed, start + prefix, start + prefix + written);
    this.varintAt(start, written);
    this.length = start + needed + written;
  }

  uint8(value: number) {
    this.reserve(1);
    this.buffer[this.length++] = value;
  }

  uint16(value: number) {
    this.reserve(2);
    this.view.setUint16(this.length, unsigned(value, 0xffff), true);
    this.length += 2;
  }

  uint32(value: number) {
    this.reserve(4);
    this.view.setUint32(this.length, unsigned(value, 0xffffffff), true);
    this.length += 4;
  }

  uint64(value: number) {
    const exact = unsigned(value, Number.MAX_SAFE_INTEGER);
    this.reserve(8);
    this.view.setUint32(this.length, exact % twoTo32, true);
    this.view.setUint32(this.length + 4, Math.floor(exact / twoTo32), true);
    this.length += 8;
  }

  int64(value: number) {
    const whole = Number.isFinite(value) ? Math.trunc(value) : 0;
    const high = Math.floor(whole / twoTo32);
    this.reserve(8);
    this.view.setUint32(this.length, whole - high * twoTo32, true);
    this.view.setInt32(this.length + 4, high, true);
    this.length += 8;
  }

  /** DateTime64(9) ticks from an epoch-nanoseconds decimal string, exact beyond 2^53. */
  int64Decimal(value: string) {
    this.reserve(8);
    this.view.setBigInt64(this.length, BigInt(value), true);
    this.length += 8;
  }

  float64(value: number) {
    this.reserve(8);
    this.view.setFloat64(this.length, value, true);
    this.length += 8;
  }
}

function isShortAscii(value: string) {
  for (let i = 0; i < value.length; i++) if (value.charCodeAt(i) > 0x7f) return false;
  return true;
}

/** Unsigned columns take whole, non-negative numbers; anything else is clamped rather than wrapped. */
function unsigned(value: number, max: number) {
  if (!(value > 0)) return 0;
  return value >= max ? max : Math.floor(value);
}

type FieldWriter = (out: ByteWriter, value: never) => void;

function writeStringArray(out: ByteWriter, values: readonly string[]) {
  out.varint(values.length);
  for (const value of values) out.string(value);
}

function mapWriter<V>(writeValue: (out: ByteWriter, value: V) => void) {
  return (out: ByteWriter, map: Record<string, V>) => {
    const keys = Object.keys(map);
    out.varint(keys.length);
    for (const key of keys) {
      out.string(key);
      writeValue(out, map[key]);
    }
  };
}

const writers: Record<WireType, FieldWriter> = {
  String: (out, value: string) => out.string(value),
  UInt16: (out, value: number) => out.uint16(value),
  UInt32: (out, value: number) => out.uint32(value),
  UInt64: (out, value: number) => out.uint64(value),
  "DateTime64(9, 'UTC')": (out, value: string) => out.int64Decimal(value),
  Bool: (out, value: boolean) => out.uint8(value ? 1 : 0),
  "Array(String)": writeStringArray,
  "Map(String, String)": mapWriter<string>((out, value) => out.string(value)),
  "Map(String, Int64)": mapWriter<number>((out, value) => out.int64(value)),
  "Map(String, Float64)": mapWriter<number>((out, value) => out.float64(value)),
  "Map(String, Bool)": mapWriter<boolean>((out, value) => out.uint8(value ? 1 : 0)),
};

const columnNames = spanColumns.map(([name]) => name);
const columnWriters = spanColumns.map(([, type]) => writers[type]);

/**
 * Encodes rows as RowBinary in `spanColumns` order. Numbers are written as-is except that unsigned columns clamp
 * negative, fractional or non-finite values; a time that is not a decimal integer string throws.
 */
export function encodeSpanRows(rows: readonly SpanRow[], sizeHint = rows.length * 4096): Uint8Array {
  const out = new ByteWriter(sizeHint);
  for (const row of rows) {
    const fields = row as unknown as Record<string, never>;
    for (let column = 0; column < columnWriters.length; column++) columnWriters[column](out, fields[columnNames[column]]);
  }
  return out.bytes();
}

const textDecoder = new TextDecoder();

/** Reads RowBinary of `spanColumns`, materializing only what is asked for; throws RangeError on data that cannot be a row. */
class RowScanner {
  offset = 0;
  constructor(private readonly data: Uint8Array) {}

  private need(count: number) {
    if (this.offset + count > this.data.length) throw new RangeError("truncated row");
  }

  varint(): number {
    let value = 0;
    for (let shift = 0; shift < 35; shift += 7) {
      this.need(1);
      const byte = this.data[this.offset++];
      value += (byte & 0x7f) * 2 ** shift;
      if (byte < 0x80) return value;
    }
    throw new RangeError("varint too long");
  }

  skip(count: number) {
    this.need(count);
    this.offset += count;
  }

  string() {
    this.skip(this.varint());
  }

  stringValue(): string {
    const length = this.varint();
    this.need(length);
    const value = textDecoder.decode(this.data.subarray(this.offset, this.offset + length));
    this.offset += length;
    return value;
  }

  int64Value(): bigint {
    this.need(8);
    const value = new DataView(this.data.buffer, this.data.byteOffset + this.offset, 8).getBigInt64(0, true);
    this.offset += 8;
    return value;
  }

  bool() {
    this.need(1);
    if (this.data[this.offset++] > 1) throw new RangeError("invalid Bool");
  }

  column(type: WireType) {
    switch (type) {
      case "String":
        return this.string();
      case "UInt16":
        return this.skip(2);
      case "UInt32":
        return this.skip(4);
      case "UInt64":
      case "DateTime64(9, 'UTC')":
        return this.skip(8);
      case "Bool":
        return this.bool();
      case "Array(String)":
        for (let count = this.varint(); count > 0; count--) this.string();
        return;
      default:
        for (let count = this.varint(); count > 0; count--) {
          this.string();
          if (type === "Map(String, String)") this.string();
          else if (type === "Map(String, Bool)") this.bool();
          else this.skip(8);
        }
    }
  }
}

const allZero = (data: Uint8Array, from: number) => {
  for (let i = from; i < data.length; i++) if (data[i] !== 0) return false;
  return true;
};

/**
 * The longest prefix of `data` made of whole rows of `columns`, with their keys, for recovering a WAL segment cut
 * short by a crash. A tail of zero bytes (a file extended without its data reaching disk) is not rows: it would read
 * as rows of empty keys, which no span has. Throws when the columns lack the span key.
 */
export function completeRows(data: Uint8Array, columns: readonly RowColumn[] = spanColumns): { rows: number; length: number; keys: SpanKeys } {
  const names = columns.map(([name]) => name);
  const at = (name: string) => {
    const index = names.indexOf(name);
    if (index < 0 || (name === "start_time" ? columns[index][1] !== "DateTime64(9, 'UTC')" : columns[index][1] !== "String")) {
      throw new Error(`row format has no ${name} column`);
    }
    return index;
  };
  const [organizationAt, projectAt, traceAt, startAt] = [at("organization_id"), at("project_id"), at("trace_id"), at("start_time")];
  const scanner = new RowScanner(data);
  const keys = new SpanKeys();
  let rows = 0;
  let length = 0;
  while (length < data.length && !allZero(data, length)) {
    const values: (string | bigint)[] = [];
    try {
      for (let column = 0; column < columns.length; column++) {
        if (column === organizationAt || column === projectAt || column === traceAt) values[column] = scanner.stringValue();
        else if (column === startAt) values[column] = scanner.int64Value();
        else scanner.column(columns[column][1]);
      }
    } catch (error) {
      if (error instanceof RangeError) break;
      throw error;
    }
    keys.add(values[organizationAt] as string, values[projectAt] as string, values[traceAt] as string, values[startAt]);
    rows++;
    length = scanner.offset;
  }
  return { rows, length, keys };
}
