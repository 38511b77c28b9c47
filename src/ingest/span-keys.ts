/**
 * What identifies the rows of one write-ahead log segment: their organizations, projects and traces and the
 * range of their start times. A segment's insert looks these up in `spans` to skip spans another segment already
 * stored (an export retried after its answer was lost), so the trace and session roll-ups, which add up
 * every row inserted, count each span once.
 */
export class SpanKeys {
  readonly organizationIds = new Set<string>();
  readonly projectIds = new Set<string>();
  readonly traceIds = new Set<string>();
  private fromNanos: bigint | null = null;
  private toNanos: bigint | null = null;

  /** `startNanos`: epoch nanoseconds as a decimal string, as span rows carry them. */
  add(organizationId: string, projectId: string, traceId: string, startNanos: string | bigint): void {
    this.organizationIds.add(organizationId);
    this.projectIds.add(projectId);
    this.traceIds.add(traceId);
    const start = BigInt(startNanos);
    if (this.fromNanos === null || start < this.fromNanos) this.fromNanos = start;
    if (this.toNanos === null || start > this.toNanos) this.toNanos = start;
  }

  merge(other: SpanKeys): void {
    for (const id of other.organizationIds) this.organizationIds.add(id);
    for (const id of other.projectIds) this.projectIds.add(id);
    for (const id of other.traceIds) this.traceIds.add(id);
    if (other.fromNanos !== null && (this.fromNanos === null || other.fromNanos < this.fromNanos)) this.fromNanos = other.fromNanos;
    if (other.toNanos !== null && (this.toNanos === null || other.toNanos > this.toNanos)) this.toNanos = other.toNanos;
  }

  /** Parameters of `alreadyStoredSpans`. */
  queryParams() {
    return {
      organizationIds: [...this.organizationIds],
      projectIds: [...this.projectIds],
      traceIds: [...this.traceIds],
      fromNanos: String(this.fromNanos ?? 0n),
      toNanos: String(this.toNanos ?? 0n),
    };
  }
}

/**
 * The spans of `database` that have the key of a row of the segment and that another segment stored: a read
 * bounded by the sort key's tenant and time prefix, narrowed by the trace id skip index. A retried span has the
 * very start time of the first one, so the time range loses nothing.
 */
export const spansStoredByOtherSegments = (database: string) => `
  SELECT organization_id, project_id, trace_id, span_id FROM ${database}.spans
  WHERE organization_id IN {organizationIds:Array(String)} AND project_id IN {projectIds:Array(String)}
    AND start_time BETWEEN fromUnixTimestamp64Nano({fromNanos:Int64}, 'UTC') AND fromUnixTimestamp64Nano({toNanos:Int64}, 'UTC')
    AND trace_id IN {traceIds:Array(String)} AND wal_segment != {walSegment:String}`;
