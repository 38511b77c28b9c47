import { setOwn, type AttributeValue, type Attributes } from "./attributes";
import {
  bytesToBase64,
  bytesToHex,
  DecodedTracesBuilder,
  DecodeError,
  MAX_VALUE_DEPTH,
  SPAN_KINDS,
  STATUS_CODES,
  tooDeep,
  type DecodedEvent,
  type DecodedLink,
  type DecodedScope,
  type DecodedScopeSpans,
  type DecodedSpan,
  type DecodedTraces,
} from "./decode-model";

/*
 * A hand-written protobuf wire-format decoder for OTLP `ExportTraceServiceRequest`, building the
 * normalized structure directly instead of protobufjs message objects first: about twice as fast, and the
 * protobuf path is the hot one of ingest. Field numbers are those of proto/opentelemetry/proto/**; the
 * tests decode the same bodies with protobufjs over those files and require equal results.
 * Fields with an unexpected wire type are skipped like unknown fields.
 */

const VARINT = 0;
const FIXED64 = 1;
const LENGTH_DELIMITED = 2;
const START_GROUP = 3;
const END_GROUP = 4;
const FIXED32 = 5;

const TWO_POW_32 = 4294967296;
const SHORT_STRING_BYTES = 64;

class WireReader {
  pos = 0;
  /** Nesting of arrays and key-value lists in the attribute value being read. */
  valueDepth = 0;
  readonly end: number;
  readonly text: Buffer;
  readonly view: DataView;

  constructor(readonly bytes: Uint8Array) {
    this.end = bytes.length;
    this.text = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }

  truncated(): never {
    throw new DecodeError(`Body is not a valid OTLP protobuf ExportTraceServiceRequest: truncated at byte ${this.pos}`);
  }

  /** A varint of up to 32 significant bits (tags, lengths, enums), as an unsigned number. */
  uint32(): number {
    let value = 0;
    for (let shift = 0; shift < 35; shift += 7) {
      if (this.pos >= this.end) this.truncated();
      const byte = this.bytes[this.pos++];
      value += (byte & 0x7f) * 2 ** shift;
      if (byte < 0x80) return value >>> 0;
    }
    // Longer varints (negative enums are sign-extended to 10 bytes): keep the low 32 bits.
    this.skipVarintRest();
    return value >>> 0;
  }

  private skipVarintRest(): void {
    for (let i = 0; i < 5; i++) {
      if (this.pos >= this.end) this.truncated();
      if (this.bytes[this.pos++] < 0x80) return;
    }
    throw new DecodeError(`Body is not a valid OTLP protobuf ExportTraceServiceRequest: varint too long at byte ${this.pos}`);
  }

  /** A 64-bit varint as its low and high 32-bit halves. */
  int64(): number | string {
    let low = 0;
    let high = 0;
    for (let shift = 0; shift < 70; shift += 7) {
      if (this.pos >= this.end) this.truncated();
      const byte = this.bytes[this.pos++];
      if (shift < 28) low |= (byte & 0x7f) << shift;
      else if (shift === 28) {
        low |= (byte & 0x0f) << 28;
        high |= (byte & 0x7f) >> 4;
      } else high |= (byte & 0x7f) << (shift - 32);
      if (byte < 0x80) return signedInt64(low >>> 0, high >>> 0);
    }
    throw new DecodeError(`Body is not a valid OTLP protobuf ExportTraceServiceRequest: varint too long at byte ${this.pos}`);
  }

  uint32LittleEndian(): number {
    if (this.pos + 4 > this.end) this.truncated();
    const value = this.view.getUint32(this.pos, true);
    this.pos += 4;
    return value;
  }

  /** A fixed64 as an unsigned decimal string. */
  fixed64Decimal(): string {
    const low = this.uint32LittleEndian();
    const high = this.uint32LittleEndian();
    if (high < 0x200000) return String(high * TWO_POW_32 + low);
    return ((BigInt(high) << 32n) | BigInt(low)).toString();
  }

  double(): number {
    if (this.pos + 8 > this.end) this.truncated();
    const value = this.view.getFloat64(this.pos, true);
    this.pos += 8;
    return value;
  }

  /** Enters an embedded message: returns where it ends, the reader stays at its first field. */
  enter(): number {
    const length = this.uint32();
    const end = this.pos + length;
    if (end > this.end) this.truncated();
    return end;
  }

  /** Leaves an embedded message, which must end exactly at `end`. */
  leave(end: number): void {
    if (this.pos !== end) this.truncated();
  }

  /** Start of a length-delimited field's contents, moving past it. */
  delimited(): number {
    const length = this.uint32();
    const start = this.pos;
    if (start + length > this.end) this.truncated();
    this.pos = start + length;
    return start;
  }

