/**
 * Redaction throughput on generated GenAI span content (about 4 KB per span, PII in some spans).
 * Run: bun run bench/redact.ts [spans]
 */
import { compileRedactor, REDACTION_ENTITIES } from "../src/ingest/redact";
import { DEFAULT_REDACTION_POLICY, type RedactionPolicy } from "../src/ingest/redaction-policy";
import { blankSpanRow, generateCorpus } from "./redact-corpus";

const spanCount = Number(process.argv[2] ?? 2000);
const corpus = generateCorpus(spanCount);
const texts = corpus.flatMap((span) => [span.systemInstructions, span.inputMessages, span.outputMessages]);
const megabytes = texts.reduce((sum, text) => sum + Buffer.byteLength(text), 0) / 1e6;

const warmups = 3;
const rounds = 10;

/** `prepare` runs before each round, off the clock. */
function measure<T>(label: string, run: (input: T) => void, prepare: () => T = () => undefined as T) {
  for (let i = 0; i < warmups; i++) run(prepare());
  let milliseconds = 0;
  for (let i = 0; i < rounds; i++) {
    const input = prepare();
    const started = performance.now();
    run(input);
    milliseconds += performance.now() - started;
  }
  const seconds = milliseconds / 1000;
  console.log(`${label.padEnd(62)} ${((megabytes * rounds) / seconds).toFixed(1).padStart(7)} MB/s  ${((spanCount * rounds) / seconds / 1000).toFixed(1).padStart(6)}k spans/s`);
}

const enforce = (entities: RedactionPolicy["entities"]): RedactionPolicy => ({ ...DEFAULT_REDACTION_POLICY, mode: "enforce", entities });

console.log(`${spanCount} spans, ${(megabytes / spanCount * 1000).toFixed(2)} KB content per span, ${megabytes.toFixed(1)} MB`);
// Reference point on the same machine and corpus: one naive alternation of plain patterns, no pre-checks.
const naive =
  /[\w.+-]+@[\w-]+\.[\w.]+|\b(?:\d[ -]?){13,19}\b|\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}\b|\b\d{3}-\d{2}-\d{4}\b|\+?\d[\d ().-]{8,}\d|sk-[\w-]{20,}|AKIA[A-Z0-9]{16}|gh[pousr]_\w{36,}|xox[abpr]-[\w-]{10,}|eyJ[\w-]+\.eyJ[\w-]+\.[\w-]*|Bearer [\w.~+/-]+=*/g;
measure("naive combined alternation (reference)", () => texts.forEach((text) => text.replace(naive, "[REDACTED]")));
const everything = compileRedactor(enforce([...REDACTION_ENTITIES]), null);
// Every detector reaches its optimizing tier before the first measurement.
for (let i = 0; i < 5; i++) texts.forEach((text) => everything.redactText(text));
const defaults = compileRedactor(enforce(DEFAULT_REDACTION_POLICY.entities), null);
measure("redactText, default entities", () => texts.forEach((text) => defaults.redactText(text)));
measure("redactText, all entities (with ip_address)", () => texts.forEach((text) => everything.redactText(text)));
for (const entity of REDACTION_ENTITIES) {
  const single = compileRedactor(enforce([entity]), null);
  measure(`redactText, ${entity} only`, () => texts.forEach((text) => single.redactText(text)));
}

const row = (i: number) =>
  blankSpanRow({
    organization_id: "org",
    user_id: `customer-${i % 50}`,
    tags: ["production", "checkout"],
    metadata: { tenant: "acme", plan: "pro" },
    system_instructions: corpus[i].systemInstructions,
    input_messages: corpus[i].inputMessages,
    output_messages: corpus[i].outputMessages,
    attr_string: { "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-2024-08-06", "gen_ai.response.id": "chatcmpl-9fJx2kLmQ8", "user.email": "jane.doe@example.com" },
    resource_string: { "service.name": "support-agent", "service.version": "1.4.2", "host.name": "ip-10-0-3-17" },
  });
const rowRedactor = compileRedactor({ ...enforce(DEFAULT_REDACTION_POLICY.entities), identities: "pseudonymize", scopes: { metadata: true } }, "bench-secret");
// Rows are redacted in place: fresh ones for every round.
measure(
  "redactRow, defaults + metadata + pseudonymize (MB of content)",
  (rows) => rows.forEach((r) => rowRedactor.redactRow(r)),
  () => corpus.map((_, i) => row(i)),
);
