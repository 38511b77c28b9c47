import type { LanguageModel } from "ai";
import type { Queryable, Sql } from "../../db/postgres";
import { newId, slugify } from "../../lib/ids";
import type { Logger } from "../../lib/log";
import { addScaled, CentroidMatcher } from "./centroids";
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

/** A signal as this process last read or wrote it. PostgreSQL stays the source of truth. */
interface KnownSignal {
  id: string;
  projectId: string;
  source: string;
  /** The row version (xmin) it was read from or written as: another one means another writer changed the row. */
  version: string;
  /** The stored centroid: a time-decayed sum as of `centroidAt`. */
  centroid: Float32Array | null;
  centroidAt: number;
  words: string[];
}

/** A signal during one batch: what the batch adds to it, and its place in the batch's matcher. */
interface Candidate {
  known: KnownSignal;
  index: number;
  created: boolean;
  /** The stored centroid plus this batch's additions (undecayed: only its direction matters); null until the first addition. */
  centroid: Float32Array | null;
  /** Sum of w·e added in this batch (not decayed: added now). */
  delta: Float32Array | null;
  added: number;
  annotated: boolean;
  /** Flaggers whose annotations this batch links to it. */
  flaggers: Set<string>;
  name: string;
  description: string;
  first: ClaimedEvent | null;
}

/** One project's signals for a batch: the matcher over their centroids and the candidates by index and id. */
interface ProjectBatch {
  matcher: CentroidMatcher;
  candidates: Candidate[];
  byId: Map<string, Candidate>;
}

interface Link {
  event: ClaimedEvent;
  signal: Candidate;
  vector: Float32Array;
  weight: number;
}

/** float32 vectors are stored as their bytes (bytea). */
const toBytes = (vector: Float32Array) => Buffer.from(vector.buffer, vector.byteOffset, vector.byteLength);
const fromBytes = (bytes: Buffer | null): Float32Array | null =>
  bytes && bytes.byteLength >= 4 ? new Float32Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength - (bytes.byteLength % 4))) : null;

/**
 * Turns failed scores into signals (SIGNALS.md "Discovery"). Each call claims a batch of pending
 * events under `FOR UPDATE OF events, scores SKIP LOCKED`, so any number of processes drain the same
 * table without linking a score twice, and writes the whole batch in one transaction with one
 * statement per table. The signals of each project are kept in memory between batches and re-read
 * only when their row version (xmin) changed. Signals whose centroids change are locked in id order
 * at the end of the batch, so two batches never deadlock and never lose each other's additions
 * (centroids are sums: each batch adds its delta to the row it locked, re-read if another wrote it).
 */
export class SignalDiscovery {
  private known = new Map<string, Map<string, KnownSignal>>();