  /**
   * Short strings (attribute keys, ids, enum-like values) are nearly always ASCII, and Latin-1 slicing is
   * several times cheaper than UTF-8 decoding for them; scanning long strings for ASCII costs more than it saves.
   */
  string(): string {
    const start = this.delimited();
    const end = this.pos;
    if (end - start <= SHORT_STRING_BYTES) {
      let ascii = true;
      for (let i = start; i < end; i++) {
        if (this.bytes[i] >= 0x80) {
          ascii = false;
          break;
        }
      }
      if (ascii) return this.text.toString("latin1", start, end);
    }
    return this.text.toString("utf8", start, end);
  }

  bytesView(): Uint8Array {
    const start = this.delimited();
    return this.bytes.subarray(start, this.pos);
  }

  hex(): string {
    return bytesToHex(this.bytesView());
  }

  /** Skips the field whose tag was just read. */
  skipField(tag: number): void {
    if (tag >>> 3 === 0) throw new DecodeError(`Body is not a valid OTLP protobuf ExportTraceServiceRequest: field number 0 at byte ${this.pos}`);
    this.skip(tag & 7, tag >>> 3);
  }

  private skip(wireType: number, fieldNumber: number): void {
    switch (wireType) {
      case VARINT:
        this.int64();
        return;
      case FIXED64:
        if (this.pos + 8 > this.end) this.truncated();
        this.pos += 8;
        return;
      case LENGTH_DELIMITED:
        this.delimited();
        return;
      case START_GROUP:
        for (;;) {
          const tag = this.uint32();
          if ((tag & 7) === END_GROUP) {
            if (tag >>> 3 !== fieldNumber) break;
            return;
          }
          this.skip(tag & 7, tag >>> 3);
        }
        break;
      case FIXED32:
        if (this.pos + 4 > this.end) this.truncated();
        this.pos += 4;
        return;
    }
    throw new DecodeError(`Body is not a valid OTLP protobuf ExportTraceServiceRequest: invalid wire type ${wireType} at byte ${this.pos}`);
  }
}

function signedInt64(low: number, high: number): number | string {
  if (high < 0x200000) return high * TWO_POW_32 + low;
  if (high > 0xffe00000 || (high === 0xffe00000 && low > 0)) return (high - TWO_POW_32) * TWO_POW_32 + low;
  return BigInt.asIntN(64, (BigInt(high) << 32n) | BigInt(low)).toString();
}

// Tags: field number << 3 | wire type.
const tag = (fieldNumber: number, wireType: number) => (fieldNumber << 3) | wireType;
const FIELD_1_LENGTH_DELIMITED = tag(1, LENGTH_DELIMITED);
const FIELD_2_LENGTH_DELIMITED = tag(2, LENGTH_DELIMITED);
const FIELD_3_LENGTH_DELIMITED = tag(3, LENGTH_DELIMITED);
const FIELD_4_LENGTH_DELIMITED = tag(4, LENGTH_DELIMITED);
const FIELD_5_LENGTH_DELIMITED = tag(5, LENGTH_DELIMITED);
const FIELD_6_LENGTH_DELIMITED = tag(6, LENGTH_DELIMITED);
const FIELD_7_LENGTH_DELIMITED = tag(7, LENGTH_DELIMITED);

// AnyValue: string_value 1, bool_value 2, int_value 3, double_value 4, array_value 5, kvlist_value 6, bytes_value 7.
function anyValue(reader: WireReader): AttributeValue {
  const end = reader.enter();
  let value: AttributeValue = null;
  while (reader.pos < end) {
    const fieldTag = reader.uint32();
    switch (fieldTag) {
      case FIELD_1_LENGTH_DELIMITED:
        value = reader.string();
        break;
      case tag(2, VARINT):
        value = reader.int64() !== 0;
        break;
      case tag(3, VARINT):
        value = reader.int64();
        break;
      case tag(4, FIXED64):
        value = reader.double();
        break;
      case FIELD_5_LENGTH_DELIMITED:
        if (++reader.valueDepth > MAX_VALUE_DEPTH) throw tooDeep();
        value = arrayValue(reader);
        reader.valueDepth--;
        break;
      case FIELD_6_LENGTH_DELIMITED:
        if (++reader.valueDepth > MAX_VALUE_DEPTH) throw tooDeep();
        value = keyValueList(reader);
        reader.valueDepth--;
        break;
      case FIELD_7_LENGTH_DELIMITED:
        value = bytesToBase64(reader.bytesView());
        break;
      default:
        reader.skipField(fieldTag);
    }
  }
  reader.leave(end);
  return value;
}

// ArrayValue: values 1.
function arrayValue(reader: WireReader): AttributeValue[] {
  const end = reader.enter();
  const values: AttributeValue[] = [];
  while (reader.pos < end) {
    const fieldTag = reader.uint32();
    if (fieldTag === FIELD_1_LENGTH_DELIMITED) values.push(anyValue(reader));
    else reader.skipField(fieldTag);
  }
  reader.leave(end);
  return values;
}

