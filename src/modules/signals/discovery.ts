import type { LanguageModel } from "ai";
import type { Queryable, Sql } from "../../db/postgres";
import { newId, slugify } from "../../lib/ids";
import type { Logger } from "../../lib/log";
import { contentWords, type FeedbackEmbedder } from "./embedding";
import { nameSignal } from "./llm";

/** SIGNALS.md discovery parameters. */
export const discovery = {
  halfLifeMs: 14 * 86_400_000,
  annotationWeight: 1.0,
  scoreWeight: 0.8,
  hybridThreshold: 0.8,
  cosineThreshold: 0.75,
  visibleAtMembers: 3,
  renameAfterMs: 8 * 3_600_000,
};


/** 2^(-age/half-life): what a contribution made `ageMs` ago still weighs in a centroid. */
export const decay = (ageMs: number) => Math.pow(2, -Math.max(0, ageMs) / discovery.halfLifeMs);

/**
 * The local text vector is lexical: paraphrases of one failure sit around cosine 0.4–0.65 and
 * unrelated feedback near 0, where neural embeddings put paraphrases above 0.75. Its cosine is
 * mapped onto that scale (cube root, monotonic, 0 → 0 and 1 → 1) so the thresholds hold for both.
 */
export const calibratedSimilarity = (mode: "endpoint" | "local", similarity: number) =>
  mode === "local" ? Math.cbrt(Math.max(0, similarity)) : similarity;

/** Share of the feedback's content words found in the signal's name and description, at most 1. */
export function textRank(feedbackWords: string[], signalWords: Set<string>): number {
  if (feedbackWords.length === 0) return 0;
  return Math.min(1, feedbackWords.filter((word) => signalWords.has(word)).length / feedbackWords.length);
}

/** A name and description read off the first member's feedback when no model names the signal. */
export function nameFromFeedback(feedback: string): { name: string; description: string } {
  const text = feedback.replace(/\s+/g, " ").trim();
  const sentence = text.split(/(?<=[.!?])\s/)[0] ?? text;
  const name = sentence.length > 80 ? `${sentence.slice(0, 77).replace(/\s+\S*$/, "")}…` : sentence.replace(/[.!?]+$/, "");
  return { name: name.charAt(0).toUpperCase() + name.slice(1), description: text.slice(0, 1000) };
}

interface ClaimedEvent {
  event_id: string;
  score_id: string;
  organization_id: string;
  project_id: string;
  source: "custom" | "evaluation" | "annotation";
  source_id: string;
  signal_id: string | null;
  feedback: string;
  passed: boolean;
  error: string | null;
  drafted_at: Date | null;
  deleted_at: Date | null;
  metadata: Record<string, unknown>;
  linked: boolean;
}

interface Candidate {
  id: string;
  projectId: string;
  source: string;
  /** The centroid as loaded plus this batch's additions (undecayed: only its direction matters). */
  centroid: Float32Array | null;
  /** Euclidean norm of `centroid`, kept with it. */
  norm: number;
  words: Set<string>;
  /** Sum of w·e added in this batch (not decayed: added now). */
  delta: Float32Array | null;
  members: number;
  annotated: boolean;
  created: boolean;
  name: string;
  description: string;
}

/** float32 vectors are stored as their bytes (bytea). */
const toBytes = (vector: Float32Array) => Buffer.from(vector.buffer, vector.byteOffset, vector.byteLength);
const fromBytes = (bytes: Buffer | null): Float32Array | null =>
  bytes && bytes.byteLength >= 4 ? new Float32Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength - (bytes.byteLength % 4))) : null;

function dot(a: ArrayLike<number>, b: ArrayLike<number>) {
  let sum = 0;
  for (let i = 0; i < a.length; i++) sum += a[i]! * b[i]!;
  return sum;
}

const norm = (vector: ArrayLike<number>) => Math.sqrt(dot(vector, vector));

function addScaled(target: Float32Array, vector: ArrayLike<number>, scale: number) {
  for (let i = 0; i < target.length; i++) target[i]! += vector[i]! * scale;
}

/**
 * Turns failed scores into signals (SIGNALS.md "Discovery"). Each call claims pending events under
 * `FOR UPDATE OF events, scores SKIP LOCKED`, so any number of processes drain the same table without
 * linking a score twice; signals whose centroids change are locked in id order, so two batches never
 * deadlock and never lose each other's additions (centroids are sums: each batch adds its delta to the
 * row it locked).
 */
export class SignalDiscovery {
  constructor(
    private sql: Sql,
    private embedder: FeedbackEmbedder,
    private model: LanguageModel | null,
    private log: Logger,
    private batchSize = 500,
  ) {}

