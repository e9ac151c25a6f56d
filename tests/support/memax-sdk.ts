import { ensureMemaxClients } from "./memax-build.ts";
import { dispatch } from "./router.ts";

/**
 * Memax's SDK, built once by its own script from its sources (`../shared/clients/memax`, or
 * MEMAX_CLIENTS_DIR); an earlier complete build is reused (memax-build.ts). Returns the SDK's entry
 * file. The global setup calls it before any test starts, so a missing checkout of the clients is one clear line.
 */
export function ensureMemaxSdk(): string {
  return ensureMemaxClients().sdk;
}

export async function loadMemaxSdk(): Promise<any> {
  return import(ensureMemaxSdk());
}

/** A fetch that hands requests to the route handlers (what the SDK talks to in these tests). */
export const routeFetch: typeof fetch = async (input, init) => {
  const req = input instanceof Request ? input : new Request(String(input), init);
  return dispatch(req);
};
