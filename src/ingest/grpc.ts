import {
  Server,
  ServerCredentials,
  ServerInterceptingCall,
  status,
  type Metadata,
  type ServerInterceptor,
  type ServiceDefinition,
  type ServerUnaryCall,
  type sendUnaryData,
} from "@grpc/grpc-js";
import { HttpError } from "../lib/errors";
import type { Logger } from "../lib/log";
import type { OtlpSignal } from "./pipeline";

/** What the gRPC receiver needs from the pipeline: run one export of a signal, answer its encoded response. */
export type GrpcExport = (body: Uint8Array, headers: { authorization: string | null; project: string | null }, signal: OtlpSignal) => Promise<Uint8Array>;

const identity = (value: Buffer | Uint8Array) => Buffer.from(value.buffer, value.byteOffset, value.byteLength);

// Bodies stay raw bytes: the pipeline decodes them with the same code as the HTTP receiver.
const exportService = (path: string): ServiceDefinition => ({
  Export: {
    path,
    requestStream: false,
    responseStream: false,
    requestSerialize: identity,
    requestDeserialize: identity,
    responseSerialize: identity,
    responseDeserialize: identity,
  },
});

const SERVICES: Record<OtlpSignal, ServiceDefinition> = {
  traces: exportService("/opentelemetry.proto.collector.trace.v1.TraceService/Export"),
  logs: exportService("/opentelemetry.proto.collector.logs.v1.LogsService/Export"),
};

function grpcStatus(httpStatus: number): status {
  if (httpStatus === 401) return status.UNAUTHENTICATED;
  if (httpStatus === 413) return status.RESOURCE_EXHAUSTED;
  if (httpStatus === 429 || httpStatus === 503) return status.UNAVAILABLE;
  if (httpStatus === 404) return status.NOT_FOUND;
  if (httpStatus >= 400 && httpStatus < 500) return status.INVALID_ARGUMENT;
  return status.INTERNAL;
}

const firstValue = (metadata: Metadata, key: string) => {
  const value = metadata.get(key)[0];
  return value === undefined ? null : String(value);
};

/** Rejects a credential with an HttpError (401). */
export type GrpcAuthenticate = (authorization: string | null) => Promise<unknown>;

/**
 * Checks the `authorization` metadata before the message is read: the call's stream stays paused until
 * the metadata passes on, so an unauthenticated sender is answered after its headers, not its body.
 */
function authenticateFirst(authenticate: GrpcAuthenticate, log: Logger): ServerInterceptor {
  return (_method, call) =>
    new ServerInterceptingCall(call, {
      start: (next) =>
        next({
          onReceiveMetadata: (metadata, pass) =>
            authenticate(firstValue(metadata, "authorization")).then(
              () => pass(metadata),
              (error) => {
                if (!(error instanceof HttpError)) log.error("grpc authentication failed", { error });
                call.sendStatus(
                  error instanceof HttpError
                    ? { code: grpcStatus(error.status), details: error.message }
                    : { code: status.INTERNAL, details: "Internal error" },
                );
              },
            ),
        }),
    });
}

function exportHandler(signal: OtlpSignal, run: GrpcExport, log: Logger) {
  return (call: ServerUnaryCall<Buffer, Buffer>, callback: sendUnaryData<Buffer>) => {
    const headers = { authorization: firstValue(call.metadata, "authorization"), project: firstValue(call.metadata, "x-latitude-project") };
    run(call.request, headers, signal).then(
      (response) => callback(null, Buffer.from(response)),
      (error) => {
        if (error instanceof HttpError) return callback({ code: grpcStatus(error.status), details: error.message });
        log.error("grpc export failed", { error });
        callback({ code: status.INTERNAL, details: "Internal error" });
      },
    );
  };
}

/**
 * OTLP/gRPC `TraceService/Export` and `LogsService/Export` on their own port, sharing the HTTP receiver's
 * pipeline. A message is at most `maxMessageBytes` (INGEST_MAX_BODY_BYTES, as over HTTP), refused with
 * RESOURCE_EXHAUSTED beyond; the credential is checked before the message is read.
 */
export async function startGrpcReceiver(port: number, host: string, maxMessageBytes: number, authenticate: GrpcAuthenticate, run: GrpcExport, log: Logger) {
  const server = new Server({ "grpc.max_receive_message_length": maxMessageBytes, interceptors: [authenticateFirst(authenticate, log)] });
  for (const [signal, service] of Object.entries(SERVICES) as [OtlpSignal, ServiceDefinition][]) {
    server.addService(service, { Export: exportHandler(signal, run, log) });
  }
  const boundPort = await new Promise<number>((resolve, reject) =>
    server.bindAsync(`${host}:${port}`, ServerCredentials.createInsecure(), (error, bound) => (error ? reject(error) : resolve(bound))),
  );
  return {
    port: boundPort,
    stop: () => new Promise<void>((resolve) => server.tryShutdown(() => resolve())),
  };
}