  /** Processes every pending event and retraction; resolves to how many were handled. */
  async drain(): Promise<number> {
    let total = 0;
    for (;;) {
      const retracted = await this.unlinkRetracted();
      const linked = await this.linkBatch();
      total += retracted + linked.handled;
      if (linked.created.length) await this.nameNewSignals(linked.created);
      if (retracted < this.batchSize && linked.handled < this.batchSize) return total;
    }
  }

  /** Takes retracted scores out of their signals and centroids again. */
  private async unlinkRetracted(): Promise<number> {
    return this.sql.begin(async (tx) => {
      const events = await tx<{ id: string; score_id: string }[]>`
        SELECT id, score_id FROM failed_score_events
        WHERE retracted_at IS NOT NULL AND unlinked_at IS NULL AND consumed_at IS NOT NULL
        ORDER BY id LIMIT ${this.batchSize} FOR UPDATE SKIP LOCKED`;
      if (events.length === 0) return 0;
      const scoreIds = events.map((event) => event.score_id);
      const members = await tx<{ score_id: string; signal_id: string; weight: number; embedding: Buffer; linked_at: Date }[]>`
        DELETE FROM signal_members WHERE score_id IN ${tx(scoreIds)} RETURNING score_id, signal_id, weight, embedding, linked_at`;
      const bySignal = Map.groupBy(members, (member) => member.signal_id);
      const signals = await lockSignals(tx, [...bySignal.keys()]);
      const now = Date.now();
      for (const signal of signals) {
        const removed = bySignal.get(signal.id)!;
        const centroid = fromBytes(signal.centroid);
        if (centroid) {
          const age = decay(now - (signal.centroid_at?.getTime() ?? now));
          for (let i = 0; i < centroid.length; i++) centroid[i]! *= age;
          for (const member of removed) {
            const embedding = fromBytes(member.embedding);
            if (embedding?.length === centroid.length) addScaled(centroid, embedding, -member.weight * decay(now - member.linked_at.getTime()));
          }
        }
        await tx`
          UPDATE signals SET centroid = ${centroid ? toBytes(centroid) : null}, centroid_at = now(),
            member_count = greatest(0, member_count - ${removed.length}), updated_at = now()
          WHERE id = ${signal.id}`;
      }
      if (members.length) {
        const unlinked = members.map((member) => member.score_id);
        await tx`UPDATE scores SET signal_id = NULL, version = version + 1 WHERE id IN ${tx(unlinked)}`;
        await tx`INSERT INTO score_copy_outbox (score_id) SELECT unnest(${tx.array(unlinked)}::text[])`;
      }
      await tx`UPDATE failed_score_events SET unlinked_at = now() WHERE id IN ${tx(events.map((event) => event.id))}`;
      return events.length;
    });
  }

