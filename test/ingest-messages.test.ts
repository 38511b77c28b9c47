import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { messagesText, normalizeMessages, normalizePart, normalizeSystemInstructions, normalizeToolDefinitions } from "../src/ingest/messages";

setDefaultTimeout(60_000);

const messages = (value: unknown, role = "user") => normalizeMessages(value, role).messages;

describe("content blocks of each dialect become GenAI parts", () => {
  const cases: [string, unknown, unknown][] = [
    ["plain string", "hi", { type: "text", content: "hi" }],
    ["OpenAI text", { type: "text", text: "hi" }, { type: "text", content: "hi" }],
    ["OpenAI Responses input_text", { type: "input_text", text: "hi" }, { type: "text", content: "hi" }],
    ["OpenAI image_url", { type: "image_url", image_url: { url: "https://x/y.png" } }, { type: "uri", modality: "image", uri: "https://x/y.png" }],
    ["OpenAI Responses function_call", { type: "function_call", call_id: "c1", name: "f", arguments: '{"a":1}' }, { type: "tool_call", id: "c1", name: "f", arguments: { a: 1 } }],
    ["OpenAI Responses function_call_output", { type: "function_call_output", call_id: "c1", output: "done" }, { type: "tool_call_response", id: "c1", response: "done" }],
    ["Anthropic tool_use", { type: "tool_use", id: "t1", name: "f", input: { a: 1 } }, { type: "tool_call", id: "t1", name: "f", arguments: { a: 1 } }],
    ["Anthropic tool_result", { type: "tool_result", tool_use_id: "t1", content: "ok" }, { type: "tool_call_response", id: "t1", response: "ok" }],
    ["Anthropic thinking", { type: "thinking", thinking: "hmm" }, { type: "reasoning", content: "hmm" }],
    [
      "Anthropic base64 image",
      { type: "image", source: { type: "base64", media_type: "image/png", data: "iVBORw0K" } },
      { type: "blob", modality: "image", mime_type: "image/png", content: "iVBORw0K" },
    ],
    ["Vercel tool-call (v4 args)", { type: "tool-call", toolCallId: "v1", toolName: "f", args: { a: 1 } }, { type: "tool_call", id: "v1", name: "f", arguments: { a: 1 } }],
    ["Vercel tool-result (v4 result)", { type: "tool-result", toolCallId: "v1", result: 42 }, { type: "tool_call_response", id: "v1", response: 42 }],
    ["Vercel tool-result (v5 output)", { type: "tool-result", toolCallId: "v1", output: { type: "text", value: "sunny" } }, { type: "tool_call_response", id: "v1", response: "sunny" }],
    ["Vercel reasoning", { type: "reasoning", text: "because" }, { type: "reasoning", content: "because" }],
    ["Vercel file", { type: "file", data: "JVBERi0=", mediaType: "application/pdf" }, { type: "blob", modality: "file", mime_type: "application/pdf", content: "JVBERi0=" }],
    ["GenAI uri", { type: "uri", modality: "image", uri: "https://x/y.png" }, { type: "uri", modality: "image", uri: "https://x/y.png" }],
    ["unknown object without type", { foo: 1 }, { type: "generic", content: { foo: 1 } }],
  ];
  for (const [label, block, part] of cases) test(label, () => expect(normalizePart(block)).toEqual([part as never]));

  test("GenAI parts are kept as the same objects", () => {
    const part = { type: "tool_call", id: "c1", name: "f", arguments: { a: 1 } };
    expect(normalizePart(part)[0]).toBe(part);
  });

  test("tool arguments and results sent as JSON text become values, as from every other source", () => {
    expect(normalizePart({ type: "tool_call", id: "c1", name: "f", arguments: '{"a":1}' })).toEqual([{ type: "tool_call", id: "c1", name: "f", arguments: { a: 1 } }]);
    expect(normalizePart({ type: "tool_call_response", id: "c1", response: '{"temp":18}' })).toEqual([{ type: "tool_call_response", id: "c1", response: { temp: 18 } }]);
    expect(normalizePart({ type: "tool_call_response", id: "c1", response: "sunny" })).toEqual([{ type: "tool_call_response", id: "c1", response: "sunny" }]);
  });
});

