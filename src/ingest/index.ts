import { Elysia } from "elysia";
import type { Context } from "../context";
import { otlpEncoding, readOtlpBody } from "./receive";
import { exportResponse } from "./respond";

/** `POST /v1/traces`: OTLP/HTTP in protobuf or JSON, raw bytes read without Elysia's body parser. */
export const ingestModule = ({ ingest, config }: Context) =>
  new Elysia({ name: "ingest", detail: { tags: ["ingest"] } }).post(
    "/v1/traces",
    async ({ request }) => {
      const encoding = otlpEncoding(request.headers.get("content-type"));
      const outcome = await ingest.export(
        {
          authorization: request.headers.get("authorization"),
          project: request.headers.get("x-latitude-project"),
          announcedBytes: Number(request.headers.get("content-length")) || 0,
        },
        () => readOtlpBody(request, encoding, config.ingest),
      );
      return exportResponse(outcome, encoding);
    },
    {
      parse: "none",
      detail: {
        summary: "Export spans (OTLP/HTTP)",
        description:
          "OTLP ExportTraceServiceRequest as application/x-protobuf or application/json, optionally gzip. The project of each span comes from its `latitude.project` attribute, its resource's, or the X-Latitude-Project header.",
      },
    },
  );
