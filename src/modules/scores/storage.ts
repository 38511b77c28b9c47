import type { Context } from "../../context";
import { ScoreCopier } from "./copy";
import { ScoreStore } from "./store";

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
    storage = { store: new ScoreStore(ctx.sql, () => copier.kick()), copier };
    storages.set(ctx, storage);
    copier.start();
    ctx.onShutdown(() => copier.stop());
  }
  return storage;
}
