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

/** Loads a GET endpoint (null: nothing yet) and keeps its data, error and loading state. */
export function useApi<T>(path: string | null): ApiState<T> {
  const [data, setDataState] = useState<T>();
  const [error, setError] = useState<Error>();
  const [version, setVersion] = useState(0);
  // Loading is "the last settled request is not the current one", so no state is set inside the effect body.
  const [settled, setSettled] = useState<string>();
  const key = path === null ? null : `${version}:${path}`;

  useEffect(() => {
    if (path === null || key === null) return;
    const controller = new AbortController();
    api<T>(path, { signal: controller.signal })
      .then((result) => {
        setDataState(result);
        setError(undefined);
        setSettled(key);
      })
      .catch((caught: Error) => {
        if (caught.name === "AbortError") return;
        setError(caught);
        setSettled(key);
      });
    return () => controller.abort();
  }, [path, key]);

  const reload = useCallback(() => setVersion((v) => v + 1), []);
  const setData = useCallback((update: (current: T | undefined) => T | undefined) => setDataState(update), []);
  return { data, error, loading: key !== null && settled !== key, reload, setData };
}
