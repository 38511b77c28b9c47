import { createAnthropic } from "@ai-sdk/anthropic";
import { createOpenAI } from "@ai-sdk/openai";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import type { LanguageModel } from "ai";

/**
 * AI providers for prompt runs (and any other model call Vigil makes), configured the way each AI SDK
 * provider package is: `OPENAI_API_KEY` / `OPENAI_BASE_URL`, `ANTHROPIC_API_KEY` / `ANTHROPIC_BASE_URL`,
 * plus named OpenAI-compatible providers `CUSTOM_PROVIDER_<NAME>_BASE_URL` (and optional `_API_KEY`).
 * A prompt's front-matter `provider` names one: `openai`, `anthropic`, or a custom name.
 */
export type ProviderEnv = Record<string, string>;

/** The provider kinds the gateway client knows; every custom provider is `custom`. */
export type ProviderKind = "openai" | "anthropic" | "custom";

export interface ResolvedModel {
  model: LanguageModel;
  kind: ProviderKind;
  /** The provider name as traces record it (`gen_ai.provider.name`), which prices the run. */
  system: string;
}

/** The named provider is not configured, or no model was given. */
export class ProviderConfigError extends Error {}

const providerVariable = /^(OPENAI_(API_KEY|BASE_URL)|ANTHROPIC_(API_KEY|BASE_URL)|CUSTOM_PROVIDER_[A-Z0-9_]+_(BASE_URL|API_KEY))$/;

/** The provider variables of an environment: what `ProviderEnv` holds. */
export function providerEnv(env: Record<string, string | undefined>): ProviderEnv {
  return Object.fromEntries(Object.entries(env).filter((entry): entry is [string, string] => providerVariable.test(entry[0]) && !!entry[1]));
}

/** The variable prefix of a custom provider's name: `my-local` → `CUSTOM_PROVIDER_MY_LOCAL_`. */
export const customProviderPrefix = (name: string) => `CUSTOM_PROVIDER_${name.toUpperCase().replace(/[^A-Z0-9]+/g, "_")}_`;

/** Resolves a provider name and model to an AI SDK language model; provider instances are made once. */
export class ProviderResolver {
  private providers = new Map<string, { kind: ProviderKind; system: string; model: (id: string) => LanguageModel }>();

  constructor(private env: ProviderEnv) {}

  /** Throws ProviderConfigError naming what is missing. */
  resolve(providerName: string, modelId: string): ResolvedModel {
    if (!providerName) throw new ProviderConfigError("The prompt names no provider: set `provider` in its front-matter");
    if (!modelId) throw new ProviderConfigError(`The prompt names no model for provider "${providerName}": set \`model\` in its front-matter`);
    const provider = this.provider(providerName);
    return { model: provider.model(modelId), kind: provider.kind, system: provider.system };
  }

  /** Whether `providerName` is configured, and as what kind. */
  kindOf(providerName: string): ProviderKind | null {
    try {
      return this.provider(providerName).kind;
    } catch {
      return null;
    }
  }

  private provider(name: string) {
    const key = name.toLowerCase();
    const known = this.providers.get(key);
    if (known) return known;
    const made = this.make(key, name);
    this.providers.set(key, made);
    return made;
  }

  private make(key: string, name: string) {
    const env = this.env;
    if (key === "openai") {
      if (!env.OPENAI_API_KEY && !env.OPENAI_BASE_URL) throw new ProviderConfigError('Provider "openai" is not configured: set OPENAI_API_KEY (and OPENAI_BASE_URL for a compatible endpoint)');
      const openai = createOpenAI({ apiKey: env.OPENAI_API_KEY ?? "none", baseURL: env.OPENAI_BASE_URL });
      // Chat Completions: the API every OpenAI-compatible endpoint also serves.
      return { kind: "openai" as const, system: "openai", model: (id: string) => openai.chat(id) };
    }
    if (key === "anthropic") {
      if (!env.ANTHROPIC_API_KEY) throw new ProviderConfigError('Provider "anthropic" is not configured: set ANTHROPIC_API_KEY');
      const anthropic = createAnthropic({ apiKey: env.ANTHROPIC_API_KEY, baseURL: env.ANTHROPIC_BASE_URL });
      return { kind: "anthropic" as const, system: "anthropic", model: (id: string) => anthropic(id) };
    }
    const prefix = customProviderPrefix(name);
    const baseURL = env[`${prefix}BASE_URL`];
    if (!baseURL) throw new ProviderConfigError(`Provider "${name}" is not configured: set ${prefix}BASE_URL (and ${prefix}API_KEY if it needs one), or use openai or anthropic`);
    const custom = createOpenAICompatible({ name: key, baseURL, apiKey: env[`${prefix}API_KEY`], includeUsage: true });
    return { kind: "custom" as const, system: key, model: (id: string) => custom.chatModel(id) };
  }
}
