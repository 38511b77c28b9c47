import type { EmbeddingsClient } from "../traces/embeddings";

/** Dimensions of the local text vector. */
export const localDimensions = 512;

/** Words too common to say what a failure is about: inverse document frequency ≈ 0. */
const stopWords = new Set(
  (
    "a an the and or but if then than so to of in on at by for with from into onto about as is are was were be been being am " +
    "it its this that these those there here i me my we our you your he she they them their his her him not no nor do does did " +
    "done doing have has had having can could would should will shall may might must just very really too also again still even " +
    "when while what which who whom whose why how all any some each every both few more most other such only own same up down out " +
    "over under once after before because until against between through during above below off further s t don didn doesn isn " +
    "wasn aren weren won wouldn couldn shouldn ve ll re d m o y agent assistant bot model response answer"
  ).split(" "),
);

/** Lower-cased words, apostrophes dropped (didn't → didnt), split on anything else. */
export const words = (text: string) =>
  text
    .toLowerCase()
    .normalize("NFKD")
    .replace(/[\u0300-\u036f']/g, "")
    .split(/[^a-z0-9]+/)
    .filter(Boolean);

/** The words that carry meaning: no stop words, no single characters. */
export const contentWords = (text: string) => words(text).filter((word) => word.length > 1 && !stopWords.has(word));

/** FNV-1a: a stable 32-bit hash, the same in every process and release. */
function hash(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

/**
 * A deterministic local text vector, so discovery works without an embeddings endpoint: content
 * words, word bigrams and character 4-grams of each word (which tie refund/refunds/refunded
 * together) hashed into `localDimensions` buckets with a sign bit. Term weights are TF-IDF with
 * sublinear term frequency; the inverse document frequency is a built-in prior (stop words 0, a
 * word's n-grams share its weight, longer words weigh more, as rarer words tend to be longer).
 * Normalized to unit length.
 */
export function localEmbedding(text: string): Float32Array {
  const terms = new Map<string, number>();
  const add = (term: string, weight: number) => terms.set(term, (terms.get(term) ?? 0) + weight);
  const content = contentWords(text);
  for (let i = 0; i < content.length; i++) {
    const word = content[i]!;
    const idf = Math.log(2 + Math.min(word.length, 12));
    add(`w:${word}`, idf);
    if (i > 0) add(`b:${content[i - 1]} ${word}`, idf * 0.5);
    const padded = ` ${word} `;
    const grams = Math.max(1, padded.length - 3);
    for (let j = 0; j + 4 <= padded.length; j++) add(`c:${padded.slice(j, j + 4)}`, (idf * 1.5) / grams);
  }
  const vector = new Float32Array(localDimensions);
  for (const [term, weight] of terms) {
    const h = hash(term);
    // Sublinear term frequency of the accumulated weight.
    vector[h % localDimensions]! += (h & 0x80000000 ? -1 : 1) * Math.log1p(weight);
  }
  return normalize(vector);
}

export function normalize(vector: Float32Array): Float32Array {
  let norm = 0;
  for (const x of vector) norm += x * x;
  norm = Math.sqrt(norm);
  if (norm > 0) for (let i = 0; i < vector.length; i++) vector[i]! /= norm;
  return vector;
}

/** Cosine similarity; vectors of different lengths (another embedding model) are unrelated. */
export function cosine(a: ArrayLike<number>, b: ArrayLike<number>): number {
  if (a.length !== b.length) return 0;
  let dot = 0;
  let na = 0;
  let nb = 0;
  for (let i = 0; i < a.length; i++) {
    dot += a[i]! * b[i]!;
    na += a[i]! * a[i]!;
    nb += b[i]! * b[i]!;
  }
  return na > 0 && nb > 0 ? dot / Math.sqrt(na * nb) : 0;
}

/** Feedback text → unit vectors: the configured embeddings endpoint when there is one, else local. */
export class FeedbackEmbedder {
  constructor(private readonly remote: EmbeddingsClient | null) {}

  get mode(): "endpoint" | "local" {
    return this.remote ? "endpoint" : "local";
  }

  async embed(texts: string[]): Promise<Float32Array[]> {
    if (!this.remote || texts.length === 0) return texts.map(localEmbedding);
    const vectors = await this.remote.embed(texts.map((text) => text.slice(0, 8000)));
    return vectors.map((vector) => normalize(Float32Array.from(vector)));
  }
}
