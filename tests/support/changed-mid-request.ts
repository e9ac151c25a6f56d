import type { AuthContext } from "@/lib/api/context.ts";
import type { Harness } from "./harness.ts";

type Db = Harness["db"];
type Person = { id: string; email: string; name: string };

/**
 * The harness's database, but `change` runs once, right before the first call of one of `points`
 * (`"$transaction"`, `"customBoard.findFirst"`, or `"dreamRun.*"` for every method of a model): as
 * another request's demotion or removal would commit between a function's permission check and its
 * write. The database is the real one throughout; only the timing is arranged.
 */
export function changedBefore(db: Db, points: string[], change: () => Promise<unknown>): Db {
  let changed = false;
  const once = async () => {
    if (changed) return;
    changed = true;
    await change();
  };
  const wrap = (target: object, name: string | symbol) => {
    const real = Reflect.get(target, name) as unknown;
    return typeof real === "function" ? async (...args: unknown[]) => (await once(), (real as (...a: unknown[]) => unknown).apply(target, args)) : real;
  };
  return new Proxy(db, {
    get(target, key) {
      if (typeof key !== "string") return Reflect.get(target, key);
      if (points.includes(key)) return wrap(target, key);
      const methods = points.filter((point) => point.startsWith(`${key}.`)).map((point) => point.slice(key.length + 1));
      if (methods.length === 0) return Reflect.get(target, key);
      return new Proxy(Reflect.get(target, key) as object, {
        get: (model, method) => (typeof method === "string" && (methods.includes(method) || methods.includes("*")) ? wrap(model, method) : Reflect.get(model, method)),
      });
    },
  });
}

/** A signed-in session's context for calling a domain function directly, as `who`, on `db`. */
export function sessionContext(h: Harness, who: Person, db: Db = h.db): AuthContext {
  return {
    db,
    sql: h.database.sql,
    dbKind: h.database.kind,
    requestId: "test",
    now: () => new Date(),
    user: { id: who.id, email: who.email, name: who.name },
    credential: { type: "session", scopes: ["read", "write"], hubIds: null },
  } as unknown as AuthContext;
}