/** KeyValue: key 1, value 2. Hands the pair to `add` rather than allocating one per attribute. */
function keyValue(reader: WireReader, add: (key: string, value: AttributeValue) => void): void {
  const end = reader.enter();
  let key = "";
  let value: AttributeValue = null;
  while (reader.pos < end) {
    const fieldTag = reader.uint32();
    if (fieldTag === FIELD_1_LENGTH_DELIMITED) key = reader.string();
    else if (fieldTag === FIELD_2_LENGTH_DELIMITED) value = anyValue(reader);
    else reader.skipField(fieldTag);
  }
  reader.leave(end);
  add(key, value);
}

// KeyValueList: values 1.
function keyValueList(reader: WireReader): Record<string, AttributeValue> {
  const end = reader.enter();
  const object: Record<string, AttributeValue> = {};
  const add = (key: string, value: AttributeValue) => setOwn(object, key, value);
  while (reader.pos < end) {
    const fieldTag = reader.uint32();
    if (fieldTag === FIELD_1_LENGTH_DELIMITED) keyValue(reader, add);
    else reader.skipField(fieldTag);
  }
  reader.leave(end);
  return object;
}

const attributeAdder = (attributes: Attributes) => (key: string, value: AttributeValue) => void attributes.set(key, value);

// Resource: attributes 1.
function resource(reader: WireReader): Attributes {
  const end = reader.enter();
  const attributes: Attributes = new Map();
  const add = attributeAdder(attributes);
  while (reader.pos < end) {
    const fieldTag = reader.uint32();
    if (fieldTag === FIELD_1_LENGTH_DELIMITED) keyValue(reader, add);
    else reader.skipField(fieldTag);
  }
  reader.leave(end);
  return attributes;
}

// Span.Event: time_unix_nano 1, name 2, attributes 3.
function event(reader: WireReader): DecodedEvent {
  const end = reader.enter();
  const decoded: DecodedEvent = { timeUnixNano: "0", name: "", attributes: new Map() };
  const add = attributeAdder(decoded.attributes);
  while (reader.pos < end) {
    const fieldTag = reader.uint32();
    if (fieldTag === tag(1, FIXED64)) decoded.timeUnixNano = reader.fixed64Decimal();
    else if (fieldTag === FIELD_2_LENGTH_DELIMITED) decoded.name = reader.string();
    else if (fieldTag === FIELD_3_LENGTH_DELIMITED) keyValue(reader, add);
    else reader.skipField(fieldTag);
  }
  reader.leave(end);
  return decoded;
}

// Span.Link: trace_id 1, span_id 2, trace_state 3, attributes 4, flags 6.
function link(reader: WireReader): DecodedLink {
  const end = reader.enter();
  const decoded: DecodedLink = { traceId: "", spanId: "", traceState: "", flags: 0, attributes: new Map() };
  const add = attributeAdder(decoded.attributes);
  while (reader.pos < end) {
    const fieldTag = reader.uint32();
    if (fieldTag === FIELD_1_LENGTH_DELIMITED) decoded.traceId = reader.hex();
    else if (fieldTag === FIELD_2_LENGTH_DELIMITED) decoded.spanId = reader.hex();
    else if (fieldTag === FIELD_3_LENGTH_DELIMITED) decoded.traceState = reader.string();
    else if (fieldTag === FIELD_4_LENGTH_DELIMITED) keyValue(reader, add);
    else if (fieldTag === tag(6, FIXED32)) decoded.flags = reader.uint32LittleEndian();
    else reader.skipField(fieldTag);
  }
  reader.leave(end);
  return decoded;
}

// Status: message 2, code 3. A repeated Status replaces the earlier one, as in protobufjs.
function status(reader: WireReader, span: DecodedSpan): void {
  const end = reader.enter();
  span.statusCode = "unset";
  span.statusMessage = "";
  while (reader.pos < end) {
    const fieldTag = reader.uint32();
    if (fieldTag === FIELD_2_LENGTH_DELIMITED) span.statusMessage = reader.string();
    else if (fieldTag === tag(3, VARINT)) span.statusCode = STATUS_CODES[reader.uint32()] ?? "unset";
    else reader.skipField(fieldTag);
  }
  reader.leave(end);
}

