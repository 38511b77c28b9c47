// Decode and map throughput on ~4 KB GenAI spans, 100 per request: `bun run bench/decode.ts`.
import { decodeJson, decodeProtobuf, decodeProtobufWithProtobufjs, type DecodedTraces } from "../src/ingest/decode";
import { mapTraces } from "../src/ingest/map";
import { priceSpan } from "../src/ingest/price";
import { benchRequests } from "./decode-fixtures";

const REQUESTS = 300;
const SPANS_PER_REQUEST = 100;
const owner = { organizationId: "org", projectId: "project", apiKeyId: "key" };
const { protobuf, json } = benchRequests(REQUESTS, SPANS_PER_REQUEST);
const decodedOnce = decodeProtobuf(protobuf[0]);

const ROUNDS = 5;

/** Median of several rounds, each after a full collection: single runs swing ±50 % on small machines. */
function measure(label: string, run: (index: number) => number) {
  for (let i = 0; i < 30; i++) run(i);
  const rates: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    Bun.gc(true);
    const started = performance.now();
    let spans = 0;
    for (let i = 0; i < REQUESTS; i++) spans += run(i);
    rates.push(spans / ((performance.now() - started) / 1000));
  }
  const median = rates.sort((a, b) => a - b)[Math.floor(ROUNDS / 2)];
  console.log(`${label.padEnd(40)} ${Math.round(median).toLocaleString("en").padStart(9)} spans/s per core`);
}

const mapAndPrice = (traces: DecodedTraces) => mapTraces(traces, owner).map(priceSpan).length;

console.log(`${SPANS_PER_REQUEST} spans per request, ${Math.round(protobuf[0].byteLength / SPANS_PER_REQUEST)} B/span protobuf, ${Math.round(json[0].length / SPANS_PER_REQUEST)} B/span JSON`);
measure("decode protobuf (protobufjs)", (i) => decodeProtobufWithProtobufjs(protobuf[i]).spanCount);
measure("decode protobuf (decodeProtobuf)", (i) => decodeProtobuf(protobuf[i]).spanCount);
measure("decode JSON (decodeJson)", (i) => decodeJson(json[i]).spanCount);
measure("map + price", () => mapAndPrice(decodedOnce));
measure("decode protobuf + map + price", (i) => mapAndPrice(decodeProtobuf(protobuf[i])));
measure("decode JSON + map + price", (i) => mapAndPrice(decodeJson(json[i])));
