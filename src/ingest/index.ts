import { Elysia } from "elysia";
import type { Context } from "../context";
import type { OtlpSignal } from "./pipeline";
import { otlpEncoding, readOtlpBody } from "./receive";
import { exportResponse } from "./respond";

const ROUTES: { signal: OtlpSignal; path: string; summary: string; description: string }[] = [
  {
    signal: "traces",
    path: "/v1/traces",
    summary: "Export spans (OTLP/HTTP)",
    description:
      "OTLP ExportTraceServiceRequest as application/x-protobuf or application/json, optionally gzip. The project of each span comes from its `latitude.project` attribute, its resource's, or the X-Latitude-Project header.",
  },
  {
    signal: "logs",
    path: "/v1/logs",
    summary: "Export log records (OTLP/HTTP)",
    description:
      "OTLP ExportLogsServiceRequest as application/x-protobuf or application/json, optionally gzip. GenAI events (`gen_ai.client.inference.operation.details`, `gen_ai.{system,user,assistant,tool}.message`, `gen_ai.choice`) become the messages of the span they name by trace and span id, whether they arrive before or after it; other log records are not stored and are counted in `partialSuccess.rejectedLogRecords`.",
  },
];

/** `POST /v1/traces` and `POST /v1/logs`: OTLP/HTTP in protobuf or JSON, raw bytes read without Elysia's body parser. */
export const ingestModule = ({ ingest, config }: Context) => {
  const app = new Elysia({ name: "ingest", detail: { tags: ["ingest"] } });
  for (const { signal, path, summary, description } of ROUTES) {
    app.post(
      path,
      async ({ request }) => {
        const encoding = otlpEncoding(request.headers.get("content-type"));
        const outcome = await ingest.export(
          {
            authorization: request.headers.get("authorization"),
            project: request.headers.get("x-latitude-project"),
            announcedBytes: Number(request.headers.get("content-length")) || 0,
          },
          () => readOtlpBody(request, encoding, config.ingest),
          signal,
        );
        return exportResponse(outcome, encoding, signal);
      },
      { parse: "none", detail: { summary, description } },
    );
  }
  return app;
};
