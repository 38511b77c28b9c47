// Sends request bodies to an OTLP endpoint from a process of its own, so the receiver's process CPU
// is the ingest's alone. `bun run bench/post-bodies.ts <file> <url> <connections>`: the file holds the
// bodies, each after its length as a 4-byte big-endian number; headers come as JSON in POST_HEADERS.
import { readFileSync } from "node:fs";

const [file, url, connections] = process.argv.slice(2);
const data = readFileSync(file!);
const bodies: Buffer[] = [];
for (let at = 0; at < data.length; at += 4 + data.readUInt32BE(at)) bodies.push(data.subarray(at + 4, at + 4 + data.readUInt32BE(at)));
const headers = { "content-type": "application/x-protobuf", ...JSON.parse(process.env.POST_HEADERS ?? "{}") };
let next = 0;
const connection = async () => {
  while (next < bodies.length) {
    const res = await fetch(url!, { method: "POST", headers, body: bodies[next++] });
    if (!res.ok) throw new Error(`POST ${url} answered ${res.status}: ${await res.text()}`);
    await res.arrayBuffer();
  }
};
await Promise.all(Array.from({ length: Number(connections) }, connection));
