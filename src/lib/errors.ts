/** An error whose message is safe to show the caller; everything else becomes a generic 500. */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
}

export const badRequest = (message: string) => new HttpError(400, message);
export const notFound = (what = "Resource") => new HttpError(404, `${what} not found`);
export const conflict = (message: string) => new HttpError(409, message);
export const unauthorized = (message = "Missing or invalid credentials") =>
  new HttpError(401, message, { "WWW-Authenticate": "Bearer" });
export const tooManyRequests = (retryAfterSeconds: number, message = "Too many requests") =>
  new HttpError(429, message, { "Retry-After": String(Math.max(1, Math.ceil(retryAfterSeconds))) });
export const unavailable = (retryAfterSeconds: number, message = "Service temporarily unavailable") =>
  new HttpError(503, message, { "Retry-After": String(Math.max(1, Math.ceil(retryAfterSeconds))) });