  private async linkBatch(): Promise<{ handled: number; created: string[] }> {
    return this.sql.begin(async (tx) => {
      const events = await tx<ClaimedEvent[]>`
        SELECT e.id AS event_id, s.id AS score_id, s.organization_id, s.project_id, s.source, s.source_id, s.signal_id,
          s.feedback, s.passed, s.error, s.drafted_at, s.deleted_at, s.metadata,
          EXISTS (SELECT 1 FROM signal_members m WHERE m.score_id = s.id) AS linked
        FROM failed_score_events e JOIN scores s ON s.id = e.score_id
        WHERE e.consumed_at IS NULL
        ORDER BY e.id LIMIT ${this.batchSize}
        FOR UPDATE OF e, s SKIP LOCKED`;
      if (events.length === 0) return { handled: 0, created: [] };
      const eligible = events.filter(
        (event) => !event.linked && !event.passed && event.error === null && event.drafted_at === null && event.deleted_at === null && event.feedback.trim() !== "",
      );
      const vectors = await this.embedder.embed(eligible.map((event) => event.feedback));
      const candidates = await this.loadCandidates(tx, [...new Set(eligible.map((event) => event.project_id))]);
      const links: { event: ClaimedEvent; signal: Candidate; vector: Float32Array; weight: number }[] = [];
      eligible.forEach((event, index) => {
        const vector = vectors[index]!;
        const signal = this.choose(event, vector, candidates);
        const weight = event.source === "annotation" ? discovery.annotationWeight : discovery.scoreWeight;
        signal.delta ??= new Float32Array(vector.length);
        addScaled(signal.delta, vector, weight);
        // Later scores of the batch compare against the centroid including this one.
        signal.centroid ??= new Float32Array(vector.length);
        addScaled(signal.centroid, vector, weight);
        signal.norm = norm(signal.centroid);
        signal.members += 1;
        signal.annotated ||= event.source === "annotation";
        links.push({ event, signal, vector, weight });
      });
      const touched = [...new Set(links.map((link) => link.signal))];
      const created = touched.filter((signal) => signal.created);
      for (const signal of created) await insertSignal(tx, signal, links.find((link) => link.signal === signal)!.event);
      const existing = await lockSignals(tx, touched.filter((signal) => !signal.created).map((signal) => signal.id));
      const now = Date.now();
      for (const row of existing) {
        const signal = touched.find((candidate) => candidate.id === row.id)!;
        const stored = fromBytes(row.centroid);
        const centroid = stored && stored.length === signal.delta!.length ? stored : new Float32Array(signal.delta!.length);
        const age = decay(now - (row.centroid_at?.getTime() ?? now));
        for (let i = 0; i < centroid.length; i++) centroid[i] = centroid[i]! * age + signal.delta![i]!;
        const added = links.filter((link) => link.signal === signal).length;
        await tx`
          UPDATE signals SET centroid = ${toBytes(centroid)}, centroid_at = now(),
            member_count = member_count + ${added},
            visible_at = coalesce(visible_at, CASE WHEN ${signal.annotated} OR member_count + ${added} >= ${discovery.visibleAtMembers} THEN now() END),
            regressed_at = CASE WHEN resolved_at IS NOT NULL THEN now() ELSE regressed_at END,
            resolved_at = NULL,
            updated_at = now()
          WHERE id = ${row.id}`;
      }
      if (links.length) {
        const members = links.map((link) => ({ score_id: link.event.score_id, signal_id: link.signal.id, weight: link.weight, embedding: toBytes(link.vector) }));
        await tx`INSERT INTO signal_members ${tx(members, "score_id", "signal_id", "weight", "embedding")}`;
        const scoreIds = links.map((link) => link.event.score_id);
        await tx`
          UPDATE scores SET signal_id = linked.signal_id, version = version + 1
          FROM unnest(${tx.array(scoreIds)}::text[], ${tx.array(links.map((link) => link.signal.id))}::text[]) AS linked(score_id, signal_id)
          WHERE scores.id = linked.score_id AND scores.signal_id IS DISTINCT FROM linked.signal_id`;
        await tx`INSERT INTO score_copy_outbox (score_id) SELECT unnest(${tx.array(scoreIds)}::text[])`;
      }
      await tx`UPDATE failed_score_events SET consumed_at = now() WHERE id IN ${tx(events.map((event) => event.event_id))}`;
      return { handled: events.length, created: created.map((signal) => signal.id) };
    });
  }

  /** The signal a score joins: the one it names, the best match above the thresholds, or a new one. */
  private choose(event: ClaimedEvent, vector: Float32Array, candidates: Map<string, Candidate[]>): Candidate {
    const own = candidates.get(event.project_id) ?? [];
    candidates.set(event.project_id, own);
    if (event.signal_id) {
      const named = own.find((signal) => signal.id === event.signal_id);
      if (named) return named;
    }
    const words = [...new Set(contentWords(event.feedback))];
    let best: Candidate | null = null;
    let bestScore = -Infinity;
    for (const signal of own) {
      if (signal.source === "custom" || !signal.centroid) continue;
      // Feedback vectors are unit length: the cosine is the dot product over the centroid's norm.
      const similarity = calibratedSimilarity(this.embedder.mode, signal.norm > 0 && signal.centroid.length === vector.length ? dot(vector, signal.centroid) / signal.norm : 0);
      const hybrid = 0.75 * similarity + 0.25 * textRank(words, signal.words);
      if ((hybrid >= discovery.hybridThreshold || similarity >= discovery.cosineThreshold) && hybrid > bestScore) {
        best = signal;
        bestScore = hybrid;
      }
    }
    if (best) return best;
    const named = nameFromFeedback(event.feedback);
    const flagger = event.source === "annotation" && event.source_id === "SYSTEM";
    const created: Candidate = {
      id: newId(),
      projectId: event.project_id,
      source: flagger ? "flagger" : "annotation",
      centroid: null,
      norm: 0,
      words: new Set(contentWords(`${named.name} ${named.description}`)),
      delta: null,
      members: 0,
      annotated: false,
      created: true,
      ...named,
    };
    own.push(created);
    return created;
  }

