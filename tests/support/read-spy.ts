/**
 * The database, with every value its reads hand back (the models' findMany/findFirst/findUnique and
 * raw queries) also pushed onto `seen`: the queries run as they are, only their results are watched.
 * For tests that check how much a function reads, not what it answers.
 */
export function readSpy<T extends object>(db: T, seen: unknown[]): T {
  const wrap = (target: object, name: string | symbol) => {
    const real = Reflect.get(target, name) as unknown;
    if (typeof real !== "function") return real;
    return async (...args: unknown[]) => {
      const result = await (real as (...a: unknown[]) => Promise<unknown>).apply(target, args);
      seen.push(result);
      return result;
    };
  };
  return new Proxy(db, {
    get(target, key) {
      if (key === "$queryRaw" || key === "$queryRawUnsafe") return wrap(target, key);
      const model = Reflect.get(target, key) as unknown;
      if (typeof model === "function") return (model as (...a: unknown[]) => unknown).bind(target);
      if (typeof key !== "string" || key.startsWith("$") || typeof model !== "object" || model === null) return model;
      return new Proxy(model, { get: (m, method) => (method === "findMany" || method === "findFirst" || method === "findUnique" ? wrap(m, method) : Reflect.get(m, method)) });
    },
  });
}

/** The length of the longest string holding `marker` anywhere in `value` (0 when none does). */
export function longestWith(value: unknown, marker: string): number {
  if (typeof value === "string") return value.includes(marker) ? value.length : 0;
  if (Array.isArray(value)) return Math.max(0, ...value.map((v) => longestWith(v, marker)));
  if (value && typeof value === "object" && !(value instanceof Date)) return Math.max(0, ...Object.values(value).map((v) => longestWith(v, marker)));
  return 0;
}
