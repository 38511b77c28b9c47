import { randomBytes } from "node:crypto";
import { mkdir, open, readdir, readFile, rename, rm, truncate, type FileHandle } from "node:fs/promises";
import { join } from "node:path";
import type { Logger } from "../lib/log";
import { SpanKeys } from "./span-keys";

/**
 * Write-ahead log of span rows: a directory of segment files, each plain RowBinary so ClickHouse can read it as
 * is. A segment is appended to and fsynced in groups, sealed, inserted, then removed. Names are unique for the
 * life of the directory and carry a tag of the row format they were written in.
 */

/** A segment that takes no more appends: `rows` whole rows waiting for their insert. */
export interface SealedSegment {
  /** Unique for the life of the directory; the insert's deduplication token is derived from it. */
  name: string;
  path: string;
  bytes: number;
  rows: number;
  keys: SpanKeys;
}

/** Measures the longest prefix of a segment made of whole rows, and their keys. */
export type RowPrefix = (data: Uint8Array) => { rows: number; length: number; keys: SpanKeys };

const segmentFile = /^([0-9a-z]+-\d+)\.([0-9a-f]+)\.rowbinary$/;

export class OpenSegment {
  bytes = 0;
  rows = 0;
  readonly keys = new SpanKeys();
  /** Set when a failed append could not be cut back: the file may hold a torn tail past `bytes`. */
  private torn = false;
  readonly openedAt = performance.now();

  constructor(
    readonly name: string,
    readonly path: string,
    private readonly file: FileHandle,
    private readonly wal: Wal,
  ) {}

  /** Appends the chunks and returns once they are on disk. On failure the file is cut back to its durable length. */
  async append(chunks: Uint8Array[], rows: number, keys: SpanKeys): Promise<void> {
    let total = 0;
    for (const chunk of chunks) total += chunk.byteLength;
    try {
      const { bytesWritten } = await this.file.writev(chunks, this.bytes);
      if (bytesWritten !== total) throw new Error(`short write to ${this.path}: ${bytesWritten} of ${total} bytes`);
      await this.file.datasync();
    } catch (error) {
      this.torn = true;
      await this.file.truncate(this.bytes).then(() => (this.torn = false), () => {});
      throw error;
    }
    this.bytes += total;
    this.rows += rows;
    this.keys.merge(keys);
    this.wal.bytes += total;
  }

  async seal(): Promise<SealedSegment> {
    try {
      if (this.torn) await this.file.truncate(this.bytes);
    } finally {
      await this.file.close();
    }
    return { name: this.name, path: this.path, bytes: this.bytes, rows: this.rows, keys: this.keys };
  }
}

export class Wal {
  /** Bytes in segments not yet removed: the backlog waiting for ClickHouse, open segment included. */
  bytes = 0;
  private sequence = 0;
  /** Distinguishes this process's segments from every earlier run's; sorts by start time. */
  private readonly run = `${Date.now().toString(36).padStart(9, "0")}${randomBytes(3).toString("hex")}`;

  private constructor(
    readonly dir: string,
    private readonly formatTag: string,
  ) {}

  /**
   * Opens the directory and recovers what an earlier run left: segments in another format are moved to
   * `quarantine/`, torn tails are cut off, empty segments removed. The rest is returned oldest first, to insert.
   */
  static async open(dir: string, formatTag: string, completeRows: RowPrefix, log: Logger) {
    await mkdir(dir, { recursive: true });
    const wal = new Wal(dir, formatTag);
    const recovered: SealedSegment[] = [];
    for (const file of (await readdir(dir)).sort()) {
      const match = segmentFile.exec(file);
      if (!match) continue;
      const path = join(dir, file);
      if (match[2] !== formatTag) {
        await mkdir(join(dir, "quarantine"), { recursive: true });
        await rename(path, join(dir, "quarantine", file));
        log.error("write-ahead log segment in an older row format moved to quarantine; its rows need a manual insert", { file });
        continue;
      }
      const data = await readFile(path);
      const { rows, length, keys } = completeRows(data);
      if (rows === 0) {
        await rm(path, { force: true });
        continue;
      }
      if (length < data.length) {
        await truncate(path, length);
        log.warn("cut the unacknowledged torn tail of a write-ahead log segment", { file, bytes: data.length - length });
      }
      wal.bytes += length;
      recovered.push({ name: `${match[1]}.${match[2]}`, path, bytes: length, rows, keys });
    }
    return { wal, recovered };
  }

  async create(): Promise<OpenSegment> {
    const name = `${this.run}-${String(++this.sequence).padStart(9, "0")}.${this.formatTag}`;
    const path = join(this.dir, `${name}.rowbinary`);
    const file = await open(path, "wx");
    try {
      await this.syncDirectory();
    } catch (error) {
      await file.close();
      await rm(path, { force: true });
      throw error;
    }
    return new OpenSegment(name, path, file, this);
  }

  /** Drops a segment whose rows are in ClickHouse (or that never got any). */
  async remove(segment: { path: string; bytes: number }): Promise<void> {
    this.bytes -= segment.bytes;
    await rm(segment.path, { force: true });
  }

  /** Makes a new file's directory entry durable, so an acknowledged append cannot vanish with its file name. */
  private async syncDirectory() {
    const dir = await open(this.dir, "r");
    try {
      await dir.sync();
    } finally {
      await dir.close();
    }
  }
}
