import { Elysia } from "elysia";
import type { Context } from "../context";
import { readOtlpBody } from "./receive";
import { exportResponse } from "./respond";

/** `POST /v1/traces`: OTLP/HTTP in protobuf or JSON, raw bytes read without Elysia's body parser. */
export const ingestModule = ({ ingest, config }: Context) =>
  new Elysia({ name: "ingest", detail: { tags: ["ingest"] } }).post(
    "/v1/traces",
    async ({ request }) => {
      const body = await readOtlpBody(request, config.ingest);
      const outcome = await ingest.export(body, {
        authorization: request.headers.get("authorization"),
        project: request.headers.get("x-latitude-project"),
      });
      return exportResponse(outcome, body.encoding);
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
