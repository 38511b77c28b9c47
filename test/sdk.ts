import { LatitudeClient, LatitudeError } from "@latitude-data/sdk";

/** The error a failing SDK call rejects with; fails the test when the call succeeds. */
export async function sdkFailure(call: Promise<unknown>): Promise<LatitudeError & { statusCode: number; body: { error: string } }> {
  try {
    await call;
  } catch (error) {
    if (error instanceof LatitudeError && error.statusCode !== undefined) return error as never;
    throw error;
  }
  throw new Error("expected the request to fail");
}

/** An SDK client that reports 429 and 5xx at once instead of retrying. */
export const sdkClient = (baseUrl: string, apiKey: string) => new LatitudeClient({ baseUrl, apiKey, maxRetries: 0 });
