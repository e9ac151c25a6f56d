"use client";

import { useCallback, useEffect, useState } from "react";
import { api } from "./api.ts";

export interface ApiState<T> {
  data: T | undefined;
  error: Error | undefined;
  loading: boolean;
  reload: () => void;
  setData: (update: (current: T | undefined) => T | undefined) => void;
}

/**
 * Requests started during render, keyed by reload version and path. Starting at render
 * rather than in the effect lets the request overlap hydration, which on a first page
 * load is most of the wait.
 */
const inflight = new Map<string, Promise<unknown>>();

function request<T>(key: string, path: string): Promise<T> {
  let pending = inflight.get(key) as Promise<T> | undefined;
  if (!pending) {
    pending = api<T>(path);
    pending.catch(() => undefined);
    inflight.set(key, pending);
  }
  return pending;
}

/**
 * Loads a GET endpoint (null: nothing yet) and keeps its data, error and loading state.
 * `initial`: the first path's data as the server already read it (lib/web/prefetch.ts); the
 * first render then needs no request, and reloads and other paths fetch as usual.
 */
export function useApi<T>(path: string | null, initial?: T): ApiState<T> {
  const [data, setDataState] = useState<T | undefined>(initial);
  const [error, setError] = useState<Error>();
  const [version, setVersion] = useState(0);
  const key = path === null ? null : `${version}:${path}`;
  // Loading is "the last settled request is not the current one", so no state is set inside the effect body.
  const [prefetched] = useState(initial !== undefined && key !== null ? key : undefined);
  const [settled, setSettled] = useState<string | undefined>(prefetched);

  if (typeof window !== "undefined" && path !== null && key !== null && settled !== key) request<T>(key, path);

  useEffect(() => {
    if (path === null || key === null || key === prefetched) return;
    let current = true;
    request<T>(key, path)
      .then((result) => {
        if (!current) return;
        setDataState(result);
        setError(undefined);
        setSettled(key);
      })
      .catch((caught: Error) => {
        if (!current) return;
        setError(caught);
        setSettled(key);
      })
      .finally(() => inflight.delete(key));
    return () => {
      current = false;
    };
  }, [path, key, prefetched]);

  const reload = useCallback(() => setVersion((v) => v + 1), []);
  const setData = useCallback((update: (current: T | undefined) => T | undefined) => setDataState(update), []);
  return { data, error, loading: key !== null && settled !== key, reload, setData };
}
