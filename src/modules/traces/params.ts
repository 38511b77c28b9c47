/**
 * Collects ClickHouse query parameters while SQL text is assembled: every value a caller supplied
 * reaches the server as `{name:Type}`, never as SQL text.
 */
export class QueryParams {
  readonly values: Record<string, unknown> = {};
  private next = 0;

  constructor(private readonly prefix = "p") {}

  /** Binds `value` and returns its placeholder, e.g. `{p3:String}`. */
  bind(value: unknown, type: string): string {
    const name = `${this.prefix}${this.next++}`;
    this.values[name] = value;
    return `{${name}:${type}}`;
  }
}