  constructor(
    private sql: Sql,
    private embedder: FeedbackEmbedder,
    private model: LanguageModel | null,
    private log: Logger,
    private batchSize = 2_000,
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
    const batch = await this.sql.begin(async (tx) => {
      const events = await tx<ClaimedEvent[]>`
        SELECT e.id AS event_id, s.id AS score_id, s.organization_id, s.project_id, s.source, s.source_id, s.signal_id,
          s.feedback, s.passed, s.error, s.drafted_at, s.deleted_at, s.metadata,
          EXISTS (SELECT 1 FROM signal_members m WHERE m.score_id = s.id) AS linked
        FROM failed_score_events e JOIN scores s ON s.id = e.score_id
        WHERE e.consumed_at IS NULL
        ORDER BY e.id LIMIT ${this.batchSize}
        FOR UPDATE OF e, s SKIP LOCKED`;
      if (events.length === 0) return { handled: 0, created: [], written: [] };
      const eligible = events.filter(
        (event) => !event.linked && !event.passed && event.error === null && event.drafted_at === null && event.deleted_at === null && event.feedback.trim() !== "",
      );
      const vectors = await this.embedder.embed(eligible.map((event) => event.feedback));
      const perProject = Map.groupBy(eligible, (event) => event.project_id);
      await this.refreshKnown(tx, [...perProject.keys()]);
      const projects = new Map<string, ProjectBatch>();
      const links: Link[] = eligible.map((event, index) => {
        const vector = vectors[index]!;
        let project = projects.get(event.project_id);
        if (!project) projects.set(event.project_id, (project = this.projectBatch(event.project_id, vector.length, perProject.get(event.project_id)!.length)));
        const signal = this.choose(project, event, vector);
        const weight = event.source === "annotation" ? discovery.annotationWeight : discovery.scoreWeight;
        signal.delta ??= new Float32Array(vector.length);
        addScaled(signal.delta, vector, weight);
        // Later scores of the batch compare against the centroid including this one.
        signal.centroid ??= signal.known.centroid?.length === vector.length ? signal.known.centroid.slice() : new Float32Array(vector.length);
        addScaled(signal.centroid, vector, weight);
        project.matcher.setCentroid(signal.index, signal.centroid, signal.known.source !== "custom");
        signal.added += 1;
        signal.annotated ||= event.source === "annotation";
        const flagger = event.source === "annotation" && event.source_id === "SYSTEM" ? event.metadata.flagger : undefined;
        if (typeof flagger === "string") signal.flaggers.add(flagger);
        return { event, signal, vector, weight };
      });
      const touched = [...new Set(links.map((link) => link.signal))];
      const created = touched.filter((signal) => signal.created);
      const written = await insertSignals(tx, created);
      if (links.length) {
        await tx`
          INSERT INTO signal_members (score_id, signal_id, weight, embedding)
          SELECT score_id, signal_id, weight, decode(embedding, 'base64')
          FROM unnest(${tx.array(links.map((link) => link.event.score_id))}::text[], ${tx.array(links.map((link) => link.signal.known.id))}::text[],
            ${tx.array(links.map((link) => link.weight))}::real[], ${tx.array(links.map((link) => toBytes(link.vector).toString("base64")))}::text[])
            AS member(score_id, signal_id, weight, embedding)`;
        const scoreIds = links.map((link) => link.event.score_id);
        await tx`
          UPDATE scores SET signal_id = linked.signal_id, version = version + 1
          FROM unnest(${tx.array(scoreIds)}::text[], ${tx.array(links.map((link) => link.signal.known.id))}::text[]) AS linked(score_id, signal_id)
          WHERE scores.id = linked.score_id AND scores.signal_id IS DISTINCT FROM linked.signal_id`;
        await tx`INSERT INTO score_copy_outbox (score_id) SELECT unnest(${tx.array(scoreIds)}::text[])`;
      }
      await tx`UPDATE failed_score_events SET consumed_at = now() WHERE id IN ${tx(events.map((event) => event.event_id))}`;
      written.push(...(await addToCentroids(tx, touched.filter((signal) => !signal.created))));
      return { handled: events.length, created: created.map((signal) => signal.known.id), written };
    });
    // Committed: what this batch wrote is what the rows now hold.
    for (const signal of batch.written) {
      const project = this.known.get(signal.projectId) ?? new Map<string, KnownSignal>();
      this.known.set(signal.projectId, project.set(signal.id, signal));
    }
    return batch;
  }

  /** Brings the known signals of these projects up to date: only rows another writer changed are read in full. */
  private async refreshKnown(tx: Queryable, projectIds: string[]) {
    if (projectIds.length === 0) return;
    const rows = await tx<{ id: string; project_id: string; version: string }[]>`
      SELECT id, project_id, xmin::text AS version FROM signals
      WHERE project_id = ANY(${tx.array(projectIds)}::text[]) AND deleted_at IS NULL`;
    const stale = rows.filter((row) => this.known.get(row.project_id)?.get(row.id)?.version !== row.version).map((row) => row.id);
    const fresh = new Map<string, KnownSignal>();
    if (stale.length) {
      const changed = await tx<{ id: string; project_id: string; source: string; name: string; description: string; centroid: Buffer | null; centroid_at: Date | null; version: string }[]>`
        SELECT id, project_id, source, name, description, centroid, centroid_at, xmin::text AS version FROM signals
        WHERE id = ANY(${tx.array(stale)}::text[])`;
      for (const row of changed) {
        fresh.set(row.id, {
          id: row.id,
          projectId: row.project_id,
          source: row.source,
          version: row.version,
          centroid: fromBytes(row.centroid),
          centroidAt: row.centroid_at?.getTime() ?? Date.now(),
          words: contentWords(`${row.name} ${row.description}`),
        });
      }
    }
    const byProject = Map.groupBy(rows, (row) => row.project_id);
    for (const projectId of projectIds) {
      const previous = this.known.get(projectId);
      const current = new Map<string, KnownSignal>();
      for (const { id } of byProject.get(projectId) ?? []) {
        const signal = fresh.get(id) ?? previous?.get(id);
        if (signal) current.set(id, signal);
      }
      this.known.set(projectId, current);
    }
  }

