import { HttpError } from "../lib/errors";

/** The gateway's error body, as the gateway client reads it. */
export interface GatewayErrorBody {
  name: string;
  errorCode: string;
  message: string;
  details?: Record<string, unknown>;
}

/** Run error codes the gateway client knows (its RunErrorCodes). */
export type RunErrorCode = "ai_run_error" | "ai_provider_config_error" | "chain_compile_error" | "document_config_error" | "rate_limit_error" | "abort_error" | "unknown_error";

/** An error with the gateway's name and code; the status says how the request failed. */
export class GatewayError extends HttpError {
  constructor(
    status: number,
    readonly errorName: string,
    readonly errorCode: string,
    message: string,
    readonly details?: Record<string, unknown>,
    headers: Record<string, string> = {},
  ) {
    super(status, message, headers);
  }

  body(): GatewayErrorBody {
    return { name: this.errorName, errorCode: this.errorCode, message: this.message, ...(this.details ? { details: this.details } : {}) };
  }
}

/** A run that failed: compile errors, an unconfigured provider, the provider's own failure, a stop. */
export const runError = (code: RunErrorCode, message: string, status = code === "ai_run_error" ? 502 : 422, details?: Record<string, unknown>) =>
  new GatewayError(status, "DocumentRunError", code, message, details);

/** Names of the gateway client's LatitudeErrorCodes by HTTP status. */
const nameByStatus: Record<number, string> = {
  400: "BadRequestError",
  401: "UnauthorizedError",
  402: "PaymentRequiredError",
  403: "ForbiddenError",
  404: "NotFoundError",
  409: "ConflictError",
  422: "UnprocessableEntityError",
  429: "RateLimitError",
  501: "NotImplementedError",
  503: "OverloadedError",
};

/** The gateway body of any error the app's error handler described with a status and message. */
export function gatewayErrorBody(status: number, message: string, error: unknown): GatewayErrorBody {
  if (error instanceof GatewayError) return error.body();
  const name = nameByStatus[status] ?? "UnexpectedError";
  return { name, errorCode: name, message };
}

export const isGatewayPath = (pathname: string) => pathname === "/api/v3" || pathname.startsWith("/api/v3/");
