"use client";

import { useCallback, useState } from "react";

/**
 * Busy and error state of one user action (a form submit, a confirm): clears
 * the last error, marks the control busy, runs the action and keeps what it
 * threw for `ErrorNotice`. After a success that navigates away the control
 * stays busy, so it cannot be submitted twice on the way out.
 */
export function useAction(initialError?: unknown) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(initialError);
  const run = useCallback(async (action: () => Promise<void>, options: { navigates?: boolean } = {}) => {
    setBusy(true);
    setError(undefined);
    try {
      await action();
      if (!options.navigates) setBusy(false);
    } catch (caught) {
      setError(caught);
      setBusy(false);
    }
  }, []);
  return { busy, error, run };
}
