/**
 * A local OpenAI-compatible provider for gateway tests and the benchmark: Chat Completions streamed
 * or not, with usage, tool calls, JSON answers and a slow mode; it records every request and abort.
 */
export interface FakeProvider {
  url: string;
  requests: { body: Record<string, any>; aborted: boolean; chunksSent: number }[];
  stop(): void;
}

export interface FakeProviderOptions {
  /** Delay between streamed chunks in slow mode (a user message containing "slow"). */
  slowChunkMs?: number;
}

const usage = { prompt_tokens: 12, completion_tokens: 7, total_tokens: 19 };

type Message = { role: string; content?: unknown; tool_calls?: unknown[] };
const textOf = (message: Message | undefined) =>
  typeof message?.content === "string" ? message.content : Array.isArray(message?.content) ? message.content.map((p: any) => p.text ?? "").join("") : "";

/** What to answer: text chunks, or a tool call. */
function answer(body: Record<string, any>): { chunks: string[]; toolCall?: { name: string; arguments: string }; slow: boolean } {
  const messages: Message[] = body.messages ?? [];
  const lastUser = textOf([...messages].reverse().find((m) => m.role === "user"));
  const lastTool = [...messages].reverse().find((m) => m.role === "tool");
  if (lastTool && messages.at(-1)?.role === "tool") return { chunks: ["Tool said: ", textOf(lastTool)], slow: false };
  if (body.tools?.length) return { chunks: [], toolCall: { name: body.tools[0].function.name, arguments: JSON.stringify({ city: "Paris" }) }, slow: false };
  if (body.response_format?.type === "json_schema" || body.response_format?.type === "json_object") return { chunks: ['{"answer":', "42}"], slow: false };
  if (lastUser.includes("slow")) return { chunks: Array.from({ length: 200 }, (_, i) => `w${i} `), slow: true };
  return { chunks: ["Hello", ", ", lastUser || "world"], slow: false };
}

export function startFakeProvider(options: FakeProviderOptions = {}): FakeProvider {
  const requests: FakeProvider["requests"] = [];
  const server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    idleTimeout: 0,
    async fetch(request) {
      if (!new URL(request.url).pathname.endsWith("/chat/completions")) return new Response("not found", { status: 404 });
      const body = (await request.json()) as Record<string, any>;
      const record = { body, aborted: false, chunksSent: 0 };
      requests.push(record);
      request.signal.addEventListener("abort", () => (record.aborted = true));
      const { chunks, toolCall, slow } = answer(body);
      const model = body.model;
      if (!body.stream) {
        const message = toolCall
          ? { role: "assistant", content: null, tool_calls: [{ id: "call_1", type: "function", function: toolCall }] }
          : { role: "assistant", content: chunks.join("") };
        return Response.json({ id: "c1", object: "chat.completion", created: 0, model, choices: [{ index: 0, message, finish_reason: toolCall ? "tool_calls" : "stop" }], usage });
      }
      const encoder = new TextEncoder();
      const chunk = (delta: object, finish: string | null) =>
        encoder.encode(`data: ${JSON.stringify({ id: "c1", object: "chat.completion.chunk", created: 0, model, choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`);
      const stream = new ReadableStream<Uint8Array>({
        async start(controller) {
          try {
            controller.enqueue(chunk({ role: "assistant", content: "" }, null));
            if (toolCall) controller.enqueue(chunk({ tool_calls: [{ index: 0, id: `call_${requests.length}`, type: "function", function: toolCall }] }, null));
            for (const text of chunks) {
              if (record.aborted) return;
              if (slow) await Bun.sleep(options.slowChunkMs ?? 50);
              controller.enqueue(chunk({ content: text }, null));
              record.chunksSent++;
            }
            controller.enqueue(chunk({}, toolCall ? "tool_calls" : "stop"));
            controller.enqueue(encoder.encode(`data: ${JSON.stringify({ id: "c1", object: "chat.completion.chunk", created: 0, model, choices: [], usage })}\n\n`));
            controller.enqueue(encoder.encode("data: [DONE]\n\n"));
            controller.close();
          } catch {
            record.aborted = true;
          }
        },
        cancel() {
          record.aborted = true;
        },
      });
      return new Response(stream, { headers: { "content-type": "text/event-stream" } });
    },
  });
  return { url: `http://127.0.0.1:${server.port}/v1`, requests, stop: () => server.stop(true) };
}