describe("messages", () => {
  test("OpenAI chat messages with tool calls and tool results", () => {
    expect(
      messages([
        { role: "assistant", content: null, tool_calls: [{ id: "c1", type: "function", function: { name: "lookup", arguments: '{"id":1}' } }] },
        { role: "tool", tool_call_id: "c1", content: '{"found":true}' },
        { role: "user", name: "ada", content: "thanks" },
      ]),
    ).toEqual([
      { role: "assistant", parts: [{ type: "tool_call", id: "c1", name: "lookup", arguments: { id: 1 } }] },
      { role: "tool", parts: [{ type: "tool_call_response", id: "c1", response: { found: true } }] },
      { role: "user", parts: [{ type: "text", content: "thanks" }], name: "ada" },
    ]);
  });

  test("missing roles take the default; non-messages are dropped", () => {
    expect(messages([{ content: "x" }, 42, null], "assistant")).toEqual([{ role: "assistant", parts: [{ type: "text", content: "x" }] }]);
  });

  test("a single message object and a bare string", () => {
    expect(messages({ role: "user", content: "one" })).toEqual([{ role: "user", parts: [{ type: "text", content: "one" }] }]);
    expect(messages("not json")).toEqual([{ role: "user", parts: [{ type: "text", content: "not json" }] }]);
  });

  test("canonical JSON is kept as sent, anything else is serialized again", () => {
    const canonical = '[{"role":"user","parts":[{"type":"text","content":"hi"}]}]';
    expect(normalizeMessages(canonical, "user").json).toBe(canonical);
    expect(normalizeMessages('[{"role":"user","content":"hi"}]', "user").json).toBe(canonical);
    expect(normalizeMessages("[]", "user").json).toBe("");
  });

  test("plain text of the text parts only", () => {
    const list = messages([
      { role: "user", parts: [{ type: "text", content: "first" }, { type: "uri", uri: "https://x" }] },
      { role: "assistant", parts: [{ type: "reasoning", content: "hidden" }, { type: "text", content: "second" }] },
    ]);
    expect(messagesText(list)).toBe("first\nsecond");
  });
});

describe("system instructions", () => {
  test("JSON parts, plain text, and empty", () => {
    expect(normalizeSystemInstructions('[{"type":"text","content":"Be kind."}]')).toEqual([{ type: "text", content: "Be kind." }]);
    expect(normalizeSystemInstructions("Be kind.")).toEqual([{ type: "text", content: "Be kind." }]);
    expect(normalizeSystemInstructions(["Be kind.", "Be brief."])).toEqual([
      { type: "text", content: "Be kind." },
      { type: "text", content: "Be brief." },
    ]);
    expect(normalizeSystemInstructions("")).toEqual([]);
  });
});

describe("tool definitions", () => {
  test("every dialect becomes {name, description, parameters}", () => {
    const schema = { type: "object", properties: { q: { type: "string" } } };
    expect(
      normalizeToolDefinitions([
        { type: "function", function: { name: "chat_completions", description: "d1", parameters: schema } },
        { type: "function", name: "responses_api", description: "d2", parameters: schema },
        { name: "anthropic", description: "d3", input_schema: schema },
        JSON.stringify({ type: "function", name: "vercel", inputSchema: schema }),
        { type: "web_search_preview" },
        { description: "no name" },
      ]),
    ).toEqual([
      { name: "chat_completions", description: "d1", parameters: schema },
      { name: "responses_api", description: "d2", parameters: schema },
      { name: "anthropic", description: "d3", parameters: schema },
      { name: "vercel", description: "", parameters: schema },
      { name: "web_search_preview", description: "", parameters: null },
    ]);
  });

  test("a JSON string list and a JSON string schema", () => {
    expect(normalizeToolDefinitions('[{"name":"f","parameters":"{\\"type\\":\\"object\\"}"}]')).toEqual([{ name: "f", description: "", parameters: { type: "object" } }]);
  });
});