  /** A project's known signals as this batch's candidates, with room for as many new ones as it has scores. */
  private projectBatch(projectId: string, dimensions: number, scores: number): ProjectBatch {
    const known = [...(this.known.get(projectId)?.values() ?? [])];
    const project: ProjectBatch = { matcher: new CentroidMatcher(dimensions, known.length + scores), candidates: [], byId: new Map() };
    for (const signal of known) {
      const candidate = addCandidate(project, signal, null);
      project.matcher.setCentroid(candidate.index, signal.centroid, signal.source !== "custom");
    }
    return project;
  }

  /** The signal a score joins: the one it names, the best match above the thresholds, or a new one. */
  private choose(project: ProjectBatch, event: ClaimedEvent, vector: Float32Array): Candidate {
    const named = event.signal_id ? project.byId.get(event.signal_id) : undefined;
    if (named) return named;
    const best = project.matcher.best(
      vector,
      [...new Set(contentWords(event.feedback))],
      (cosine) => calibratedSimilarity(this.embedder.mode, cosine),
      (similarity, hybrid) => hybrid >= discovery.hybridThreshold || similarity >= discovery.cosineThreshold,
    );
    if (best >= 0) return project.candidates[best]!;
    const { name, description } = nameFromFeedback(event.feedback);
    const flagger = event.source === "annotation" && event.source_id === "SYSTEM";
    const signal: KnownSignal = {
      id: newId(),
      projectId: event.project_id,
      source: flagger ? "flagger" : "annotation",
      version: "",
      centroid: null,
      centroidAt: Date.now(),
      words: contentWords(`${name} ${description}`),
    };
    return Object.assign(addCandidate(project, signal, event), { created: true, name, description });
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

function addCandidate(project: ProjectBatch, known: KnownSignal, first: ClaimedEvent | null): Candidate {
  const candidate: Candidate = {
    known,
    index: project.matcher.add(known.words),
    created: false,
    centroid: null,
    delta: null,
    added: 0,
    annotated: false,
    flaggers: new Set(),
    name: "",
    description: "",
    first,
  };
  project.candidates.push(candidate);
  project.byId.set(known.id, candidate);
  return candidate;
}

/** Locks signals for a centroid change. NO KEY UPDATE: members referencing them can still be inserted meanwhile. */
async function lockSignals(tx: Queryable, ids: string[]) {
  if (ids.length === 0) return [];
  return tx<{ id: string; centroid: Buffer | null; centroid_at: Date | null }[]>`
    SELECT id, centroid, centroid_at FROM signals WHERE id IN ${tx(ids)} ORDER BY id FOR NO KEY UPDATE`;
}

/** A slug from the name, unique among the project's signals (the id's tail added when taken). */
export async function signalSlug(tx: Queryable, projectId: string, name: string, id: string): Promise<string> {
  const base = slugify(name, "signal");
  const [taken] = await tx<{ taken: boolean }[]>`
    SELECT EXISTS (SELECT 1 FROM signals WHERE project_id = ${projectId} AND slug = ${base} AND deleted_at IS NULL) AS taken`;
  return taken!.taken ? `${base}-${id.slice(-6)}` : base;
}

/** Inserts a batch's new signals in one statement; returns them as stored. */
async function insertSignals(tx: Queryable, created: Candidate[]): Promise<KnownSignal[]> {
  if (created.length === 0) return [];
  const bases = created.map((signal) => slugify(signal.name, "signal"));
  const taken = await tx<{ project_id: string; slug: string }[]>`
    SELECT project_id, slug FROM signals
    WHERE project_id = ANY(${tx.array([...new Set(created.map((signal) => signal.known.projectId))])}::text[])
      AND slug = ANY(${tx.array(bases)}::text[]) AND deleted_at IS NULL`;
  const used = new Set(taken.map((row) => `${row.project_id}\u0000${row.slug}`));
  const withTail = (signal: Candidate, base: string) => `${base}-${signal.known.id.slice(-6)}`;
  const now = new Date();
  const rows = created.map((signal, index) => {
    const key = (slug: string) => `${signal.known.projectId}\u0000${slug}`;
    const slug = used.has(key(bases[index]!)) ? withTail(signal, bases[index]!) : bases[index]!;
    used.add(key(slug));
    return {
      id: signal.known.id,
      organization_id: signal.first!.organization_id,
      project_id: signal.known.projectId,
      slug,
      name: signal.name,
      description: signal.description,
      source: signal.known.source,
      visible_at: signal.annotated || signal.added >= discovery.visibleAtMembers ? now : null,
      member_count: signal.added,
      centroid: toBytes(signal.delta!),
      centroid_at: now,
      flaggers: [...signal.flaggers].sort(),
    };
  });
  const insert = (batch: typeof rows) => tx<{ id: string; version: string }[]>`
    INSERT INTO signals ${tx(batch, "id", "organization_id", "project_id", "slug", "name", "description", "source", "visible_at", "member_count", "centroid", "centroid_at", "flaggers")}
    ON CONFLICT (project_id, slug) WHERE deleted_at IS NULL DO NOTHING
    RETURNING id, xmin::text AS version`;
  const inserted = await insert(rows);
  if (inserted.length < rows.length) {
    // Another process may have named a signal alike since the slugs were chosen: the id's tail tells them apart.
    const done = new Set(inserted.map((row) => row.id));
    const retry = rows.flatMap((row, index) => (done.has(row.id) ? [] : [{ ...row, slug: withTail(created[index]!, bases[index]!) }]));
    inserted.push(...(await insert(retry)));
  }
  const versions = new Map(inserted.map((row) => [row.id, row.version]));
  return created.map((signal) => ({ ...signal.known, version: versions.get(signal.known.id) ?? "", centroid: signal.delta, centroidAt: now.getTime() }));
}

/**
 * Adds a batch's deltas to existing signals' centroids in one statement, after locking them in id
 * order. A centroid is re-read only when another writer changed the row since this process saw it.
 */
async function addToCentroids(tx: Queryable, signals: Candidate[]): Promise<KnownSignal[]> {
  if (signals.length === 0) return [];
  const byId = new Map(signals.map((signal) => [signal.known.id, signal]));
  const locked = await tx<{ id: string; version: string }[]>`
    SELECT id, xmin::text AS version FROM signals WHERE id = ANY(${tx.array([...byId.keys()])}::text[]) ORDER BY id FOR NO KEY UPDATE`;
  const changed = locked.filter((row) => byId.get(row.id)!.known.version !== row.version).map((row) => row.id);
  const reread = new Map(
    changed.length
      ? (
          await tx<{ id: string; centroid: Buffer | null; centroid_at: Date | null }[]>`
            SELECT id, centroid, centroid_at FROM signals WHERE id = ANY(${tx.array(changed)}::text[])`
        ).map((row) => [row.id, row])
      : [],
  );
  const now = Date.now();
  const updates = locked.map(({ id }) => {
    const signal = byId.get(id)!;
    const row = reread.get(id);
    const stored = row ? fromBytes(row.centroid) : signal.known.centroid;
    const storedAt = row ? (row.centroid_at?.getTime() ?? now) : signal.known.centroidAt;
    const delta = signal.delta!;
    const centroid = new Float32Array(delta);
    if (stored?.length === delta.length) {
      const age = decay(now - storedAt);
      for (let i = 0; i < centroid.length; i++) centroid[i]! += stored[i]! * age;
    }
    return { signal, centroid };
  });
  const rows = await tx<{ id: string; version: string; centroid_at: Date }[]>`
    UPDATE signals SET centroid = decode(u.centroid, 'base64'), centroid_at = now(),
      member_count = signals.member_count + u.added,
      visible_at = coalesce(signals.visible_at, CASE WHEN u.annotated OR signals.member_count + u.added >= ${discovery.visibleAtMembers} THEN now() END),
      regressed_at = CASE WHEN signals.resolved_at IS NOT NULL THEN now() ELSE signals.regressed_at END,
      resolved_at = NULL,
      flaggers = CASE WHEN u.flaggers = '' THEN signals.flaggers
        ELSE ARRAY(SELECT DISTINCT flagger FROM unnest(signals.flaggers || string_to_array(u.flaggers, ',')) AS flagger ORDER BY flagger) END,
      updated_at = now()
    FROM unnest(
      ${tx.array(updates.map(({ signal }) => signal.known.id))}::text[],
      ${tx.array(updates.map(({ centroid }) => toBytes(centroid).toString("base64")))}::text[],
      ${tx.array(updates.map(({ signal }) => signal.added))}::int[],
      ${tx.array(updates.map(({ signal }) => signal.annotated))}::boolean[],
      ${tx.array(updates.map(({ signal }) => [...signal.flaggers].join(",")))}::text[]
    ) AS u(id, centroid, added, annotated, flaggers)
    WHERE signals.id = u.id
    RETURNING signals.id, signals.xmin::text AS version, signals.centroid_at`;
  const written = new Map(rows.map((row) => [row.id, row]));
  return updates.flatMap(({ signal, centroid }) => {
    const row = written.get(signal.known.id);
    return row ? [{ ...signal.known, version: row.version, centroid, centroidAt: row.centroid_at.getTime() }] : [];
  });
}