  private async loadCandidates(tx: Queryable, projectIds: string[]): Promise<Map<string, Candidate[]>> {
    const byProject = new Map<string, Candidate[]>();
    if (projectIds.length === 0) return byProject;
    const rows = await tx<{ id: string; project_id: string; source: string; name: string; description: string; centroid: Buffer | null; member_count: number }[]>`
      SELECT id, project_id, source, name, description, centroid, member_count FROM signals
      WHERE project_id IN ${tx(projectIds)} AND deleted_at IS NULL`;
    for (const row of rows) {
      const list = byProject.get(row.project_id) ?? [];
      list.push({
        id: row.id,
        projectId: row.project_id,
        source: row.source,
        centroid: fromBytes(row.centroid),
        norm: row.centroid ? norm(fromBytes(row.centroid) ?? []) : 0,
        words: new Set(contentWords(`${row.name} ${row.description}`)),
        delta: null,
        members: row.member_count,
        annotated: false,
        created: false,
        name: row.name,
        description: row.description,
      });
      byProject.set(row.project_id, list);
    }
    return byProject;
  }

  /** Names new signals with the configured model; without one they keep the name read off their feedback. */
  private async nameNewSignals(ids: string[]) {
    if (!this.model) return;
    for (const id of ids) await this.rename(id).catch((error) => this.log.warn("naming a signal failed", { signalId: id, error: error as Error }));
  }

  /** Regenerates a signal's name and description from its recent members' feedback. */
  async rename(signalId: string) {
    if (!this.model) return;
    const feedback = await this.sql<{ feedback: string }[]>`
      SELECT s.feedback FROM signal_members m JOIN scores s ON s.id = m.score_id
      WHERE m.signal_id = ${signalId} ORDER BY m.linked_at DESC LIMIT 10`;
    if (feedback.length === 0) return;
    const named = await nameSignal(this.model, feedback.map((row) => row.feedback));
    if (!named) return;
    await this.sql`
      UPDATE signals SET name = ${named.name}, description = ${named.description || feedback[0]!.feedback.slice(0, 1000)}, named_at = now(), updated_at = now()
      WHERE id = ${signalId} AND source <> 'custom'`;
  }

  /** Signals with new members whose name is older than 8 hours get a fresh one (a scheduled job). */
  async renameStale(): Promise<number> {
    if (!this.model) return 0;
    const stale = await this.sql<{ id: string }[]>`
      SELECT id FROM signals
      WHERE deleted_at IS NULL AND source <> 'custom'
        AND (named_at IS NULL OR named_at < now() - make_interval(secs => ${discovery.renameAfterMs / 1000}))
        AND EXISTS (SELECT 1 FROM signal_members m WHERE m.signal_id = signals.id AND m.linked_at > coalesce(signals.named_at, '-infinity'))
      LIMIT 100`;
    for (const { id } of stale) await this.rename(id).catch((error) => this.log.warn("renaming a signal failed", { signalId: id, error: error as Error }));
    return stale.length;
  }
}

async function lockSignals(tx: Queryable, ids: string[]) {
  if (ids.length === 0) return [];
  return tx<{ id: string; centroid: Buffer | null; centroid_at: Date | null }[]>`
    SELECT id, centroid, centroid_at FROM signals WHERE id IN ${tx(ids)} ORDER BY id FOR UPDATE`;
}

/** A slug from the name, unique among the project's signals (the id's tail added when taken). */
export async function signalSlug(tx: Queryable, projectId: string, name: string, id: string): Promise<string> {
  const base = slugify(name, "signal");
  const [taken] = await tx<{ taken: boolean }[]>`
    SELECT EXISTS (SELECT 1 FROM signals WHERE project_id = ${projectId} AND slug = ${base} AND deleted_at IS NULL) AS taken`;
  return taken!.taken ? `${base}-${id.slice(-6)}` : base;
}

async function insertSignal(tx: Queryable, signal: Candidate, first: ClaimedEvent) {
  const slug = await signalSlug(tx, signal.projectId, signal.name, signal.id);
  const visible = signal.annotated || signal.members >= discovery.visibleAtMembers;
  const insert = (slug: string) => tx`
    INSERT INTO signals (id, organization_id, project_id, slug, name, description, source, visible_at, member_count, centroid, centroid_at)
    VALUES (${signal.id}, ${first.organization_id}, ${signal.projectId}, ${slug}, ${signal.name}, ${signal.description}, ${signal.source},
      ${visible ? new Date() : null}, ${signal.members}, ${toBytes(signal.delta!)}, now())
    ON CONFLICT (project_id, slug) WHERE deleted_at IS NULL DO NOTHING
    RETURNING id`;
  // Another process may have named a signal alike since the slug was chosen: the id's tail tells them apart.
  if ((await insert(slug)).length === 0) await insert(`${slug}-${signal.id.slice(-6)}`);
}
