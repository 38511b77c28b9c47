/**
 * decode: OTLP `ExportTraceServiceRequest` bodies (protobuf or JSON) to one normalized structure, with
 * ids as lowercase hex and nanosecond times as exact decimal strings. Invalid spans are listed in
 * `rejected` (for the OTLP partial-success answer); a body that is not a request throws DecodeError.
 */
import type { DecodedTraces } from "./decode-model";
import { decodeProtobufWire } from "./decode-wire";

export {
  DecodeError,
  type DecodedEvent,
  type DecodedLink,
  type DecodedResourceSpans,
  type DecodedScope,
  type DecodedScopeSpans,
  type DecodedSpan,
  type DecodedTraces,
  type RejectedSpan,
} from "./decode-model";
export { decodeJson } from "./decode-json";
export { decodeProtobufWithProtobufjs } from "./decode-protobufjs";

/** Decodes an OTLP/protobuf body with the hand-written wire decoder (tested equal to protobufjs). */
export function decodeProtobuf(bytes: Uint8Array): DecodedTraces {
  return decodeProtobufWire(bytes);
}
