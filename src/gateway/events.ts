import type { Sql } from "../db/postgres";
import type { Logger } from "../lib/log";

/**
 * Run events across processes. Every event of a run is stored in `gateway_run_events` (in order,
 * batched, off the streaming path) and announced with NOTIFY, so a client attached to any Vigil
 * process follows a run executing in another. Stops and client tool results travel the same way.
 */
export interface RunEvent {
  id: number;
  event: "latitude-event" | "provider-event";
  data: Record<string, unknown>;
  /** `data` as JSON text, serialized once: streamed, stored and replayed byte for byte. */
  json: string;
}

const RUN_CHANNEL = "gateway_run_events";
const STOP_CHANNEL = "gateway_run_stop";
const TOOL_CHANNEL = "gateway_tool_results";
/** How long a follower of an ended run waits for its terminal event, should that write still be in flight. */
const endedRunGraceMs = 5_000;

/** Whether an event ends its run: nothing follows it. */
export const isTerminal = (event: RunEvent) => event.event === "latitude-event" && (event.data.type === "chain-completed" || event.data.type === "chain-error");

/** One run's persistence: events queue in memory and are written in order, a batch per round trip. */
class EventWriter {
  private queue: RunEvent[] = [];
  private writing: Promise<void> | null = null;

  constructor(
    private sql: Sql,
    private conversationUuid: string,
    /** The conversation row's insert: events reference it. */
    private ready: Promise<void>,
    private log: Logger,
  ) {}

  push(event: RunEvent) {
    this.queue.push(event);
    this.writing ??= this.drain();
  }

  /** Resolves when every pushed event is stored and announced. */
  async flushed(): Promise<void> {
    while (this.writing) await this.writing;
  }

  private async drain() {
    await this.ready.catch(() => {});
    while (this.queue.length) {
      const batch = this.queue.splice(0);
      try {
        // Events matter while a run is followed, not after a crash: no commit waits for the disk.
        await this.sql.begin(async (tx) => {
          await tx`SET LOCAL synchronous_commit = off`;
          await tx`
            INSERT INTO gateway_run_events (conversation_uuid, seq, event, data)
            SELECT ${this.conversationUuid}::uuid, seq, event, data
            FROM unnest(${batch.map((e) => e.id)}::int[], ${batch.map((e) => e.event)}::text[], ${batch.map((e) => e.json)}::text[]) AS batch (seq, event, data)
            ON CONFLICT DO NOTHING`;
          await tx`SELECT pg_notify(${RUN_CHANNEL}, ${this.conversationUuid})`;
        });
      } catch (error) {
        this.log.error("storing gateway run events failed", { conversationUuid: this.conversationUuid, error: error as Error });
      }
    }
    this.writing = null;
  }
}

type Waiter<T> = (value: T) => void;

export class RunEventBus {
  private runListeners = new Map<string, Set<() => void>>();
  private stopHandlers = new Map<string, () => void>();
  private toolWaiters = new Map<string, Waiter<{ result: unknown; isError: boolean }>>();
  private unlisten: (() => Promise<void>)[] = [];

  constructor(
    private sql: Sql,
    private log: Logger,
  ) {}

  async start() {
    const listen = async (channel: string, handle: (payload: string) => void) => {
      const { unlisten } = await this.sql.listen(channel, handle);
      this.unlisten.push(unlisten);
    };
    await listen(RUN_CHANNEL, (uuid) => this.runListeners.get(uuid)?.forEach((wake) => wake()));
    await listen(STOP_CHANNEL, (uuid) => this.stopHandlers.get(uuid)?.());
    await listen(TOOL_CHANNEL, (key) => {
      const waiter = this.toolWaiters.get(key);
      if (waiter) void this.takeToolResult(key).then((found) => found && waiter(found));
    });
  }

  async stop() {
    for (const unlisten of this.unlisten.splice(0)) await unlisten().catch(() => {});
  }

  writer(conversationUuid: string, ready: Promise<void>) {
    return new EventWriter(this.sql, conversationUuid, ready, this.log);
  }

  /** Stored events of a run after `afterId`, in order. */
  async eventsAfter(conversationUuid: string, afterId: number): Promise<RunEvent[]> {
    const rows = await this.sql<{ seq: number; event: RunEvent["event"]; data: string }[]>`
      SELECT seq, event, data FROM gateway_run_events WHERE conversation_uuid = ${conversationUuid} AND seq > ${afterId} ORDER BY seq`;
    return rows.map((row) => ({ id: row.seq, event: row.event, data: JSON.parse(row.data), json: row.data }));
  }

