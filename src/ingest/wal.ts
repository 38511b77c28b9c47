import { randomBytes } from "node:crypto";
import { mkdir, open, readdir, readFile, rename, rm, truncate, type FileHandle } from "node:fs/promises";
import { join } from "node:path";
import type { Logger } from "../lib/log";
import { SpanKeys } from "./span-keys";

/**
 * Write-ahead log of span rows: a directory of segment files, each plain RowBinary so ClickHouse can read it as
 * is. A segment is appended to and fsynced in groups, sealed, inserted, then removed. Names are unique for the
 * life of the directory and carry a tag of the row format they were written in; `formats/<tag>` keeps each
 * format's structure, so segments a previous version left behind are still read and inserted after an upgrade.
 */

/** A segment that takes no more appends: `rows` whole rows waiting for their insert. */
export interface SealedSegment {
  /** Unique for the life of the directory; the insert's deduplication token is derived from it. */
  name: string;
  path: string;
  bytes: number;
  rows: number;
  keys: SpanKeys;
  /** The row format, as a ClickHouse structure (`name Type, …`). */
  structure: string;
}

/** A row format: its structure and the tag segment names carry. */
export interface RowFormat {
  tag: string;
  structure: string;
}

/** Measures the longest prefix of a segment made of whole rows, and their keys; null when the structure cannot be read. */
export type RowPrefix = (data: Uint8Array, structure: string) => { rows: number; length: number; keys: SpanKeys } | null;

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
    private readonly structure: string,
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
    return { name: this.name, path: this.path, bytes: this.bytes, rows: this.rows, keys: this.keys, structure: this.structure };
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
    private readonly format: RowFormat,
  ) {}

  /**
   * Opens the directory and recovers what an earlier run left: torn tails are cut off, empty segments removed,
   * and segments whose row format is unknown or unreadable moved to `quarantine/`. The rest is returned oldest
   * first, to insert.
   */
  static async open(dir: string, format: RowFormat, completeRows: RowPrefix, log: Logger) {
    await mkdir(join(dir, "formats"), { recursive: true });
    const wal = new Wal(dir, format);
    await wal.recordFormat();
    const recovered: SealedSegment[] = [];
    for (const file of (await readdir(dir)).sort()) {
      const match = segmentFile.exec(file);
      if (!match) continue;
      const path = join(dir, file);
      const structure = await readFile(join(dir, "formats", match[2]), "utf8").catch(() => null);
      const data = await readFile(path);
      const complete = structure === null ? null : completeRows(data, structure);
      if (structure === null || complete === null) {
        await mkdir(join(dir, "quarantine"), { recursive: true });
        await rename(path, join(dir, "quarantine", file));
        log.error("write-ahead log segment in an unknown row format moved to quarantine; its rows need a manual insert", { file });
        continue;
      }
      const { rows, length, keys } = complete;
      if (rows === 0) {
        await rm(path, { force: true });
        continue;
      }
      if (length < data.length) {
        await truncate(path, length);
        log.warn("cut the unacknowledged torn tail of a write-ahead log segment", { file, bytes: data.length - length });
      }
      wal.bytes += length;
      recovered.push({ name: `${match[1]}.${match[2]}`, path, bytes: length, rows, keys, structure });
    }
    return { wal, recovered };
  }

  /** Keeps the structure of this run's row format, durably, before any segment of it is written. */
  private async recordFormat(): Promise<void> {
    const path = join(this.dir, "formats", this.format.tag);
    if ((await readFile(path, "utf8").catch(() => null)) === this.format.structure) return;
    const partial = `${path}.partial`;
    const file = await open(partial, "w");
    try {
      await file.writeFile(this.format.structure);
      await file.datasync();
    } finally {
      await file.close();
    }
    await rename(partial, path);
    await syncDirectory(join(this.dir, "formats"));
  }

  async create(): Promise<OpenSegment> {
    const name = `${this.run}-${String(++this.sequence).padStart(9, "0")}.${this.format.tag}`;
    const path = join(this.dir, `${name}.rowbinary`);
    const file = await open(path, "wx");
    try {
      // The new file's directory entry is made durable, so an acknowledged append cannot vanish with its name.
      await syncDirectory(this.dir);
    } catch (error) {
      await file.close();
      await rm(path, { force: true });
      throw error;
    }
    return new OpenSegment(name, path, file, this, this.format.structure);
  }

  /** Drops a segment whose rows are in ClickHouse (or that never got any). */
  async remove(segment: { path: string; bytes: number }): Promise<void> {
    this.bytes -= segment.bytes;
    await rm(segment.path, { force: true });
  }

}

async function syncDirectory(path: string) {
  const dir = await open(path, "r");
  try {
    await dir.sync();
  } finally {
    await dir.close();
  }
}
