import { generateText, type LanguageModel } from "ai";
import type { Config } from "../../config";
import { ProviderResolver } from "../../gateway/providers";

/**
 * The language model signals use (flagger and custom-signal judges, signal names), or null when no
 * provider is configured: the gateway's provider named by SIGNALS_JUDGE_PROVIDER (default `openai`,
 * configured by OPENAI_API_KEY / OPENAI_BASE_URL) with the model SIGNALS_JUDGE_MODEL.
 */
export function signalsLanguageModel(config: Pick<Config, "providers" | "signals">): LanguageModel | null {
  const resolver = new ProviderResolver(config.providers);
  if (!resolver.kindOf(config.signals.judgeProvider)) return null;
  return resolver.resolve(config.signals.judgeProvider, config.signals.judgeModel).model;
}

export interface JudgeVerdict {
  failed: boolean;
  reason: string;
}

/** Characters of a conversation a judge reads at most. */
const judgeTranscriptChars = 24_000;

/** A long conversation's first third and last two thirds of what the judge reads: how it went, and how it ended. */
function judgeExcerpt(transcript: string): string {
  if (transcript.length <= judgeTranscriptChars) return transcript;
  const head = transcript.slice(0, judgeTranscriptChars / 3);
  const tail = transcript.slice(transcript.length - (judgeTranscriptChars * 2) / 3);
  return `${head}\n[… ${transcript.length - head.length - tail.length} characters left out …]\n${tail}`;
}

/**
 * Asks the model whether a conversation shows the failure the criteria describe. The model answers
 * with a JSON object `{failed, reason}`; anything else counts as not failed, with the answer as reason.
 */
export async function judge(model: LanguageModel, criteria: string, transcript: string): Promise<JudgeVerdict> {
  const { text } = await generateText({
    model,
    temperature: 0,
    maxRetries: 1,
    system:
      "You review a conversation between a user and an AI agent. Decide whether it shows the failure described by the criteria. " +
      'Answer with only a JSON object: {"failed": true|false, "reason": "<one sentence quoting the evidence>"}.',
    prompt: `Criteria:\n${criteria}\n\nConversation:\n${judgeExcerpt(transcript)}`,
  });
  const json = text.slice(text.indexOf("{"), text.lastIndexOf("}") + 1);
  try {
    const parsed = JSON.parse(json) as { failed?: unknown; reason?: unknown };
    return { failed: parsed.failed === true, reason: typeof parsed.reason === "string" ? parsed.reason : "" };
  } catch {
    return { failed: false, reason: text.slice(0, 500) };
  }
}

/** A short name and a one-sentence description for a signal, from its members' feedback. */
export async function nameSignal(model: LanguageModel, feedback: string[]): Promise<{ name: string; description: string } | null> {
  const { text } = await generateText({
    model,
    temperature: 0,
    maxRetries: 1,
    system:
      "You name a recurring failure of an AI agent from reviewers' feedback. " +
      'Answer with only a JSON object: {"name": "<at most 8 words>", "description": "<one sentence>"}.',
    prompt: feedback.map((text, index) => `${index + 1}. ${text.slice(0, 2000)}`).join("\n"),
  });
  try {
    const parsed = JSON.parse(text.slice(text.indexOf("{"), text.lastIndexOf("}") + 1)) as { name?: unknown; description?: unknown };
    if (typeof parsed.name !== "string" || !parsed.name.trim()) return null;
    return { name: parsed.name.trim().slice(0, 120), description: typeof parsed.description === "string" ? parsed.description.trim() : "" };
  } catch {
    return null;
  }
}
