/**
 * A local OpenAI-compatible chat completions provider for instrumentation tests: answers with a tool call when
 * the request offers tools and holds no tool result yet, else with text; streams chunks (with a final usage chunk
 * when `stream_options.include_usage` is set) or answers in one body. Every request body is kept for assertions.
 */
export const FAKE_USAGE = { prompt_tokens: 120, completion_tokens: 30, total_tokens: 150, prompt_tokens_details: { cached_tokens: 20 }, completion_tokens_details: { reasoning_tokens: 10 } };
export const FAKE_ANSWER = "It is 18 degrees and sunny in Paris.";
export const FAKE_TOOL_CALL = { id: "call_weather_1", name: "get_weather", arguments: '{"city":"Paris"}' };
export const FAKE_RESPONSE_MODEL = "gpt-4o-mini-2024-07-18";

export interface FakeOpenAI {
  url: string;
  requests: Record<string, unknown>[];
  stop(): void;
}

interface ChatRequest {
  model?: string;
  stream?: boolean;
  stream_options?: { include_usage?: boolean };
  tools?: unknown[];
  messages?: { role: string }[];
}

export function startFakeOpenAI(): FakeOpenAI {
  const requests: Record<string, unknown>[] = [];
  const server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    async fetch(request) {
      const url = new URL(request.url);
      if (!url.pathname.endsWith("/chat/completions")) return Response.json({ error: { message: `no route ${url.pathname}` } }, { status: 404 });
      const body = (await request.json()) as ChatRequest;
      requests.push(body as Record<string, unknown>);
      const callsTool = (body.tools?.length ?? 0) > 0 && !body.messages?.some((message) => message.role === "tool");
      const id = `chatcmpl-${requests.length}`;
      const created = Math.floor(Date.now() / 1000);
      const finishReason = callsTool ? "tool_calls" : "stop";
      const toolCalls = [{ index: 0, id: FAKE_TOOL_CALL.id, type: "function", function: { name: FAKE_TOOL_CALL.name, arguments: FAKE_TOOL_CALL.arguments } }];
      if (!body.stream) {
        const message = callsTool ? { role: "assistant", content: null, tool_calls: toolCalls.map(({ index: _, ...call }) => call) } : { role: "assistant", content: FAKE_ANSWER };
        return Response.json({ id, object: "chat.completion", created, model: FAKE_RESPONSE_MODEL, choices: [{ index: 0, message, finish_reason: finishReason }], usage: FAKE_USAGE });
      }
      const chunk = (choices: unknown[], extra: Record<string, unknown> = {}) =>
        `data: ${JSON.stringify({ id, object: "chat.completion.chunk", created, model: FAKE_RESPONSE_MODEL, choices, ...extra })}\n\n`;
      const events: string[] = [chunk([{ index: 0, delta: { role: "assistant", content: "" }, finish_reason: null }])];
      if (callsTool) events.push(chunk([{ index: 0, delta: { tool_calls: toolCalls }, finish_reason: null }]));
      else for (const word of FAKE_ANSWER.split(/(?<= )/)) events.push(chunk([{ index: 0, delta: { content: word }, finish_reason: null }]));
      events.push(chunk([{ index: 0, delta: {}, finish_reason: finishReason }]));
      if (body.stream_options?.include_usage) events.push(chunk([], { usage: FAKE_USAGE }));
      events.push("data: [DONE]\n\n");
      const encoder = new TextEncoder();
      const stream = new ReadableStream({
        async start(controller) {
          for (const event of events) {
            controller.enqueue(encoder.encode(event));
            await Bun.sleep(2);
          }
          controller.close();
        },
      });
      return new Response(stream, { headers: { "content-type": "text/event-stream" } });
    },
  });
  return { url: `http://127.0.0.1:${server.port}/v1`, requests, stop: () => server.stop(true) };
}