  /**
   * Every event of a run, stored ones first and then the rest as they are announced, until the run's
   * terminal event. `isActive` tells a run that ended without one (its process died) from a live one.
   */
  async *follow(conversationUuid: string, signal: AbortSignal, isActive: () => Promise<boolean>): AsyncGenerator<RunEvent> {
    let wake: (() => void) | null = null;
    let pending = true;
    const notify = () => {
      pending = true;
      wake?.();
    };
    let listeners = this.runListeners.get(conversationUuid);
    if (!listeners) this.runListeners.set(conversationUuid, (listeners = new Set()));
    listeners.add(notify);
    signal.addEventListener("abort", notify);
    let last = -1;
    let endedAt: number | null = null;
    try {
      while (!signal.aborted) {
        if (!pending) {
          // A missed notification or a dead runner cannot hang the follower: look again every few seconds.
          await new Promise<void>((resolve) => {
            wake = resolve;
            setTimeout(resolve, 2_000);
          });
          wake = null;
        }
        pending = false;
        const events = await this.eventsAfter(conversationUuid, last);
        for (const event of events) {
          last = event.id;
          yield event;
          if (isTerminal(event)) return;
        }
        if (!events.length && !(await isActive())) {
          // The run ended; its last events may still be on their way (they are written after its answer).
          endedAt ??= Date.now();
          if (Date.now() - endedAt > endedRunGraceMs) return;
          pending = false;
          await new Promise<void>((resolve) => {
            wake = resolve;
            setTimeout(resolve, 50);
          });
          wake = null;
          pending = true;
        }
      }
    } finally {
      listeners.delete(notify);
      if (!listeners.size) this.runListeners.delete(conversationUuid);
      signal.removeEventListener("abort", notify);
    }
  }

  /** Registers the abort of a run executing here, reachable from any process through `requestStop`. */
  onStop(conversationUuid: string, abort: () => void): () => void {
    this.stopHandlers.set(conversationUuid, abort);
    return () => this.stopHandlers.delete(conversationUuid);
  }

  async requestStop(conversationUuid: string): Promise<void> {
    const local = this.stopHandlers.get(conversationUuid);
    if (local) return local();
    await this.sql`SELECT pg_notify(${STOP_CHANNEL}, ${conversationUuid})`;
  }

  /** Stores a client tool's result and wakes the run waiting for it, in whichever process. */
  async postToolResult(organizationId: string, toolCallId: string, result: unknown, isError: boolean): Promise<void> {
    const key = `${organizationId}:${toolCallId}`;
    await this.sql`
      INSERT INTO gateway_tool_results (organization_id, tool_call_id, result, is_error)
      VALUES (${organizationId}, ${toolCallId}, ${this.sql.json((result ?? null) as never)}, ${isError})
      ON CONFLICT (organization_id, tool_call_id) DO UPDATE SET result = excluded.result, is_error = excluded.is_error`;
    await this.sql`SELECT pg_notify(${TOOL_CHANNEL}, ${key})`;
  }

  /** Waits for the result of a client tool call; rejects when the signal aborts or time runs out. */
  async waitForToolResult(organizationId: string, toolCallId: string, signal: AbortSignal, timeoutMs: number): Promise<{ result: unknown; isError: boolean }> {
    const key = `${organizationId}:${toolCallId}`;
    return new Promise((resolve, reject) => {
      const done = () => {
        clearTimeout(timer);
        signal.removeEventListener("abort", aborted);
        this.toolWaiters.delete(key);
      };
      const aborted = () => {
        done();
        reject(signal.reason ?? new Error("aborted"));
      };
      const timer = setTimeout(() => {
        done();
        reject(new Error(`No result for tool call ${toolCallId} within ${Math.round(timeoutMs / 1000)} s`));
      }, timeoutMs);
      signal.addEventListener("abort", aborted);
      this.toolWaiters.set(key, (value) => {
        done();
        resolve(value);
      });
      // The result may have arrived before the waiter was registered.
      void this.takeToolResult(key).then((found) => found && this.toolWaiters.get(key)?.(found));
    });
  }

  private async takeToolResult(key: string): Promise<{ result: unknown; isError: boolean } | null> {
    const [organizationId, toolCallId] = [key.slice(0, key.indexOf(":")), key.slice(key.indexOf(":") + 1)];
    const [row] = await this.sql<{ result: unknown; is_error: boolean }[]>`
      DELETE FROM gateway_tool_results WHERE organization_id = ${organizationId} AND tool_call_id = ${toolCallId} RETURNING result, is_error`;
    return row ? { result: row.result, isError: row.is_error } : null;
  }
}