// Span: trace_id 1, span_id 2, trace_state 3, parent_span_id 4, name 5, kind 6, start 7, end 8,
// attributes 9, events 11, links 13, status 15, flags 16.
function span(reader: WireReader): DecodedSpan {
  const end = reader.enter();
  const decoded: DecodedSpan = {
    traceId: "",
    spanId: "",
    parentSpanId: "",
    traceState: "",
    flags: 0,
    name: "",
    kind: "unspecified",
    startTimeUnixNano: "0",
    endTimeUnixNano: "0",
    attributes: new Map(),
    events: [],
    links: [],
    statusCode: "unset",
    statusMessage: "",
  };
  const add = attributeAdder(decoded.attributes);
  while (reader.pos < end) {
    const fieldTag = reader.uint32();
    switch (fieldTag) {
      case tag(9, LENGTH_DELIMITED):
        keyValue(reader, add);
        break;
      case FIELD_1_LENGTH_DELIMITED:
        decoded.traceId = reader.hex();
        break;
      case FIELD_2_LENGTH_DELIMITED:
        decoded.spanId = reader.hex();
        break;
      case FIELD_3_LENGTH_DELIMITED:
        decoded.traceState = reader.string();
        break;
      case FIELD_4_LENGTH_DELIMITED:
        decoded.parentSpanId = reader.hex();
        break;
      case FIELD_5_LENGTH_DELIMITED:
        decoded.name = reader.string();
        break;
      case tag(6, VARINT):
        decoded.kind = SPAN_KINDS[reader.uint32()] ?? "unspecified";
        break;
      case tag(7, FIXED64):
        decoded.startTimeUnixNano = reader.fixed64Decimal();
        break;
      case tag(8, FIXED64):
        decoded.endTimeUnixNano = reader.fixed64Decimal();
        break;
      case tag(11, LENGTH_DELIMITED):
        decoded.events.push(event(reader));
        break;
      case tag(13, LENGTH_DELIMITED):
        decoded.links.push(link(reader));
        break;
      case tag(15, LENGTH_DELIMITED):
        status(reader, decoded);
        break;
      case tag(16, FIXED32):
        decoded.flags = reader.uint32LittleEndian();
        break;
      default:
        reader.skipField(fieldTag);
    }
  }
  reader.leave(end);
  return decoded;
}

// InstrumentationScope: name 1, version 2. A repeated scope replaces the earlier one.
function scope(reader: WireReader): DecodedScope {
  const end = reader.enter();
  const decoded: DecodedScope = { name: "", version: "" };
  while (reader.pos < end) {
    const fieldTag = reader.uint32();
    if (fieldTag === FIELD_1_LENGTH_DELIMITED) decoded.name = reader.string();
    else if (fieldTag === FIELD_2_LENGTH_DELIMITED) decoded.version = reader.string();
    else reader.skipField(fieldTag);
  }
  reader.leave(end);
  return decoded;
}

// ScopeSpans: scope 1, spans 2. The scope may follow the spans on the wire.
function scopeSpans(reader: WireReader): { scopeSpans: DecodedScopeSpans; spans: DecodedSpan[] } {
  const end = reader.enter();
  const decoded: DecodedScopeSpans = { scope: { name: "", version: "" }, spans: [] };
  const spans: DecodedSpan[] = [];
  while (reader.pos < end) {
    const fieldTag = reader.uint32();
    if (fieldTag === FIELD_2_LENGTH_DELIMITED) spans.push(span(reader));
    else if (fieldTag === FIELD_1_LENGTH_DELIMITED) decoded.scope = scope(reader);
    else reader.skipField(fieldTag);
  }
  reader.leave(end);
  return { scopeSpans: decoded, spans };
}

// ResourceSpans: resource 1, scope_spans 2. Spans are filed once the whole message is read.
function resourceSpans(reader: WireReader, builder: DecodedTracesBuilder): void {
  const end = reader.enter();
  let resourceAttributes: Attributes = new Map();
  const scopes: { scopeSpans: DecodedScopeSpans; spans: DecodedSpan[] }[] = [];
  while (reader.pos < end) {
    const fieldTag = reader.uint32();
    if (fieldTag === FIELD_2_LENGTH_DELIMITED) scopes.push(scopeSpans(reader));
    else if (fieldTag === FIELD_1_LENGTH_DELIMITED) resourceAttributes = resource(reader);
    else reader.skipField(fieldTag);
  }
  reader.leave(end);
  const decoded = builder.resource(resourceAttributes);
  for (const scoped of scopes) {
    decoded.scopeSpans.push(scoped.scopeSpans);
    for (const spanDecoded of scoped.spans) builder.add(scoped.scopeSpans, spanDecoded);
  }
}

/** Decodes an OTLP/protobuf `ExportTraceServiceRequest` (resource_spans 1). Throws DecodeError when the body is not one. */
export function decodeProtobufWire(bytes: Uint8Array): DecodedTraces {
  const reader = new WireReader(bytes);
  const builder = new DecodedTracesBuilder();
  while (reader.pos < reader.end) {
    const fieldTag = reader.uint32();
    if (fieldTag === FIELD_1_LENGTH_DELIMITED) resourceSpans(reader, builder);
    else reader.skipField(fieldTag);
  }
  return builder.traces;
}
