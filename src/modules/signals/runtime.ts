import type { Context } from "../../context";
import { EmbeddingsClient } from "../traces/embeddings";
import { SignalDiscovery } from "./discovery";
import { FeedbackEmbedder } from "./embedding";
import { signalsLanguageModel } from "./llm";

export interface SignalsRuntime {
  discovery: SignalDiscovery;
  embedder: FeedbackEmbedder;
}

const runtimes = new WeakMap<Context, SignalsRuntime>();

/** The discovery worker and its embedder for one running Vigil, shared by the routes and the jobs. */
export function signalsRuntime(ctx: Context): SignalsRuntime {
  let runtime = runtimes.get(ctx);
  if (!runtime) {
    const embedder = new FeedbackEmbedder(ctx.config.embeddings ? new EmbeddingsClient(ctx.config.embeddings) : null);
    const log = ctx.log.child({ component: "signals" });
    runtime = { embedder, discovery: new SignalDiscovery(ctx.sql, embedder, signalsLanguageModel(ctx.config), log) };
    runtimes.set(ctx, runtime);
    log.info("signal discovery embeddings", { mode: embedder.mode });
  }
  return runtime;
}
