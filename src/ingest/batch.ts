import type { Logger } from "../lib/log";
import type { SpanRow } from "./row";
import { encodeSpanRows } from "./rowbinary";
import { SpanKeys } from "./span-keys";
import type { OpenSegment, SealedSegment, Wal } from "./wal";

/** The rows were not accepted and nothing of them was kept: the sender should retry after `retryAfterSeconds`. */
export class BackpressureError extends Error {
  constructor(
    /**
     * memory: too many rows waiting for disk; backlog: too much on disk waiting for ClickHouse; storage: the log
     * failed; busy: too many exports being decoded at once.
     */
    readonly reason: "memory" | "backlog" | "storage" | "closing" | "busy",
    readonly retryAfterSeconds: number,
    options?: ErrorOptions,
  ) {
    super(`ingest queue unavailable (${reason})`, options);
  }
}

export interface BatchLimits {
  /** Memory for accepted rows and their encoding until their group is on disk. */
  queueBytes: number;
  /** Disk for rows in the write-ahead log that are not in ClickHouse yet. */
  walBytes: number;
  /** A free inserter takes the open segment once it has this many rows or is this old… */
  flushRows: number;
  flushIntervalMs: number;
  /** …and a segment is sealed at this size even while every inserter is busy. */
  segmentBytes: number;
}

interface Waiter {
  resolve(): void;
  reject(error: Error): void;
}

/** Requests that share one write and one fsync. */
interface Group {
  chunks: Uint8Array[];
  rows: number;
  keys: SpanKeys;
  heldBytes: number;
  waiters: Waiter[];
}

const emptyGroup = (): Group => ({ chunks: [], rows: 0, keys: new SpanKeys(), heldBytes: 0, waiters: [] });

/** Wakes everything waiting on it; a wait may also end on its own after a timeout. */
class Signal {
  private wakers: (() => void)[] = [];

