import type { Logger } from "../../lib/log";
import type { EmbeddingsClient } from "./embeddings";
import type { QueryParams } from "./params";
import type { TraceScope } from "./relation";

/**
 * Search over the input and output messages of a project's spans. Each mode yields the SQL of a
 * subquery `(trace_id, relevance)` over the matching traces; relevance is higher for better matches.
 *
 * - Semantic (EMBEDDINGS_BASE_URL set): spans' message text is embedded shortly after ingest into
 *   `span_embeddings` (embeddings.ts); a trace's relevance is the best cosine similarity of its spans
 *   to the embedded query, and it matches at `minSimilarity` or more.
 * - Full text (otherwise, or when the embeddings endpoint fails): spans (or messages sent for them as log
 *   records, `span_contents`) whose `message_text` has one
 *   of the query's words in any case (through the index of its lower-cased words); relevance is the
 *   share of the query's distinct words the trace's messages contain.
 */

export type SearchMode = "semantic" | "full-text";

/** Cosine similarity a trace needs to match a semantic query. */
export const minSimilarity = 0.3;
const maxTerms = 32;
const stopWords = new Set(
  "a an and are as at be by for from has have i in is it of on or that the this to was were will with you your".split(" "),
);

/** Words as the `splitByNonAlpha` tokenizer of the message text index cuts them. */
export const words = (text: string) => text.match(/[A-Za-z0-9\u0080-\uffff]+/g) ?? [];

export function searchTerms(query: string): string[] {
  const all = [...new Set(words(query).map((word) => word.toLowerCase()))];
  const meaningful = all.filter((word) => !stopWords.has(word));
  return (meaningful.length ? meaningful : all).slice(0, maxTerms);
}

function fullTextSql(query: string, scope: TraceScope, params: QueryParams): string {
  const terms = searchTerms(query);
  if (!terms.length) return "(SELECT '' AS trace_id, toFloat64(0) AS relevance WHERE 0)";
  const snapshot = scope.snapshot ? ` AND ingested_at <= ${scope.snapshot}` : "";
  // `lower(message_text)` is the expression of the words index (sql/clickhouse/004_message_words_index.sql).
  const found = terms.map((term) => `max(hasToken(lower(message_text), ${params.bind(term, "String")}))`);
  const anyTerm = params.bind(terms, "Array(String)");
  // Spans' own messages, and those sent for them as log records (span_contents, the same words index).
  const matching = (table: string) => `SELECT trace_id, message_text FROM ${scope.database}.${table}
      WHERE organization_id = ${scope.organizationId} AND project_id = ${scope.projectId}${snapshot}
        AND hasAnyTokens(lower(message_text), ${anyTerm})`;
  return `(SELECT trace_id, (${found.join(" + ")}) / ${params.bind(terms.length, "UInt32")} AS relevance
    FROM (${matching("spans")} UNION ALL ${matching("span_contents")})
    GROUP BY trace_id HAVING relevance > 0)`;
}

function semanticSql(vector: number[], model: string, scope: TraceScope, params: QueryParams): string {
  const snapshot = scope.snapshot ? ` AND embedded_at <= ${scope.snapshot}` : "";
  return `(SELECT trace_id, max(1 - cosineDistance(embedding, ${params.bind(vector, "Array(Float32)")})) AS relevance
    FROM ${scope.database}.span_embeddings
    WHERE organization_id = ${scope.organizationId} AND project_id = ${scope.projectId}${snapshot}
      AND model = ${params.bind(model, "String")} AND length(embedding) = ${params.bind(vector.length, "UInt32")}
    GROUP BY trace_id HAVING relevance >= ${params.bind(minSimilarity, "Float64")})`;
}

export class TraceSearch {
  private readonly queryVectors = new Map<string, number[]>();

  constructor(
    private readonly embeddings: EmbeddingsClient | null,
    private readonly log: Logger,
  ) {}

  get mode(): SearchMode {
    return this.embeddings ? "semantic" : "full-text";
  }

  /** SQL of the `(trace_id, relevance)` subquery of the traces matching `query` in the scope. */
  async relevanceSql(query: string, scope: TraceScope, params: QueryParams): Promise<string> {
    if (this.embeddings) {
      try {
        return semanticSql(await this.queryVector(this.embeddings, query), this.embeddings.config.model, scope, params);
      } catch (error) {
        this.log.warn("semantic search unavailable, answering with full-text search", { error: error as Error });
      }
    }
    return fullTextSql(query, scope, params);
  }

  private async queryVector(client: EmbeddingsClient, query: string): Promise<number[]> {
    const cached = this.queryVectors.get(query);
    if (cached) return cached;
    const [vector] = await client.embed([query]);
    if (this.queryVectors.size >= 500) this.queryVectors.delete(this.queryVectors.keys().next().value!);
    this.queryVectors.set(query, vector);
    return vector;
  }
}
