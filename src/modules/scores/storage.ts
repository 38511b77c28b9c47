import type { Context } from "../../context";
import { ScoreCopier } from "./copy";
import { realignAfterScoreWrite } from "../signals/alignment";
import { type ScoreRecord, ScoreStore } from "./store";

export interface ScoreStorage {
  store: ScoreStore;
  copier: ScoreCopier;
}

const storages = new WeakMap<Context, ScoreStorage>();

/**
 * The score store and its ClickHouse copier for one running Vigil, shared by the scores and
 * annotations modules: the copier starts with the first use and stops at shutdown.
 */
export function scoreStorage(ctx: Context): ScoreStorage {
  let storage = storages.get(ctx);
  if (!storage) {
    const copier = new ScoreCopier(ctx.sql, ctx.ch, ctx.log.child({ component: "score-copy" }));
    const log = ctx.log.child({ component: "scores" });
    const committed = async (score: ScoreRecord) => {
      copier.kick();
      // The write itself is committed; a failed recount is repaired by the alignment job.
      await realignAfterScoreWrite(ctx.sql, score).catch((error) => log.warn("alignment recount failed", { scoreId: score.id, error: error as Error }));
    };
    storage = { store: new ScoreStore(ctx.sql, committed), copier };
    storages.set(ctx, storage);
    copier.start();
    ctx.onShutdown(() => copier.stop());
  }
  return storage;
}
