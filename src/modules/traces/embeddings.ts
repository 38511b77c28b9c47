import type { Config } from "../../config";
import type { Context } from "../../context";

/**
 * Embeds the message text of newly ingested spans into `span_embeddings`, shortly after ingest, so a
 * semantic search embeds only its query. One process at a time does the work (a PostgreSQL advisory
 * lock); progress is the latest `source_ingested_at` already embedded, re-read with an overlap so a
 * batch whose insert was still committing when a later one was read is picked up too.
 */

const lockKey = 728_165;
const batchSize = 64;
const idleMs = 1_000;
const failureBackoffMs = 10_000;
const overlapSeconds = 120;
/** Characters of message text embedded per span; the start of a conversation carries its subject. */
const maxTextChars = 8_000;
/** Status codes saying the input itself was refused, so retrying it cannot help. */
const refusedInput = new Set([400, 413, 422]);

export class EmbeddingsError extends Error {
  constructor(
    message: string,
    readonly status: number | null,
  ) {
    super(message);
  }
}

type EmbeddingsConfig = NonNullable<Config["embeddings"]>;

/** Client of an OpenAI-compatible `POST /embeddings` endpoint. */
export class EmbeddingsClient {
  constructor(
    readonly config: EmbeddingsConfig,
    private readonly timeoutMs = 15_000,
  ) {}

  async embed(inputs: string[]): Promise<number[][]> {
    const response = await fetch(`${this.config.baseUrl}/embeddings`, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        ...(this.config.apiKey ? { authorization: `Bearer ${this.config.apiKey}` } : {}),
      },
      body: JSON.stringify({ model: this.config.model, input: inputs }),
      signal: AbortSignal.timeout(this.timeoutMs),
    });
    if (!response.ok) throw new EmbeddingsError(`embeddings endpoint answered ${response.status}: ${(await response.text()).slice(0, 200)}`, response.status);
    const body = (await response.json()) as { data?: { embedding?: unknown; index?: number }[] };
    const data = body.data ?? [];
    if (data.length !== inputs.length) throw new EmbeddingsError(`embeddings endpoint returned ${data.length} vectors for ${inputs.length} inputs`, null);
    const vectors: number[][] = new Array(inputs.length);
    data.forEach((item, position) => {
      const vector = item.embedding;
      if (!Array.isArray(vector) || !vector.every((x) => typeof x === "number")) throw new EmbeddingsError("embeddings endpoint returned a non-numeric vector", null);
      vectors[item.index ?? position] = vector;
    });
    return vectors;
  }
}

interface PendingSpan {
  organization_id: string;
  project_id: string;
  trace_id: string;
  span_id: string;
  span_start: string;
  span_ingested_at: string;
  retention_days: number;
  text: string;
}

export interface EmbeddingIndexer {
  /** Embeds one batch; resolves to the number of spans handled (0 when idle or another process holds the lock). */
  indexBatch(): Promise<number>;
  stop(): Promise<void>;
}

export function startEmbeddingIndexer(ctx: Pick<Context, "sql" | "ch" | "log">, client: EmbeddingsClient): EmbeddingIndexer {
  const { sql, ch, log } = ctx;
  const model = client.config.model;

  async function pendingSpans(): Promise<PendingSpan[]> {
    const result = await ch.client.query({
      query: `WITH ifNull((SELECT max(source_ingested_at) FROM ${ch.database}.span_embeddings WHERE model = {model:String}), toDateTime64(0, 3, 'UTC')) - INTERVAL ${overlapSeconds} SECOND AS since
        SELECT organization_id, project_id, trace_id, span_id, toString(start_time) AS span_start, toString(ingested_at) AS span_ingested_at,
          retention_days, substringUTF8(message_text, 1, ${maxTextChars}) AS text
        FROM ${ch.database}.spans
        WHERE ingested_at >= since AND notEmpty(message_text)
          AND (organization_id, project_id, trace_id, span_id) NOT IN (
            SELECT organization_id, project_id, trace_id, span_id FROM ${ch.database}.span_embeddings
            WHERE model = {model:String} AND source_ingested_at >= since)
        ORDER BY ingested_at, span_id
        LIMIT ${batchSize}`,
      query_params: { model },
      format: "JSONEachRow",
    });
    return result.json<PendingSpan>();
  }

  /** Vectors for the spans; an input the endpoint refuses gets an empty vector, which never matches. */
  async function embed(spans: PendingSpan[]): Promise<number[][]> {
    try {
      return await client.embed(spans.map((span) => span.text));
    } catch (error) {
      if (!(error instanceof EmbeddingsError) || error.status === null || !refusedInput.has(error.status)) throw error;
      if (spans.length === 1) {
        log.warn("embeddings endpoint refused a span's text; it stays out of semantic search", { traceId: spans[0].trace_id, spanId: spans[0].span_id });
        return [[]];
      }
      const vectors: number[][] = [];
      for (const span of spans) vectors.push(...(await embed([span])));
      return vectors;
    }
  }

  async function indexBatch(): Promise<number> {
    return sql.begin(async (tx) => {
      const [{ locked }] = await tx<{ locked: boolean }[]>`SELECT pg_try_advisory_xact_lock(${lockKey}) AS locked`;
      if (!locked) return 0;
      const spans = await pendingSpans();
      if (!spans.length) return 0;
      const vectors = await embed(spans);
      await ch.client.insert({
        table: `${ch.database}.span_embeddings`,
        values: spans.map((span, i) => ({
          organization_id: span.organization_id,
          project_id: span.project_id,
          trace_id: span.trace_id,
          span_id: span.span_id,
          model,
          embedding: vectors[i],
          span_start_time: span.span_start,
          source_ingested_at: span.span_ingested_at,
          retention_days: span.retention_days,
        })),
        format: "JSONEachRow",
      });
      return spans.length;
    });
  }

  let stopped = false;
  let timer: ReturnType<typeof setTimeout> | null = null;
  let running: Promise<void> | null = null;
  const schedule = (ms: number) => {
    if (!stopped) timer = setTimeout(() => (running = loop()), ms);
  };
  async function loop() {
    try {
      const handled = await indexBatch();
      schedule(handled === batchSize ? 0 : idleMs);
    } catch (error) {
      log.warn("embedding indexer failed; retrying", { error: error as Error });
      schedule(failureBackoffMs);
    }
  }
  schedule(0);

  return {
    indexBatch,
    async stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
      await running;
    },
  };
}
