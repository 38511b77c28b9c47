/**
 * Matching a feedback vector against every signal of a project at once (SIGNALS.md "Candidates"):
 * the signals' normalized centroids are kept column by column (one row per vector dimension), so a
 * feedback vector adds only its non-zero dimensions into one similarity per signal. The local text
 * vector has a few dozen non-zero dimensions of 512, so a score costs a few dozen short loops over
 * the signals instead of a full dot product with each. The text rank comes from an index of the
 * signals' name and description words.
 */
export class CentroidMatcher {
  private count = 0;
  private readonly columns: Float32Array;
  private readonly matchable: Uint8Array;
  private readonly similarities: Float32Array;
  private readonly wordHits: Uint16Array;
  private readonly byWord = new Map<string, number[]>();

  constructor(
    readonly dimensions: number,
    private readonly capacity: number,
  ) {
    this.columns = new Float32Array(dimensions * capacity);
    this.matchable = new Uint8Array(capacity);
    this.similarities = new Float32Array(capacity);
    this.wordHits = new Uint16Array(capacity);
  }

  /** Adds a signal (its words, and its centroid when it can be matched by similarity); returns its index. */
  add(words: Iterable<string>): number {
    if (this.count === this.capacity) throw new Error("centroid matcher is full");
    const index = this.count++;
    for (const word of new Set(words)) {
      const list = this.byWord.get(word);
      if (list) list.push(index);
      else this.byWord.set(word, [index]);
    }
    return index;
  }

  /** Sets a signal's centroid (any scale: it is normalized here); null or another length cannot be matched. */
  setCentroid(index: number, centroid: Float32Array | null, matchable: boolean) {
    const length = centroid && centroid.length === this.dimensions ? vectorNorm(centroid) : 0;
    this.matchable[index] = matchable && length > 0 ? 1 : 0;
    const scale = length > 0 ? 1 / length : 0;
    for (let d = 0, at = index; d < this.dimensions; d++, at += this.capacity) this.columns[at] = length > 0 ? centroid![d]! * scale : 0;
  }

  /**
   * The best signal by hybrid score among those passing `accept(similarity, rank)`, with cosine
   * similarity mapped through `calibrate`; -1 when none does. `vector` is unit length.
   */
  best(vector: Float32Array, words: string[], calibrate: (cosine: number) => number, accept: (similarity: number, hybrid: number) => boolean): number {
    const count = this.count;
    const similarities = this.similarities;
    similarities.fill(0, 0, count);
    if (vector.length === this.dimensions) {
      for (let d = 0; d < vector.length; d++) {
        const weight = vector[d]!;
        if (weight === 0) continue;
        const base = d * this.capacity;
        for (let k = 0; k < count; k++) similarities[k]! += weight * this.columns[base + k]!;
      }
    }
    const hits = this.wordHits;
    hits.fill(0, 0, count);
    for (const word of words) for (const index of this.byWord.get(word) ?? []) hits[index]!++;
    let best = -1;
    let bestHybrid = -Infinity;
    for (let k = 0; k < count; k++) {
      if (!this.matchable[k]) continue;
      const similarity = calibrate(similarities[k]!);
      const rank = words.length === 0 ? 0 : Math.min(1, hits[k]! / words.length);
      const hybrid = 0.75 * similarity + 0.25 * rank;
      if (accept(similarity, hybrid) && hybrid > bestHybrid) {
        best = k;
        bestHybrid = hybrid;
      }
    }
    return best;
  }
}

export function vectorNorm(vector: Float32Array): number {
  let sum = 0;
  for (let i = 0; i < vector.length; i++) sum += vector[i]! * vector[i]!;
  return Math.sqrt(sum);
}

/** target += vector × scale */
export function addScaled(target: Float32Array, vector: Float32Array, scale: number) {
  for (let i = 0; i < target.length; i++) target[i]! += vector[i]! * scale;
}