  wait(timeoutMs?: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = timeoutMs === undefined ? undefined : setTimeout(resolve, timeoutMs);
      this.wakers.push(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  notify() {
    const wakers = this.wakers;
    this.wakers = [];
    for (const wake of wakers) wake();
  }
}

/**
 * Collects rows of concurrent requests into the open write-ahead log segment. Every request waiting while a write
 * is on its way joins the next one, so a single write + fsync acknowledges them all (group commit). A free inserter
 * takes the open segment once it has `flushRows` rows or is `flushIntervalMs` old; while every inserter is busy the
 * segment keeps growing (up to `segmentBytes`), so a slow ClickHouse gets fewer, larger inserts.
 */
export class SpanBatcher {
  /** Bytes of accepted rows and their encoding not yet on disk. */
  heldBytes = 0;
  private group = emptyGroup();
  /** The group being written and fsynced now. */
  private writing: Group | null = null;
  private segment: OpenSegment | null = null;
  /** Sealed segments waiting for an inserter, and those an inserter took. */
  private readonly queue: SealedSegment[] = [];
  private readonly taken = new Set<string>();
  private sealRequested = false;
  private committing: Promise<void> | null = null;
  private closed = false;
  private readonly changed = new Signal();

  constructor(
    private readonly wal: Wal,
    private readonly limits: BatchLimits,
    private readonly log: Logger,
    /** Segments an earlier run left behind; inserted first. */
    recovered: SealedSegment[] = [],
  ) {
    this.queue.push(...recovered);
  }

  /**
   * Throws BackpressureError when rows of about `approxBytes` would not be taken now. The receiver asks
   * with the announced body size before it reads and decodes a body, so a saturated writer costs refused senders nothing.
   */
  admit(approxBytes: number): void {
    if (this.closed) throw new BackpressureError("closing", 5);
    // An empty queue always takes one request, however large, so an oversized request cannot wait forever.
    if (this.heldBytes > 0 && this.heldBytes + approxBytes > this.limits.queueBytes) throw new BackpressureError("memory", 1);
    if (this.wal.bytes > 0 && this.wal.bytes + approxBytes > this.limits.walBytes) throw new BackpressureError("backlog", 5);
  }

  /** Resolves once the rows are fsynced in the write-ahead log; throws BackpressureError when full or closing. */
  async accept(rows: readonly SpanRow[], approxBytes: number): Promise<void> {
    this.admit(approxBytes);
    if (rows.length === 0) return;
    const encoded = encodeSpanRows(rows, approxBytes + rows.length * 64);
    const held = approxBytes + encoded.byteLength;
    this.heldBytes += held;
    const done = Promise.withResolvers<void>();
    this.group.chunks.push(encoded);
    this.group.rows += rows.length;
    for (const row of rows) this.group.keys.add(row.organization_id, row.project_id, row.trace_id, row.start_time);
    this.group.heldBytes += held;
    this.group.waiters.push(done);
    this.kick();
    return done.promise;
  }

  /** The next segment to insert, until `finished()`. Seals the open segment once it is old or large enough. Null once closed and empty. */
  async next(): Promise<SealedSegment | null> {
    for (;;) {
      const segment = this.queue.shift();
      if (segment) {
        this.taken.add(segment.name);
        return segment;
      }
      if (this.closed && !this.committing && !this.segment) return null;
      const open = this.segment;
      if (!open || open.rows === 0) {
        await this.changed.wait();
        continue;
      }
      const age = performance.now() - open.openedAt;
      if (age < this.limits.flushIntervalMs && open.rows < this.limits.flushRows) {
        await this.changed.wait(this.limits.flushIntervalMs - age);
        continue;
      }
      this.sealRequested = true;
      this.kick();
      await this.changed.wait();
    }
  }

  /** A segment from `next()` is in ClickHouse. */
  finished(segment: SealedSegment) {
    this.taken.delete(segment.name);
    this.changed.notify();
  }

  /** Resolves once every row accepted before the call is in ClickHouse. */
  async drain(): Promise<void> {
    await this.sealOpenSegment();
    const waitingFor = [...this.taken, ...this.queue.map((segment) => segment.name)];
    const pending = (name: string) => this.taken.has(name) || this.queue.some((segment) => segment.name === name);
    while (waitingFor.some(pending)) await this.changed.wait();
  }

  /** Segments sealed and not yet in ClickHouse. */
  get pendingSegments(): number {
    return this.queue.length + this.taken.size;
  }

  /** Writes everything accepted so far and seals the segment holding it. */
  private async sealOpenSegment(): Promise<void> {
    const latest = this.group.waiters.length > 0 ? this.group : this.writing;
    if (latest) {
      const written = Promise.withResolvers<void>();
      latest.waiters.push({ resolve: written.resolve, reject: () => written.resolve() });
      await written.promise;
    }
    const open = this.segment;
    if (!open) return;
    this.sealRequested = true;
    this.kick();
    while (this.segment === open) await this.changed.wait();
  }

  /** Refuses new rows, writes and seals what was accepted; `next()` then drains the queue and returns null. */
  async close(): Promise<void> {
    this.closed = true;
    await this.sealOpenSegment();
    await this.committing;
    this.changed.notify();
  }

  private kick() {
    if (this.committing) return;
    this.committing = (async () => {
      try {
        while (this.group.waiters.length > 0 || this.sealRequested) {
          if (this.group.waiters.length > 0) {
            const group = this.group;
            this.group = emptyGroup();
            await this.commit(group);
          }
          if (this.sealRequested || (this.segment && this.segment.bytes >= this.limits.segmentBytes)) await this.seal();
        }
      } finally {
        this.committing = null;
      }
    })();
  }

  private async commit(group: Group) {
    this.writing = group;
    let failure: unknown = null;
    try {
      this.segment ??= await this.wal.create();
      await this.segment.append(group.chunks, group.rows, group.keys);
    } catch (error) {
      failure = error;
    }
    this.writing = null;
    this.heldBytes -= group.heldBytes;
    if (failure === null) {
      for (const waiter of group.waiters) waiter.resolve();
    } else {
      this.log.error("write-ahead log append failed; the requests were refused", { error: failure as Error });
      const refused = new BackpressureError("storage", 5, { cause: failure });
      for (const waiter of group.waiters) waiter.reject(refused);
      // A segment whose append failed takes no more; the next group starts a fresh one.
      await this.seal();
    }
    this.changed.notify();
  }

  private async seal() {
    this.sealRequested = false;
    const open = this.segment;
    if (!open) return;
    try {
      const segment = await open.seal();
      if (segment.rows === 0) await this.wal.remove(segment);
      else this.queue.push(segment);
    } catch (error) {
      this.log.error("sealing a write-ahead log segment failed; its rows are inserted at the next start", { error: error as Error, segment: open.name });
    }
    this.segment = null;
    this.changed.notify();
  }
}
