/** Client-side calls to the /v1 API with the browser session; errors carry the API's message. */
export class ApiClientError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details?: Record<string, unknown>,
  ) {
    super(message);
    this.name = "ApiClientError";
  }
}

export interface ApiOptions {
  method?: "GET" | "POST" | "PATCH" | "PUT" | "DELETE";
  body?: unknown;
  /** Sent as X-Hub-ID: the hub a memory write targets. */
  hubId?: string;
  signal?: AbortSignal;
  /** Public endpoints (the invite page) must not bounce to sign-in on 401. */
  noRedirect?: boolean;
}

export function signInUrl(callbackUrl?: string): string {
  const back = callbackUrl ?? (typeof window === "undefined" ? "/" : `${window.location.pathname}${window.location.search}`);
  return `/sign-in?callbackUrl=${encodeURIComponent(back)}`;
}

/**
 * A path with every interpolated value encoded as one path segment: `apiPath\`/v1/hubs/${hubId}/invites\``.
 * A hub id comes from the page's address, which anyone can craft: raw, `x/../../memories` or `x?y`
 * sent the signed-in browser's request to another endpoint than the page meant.
 */
export function apiPath(strings: TemplateStringsArray, ...values: string[]): string {
  return strings.reduce((path, part, i) => path + part + (i < values.length ? encodeURIComponent(values[i]!) : ""), "");
}

export async function api<T>(path: string, options: ApiOptions = {}): Promise<T> {
  const headers: Record<string, string> = { accept: "application/json" };
  if (options.body !== undefined) headers["content-type"] = "application/json";
  if (options.hubId) headers["x-hub-id"] = options.hubId;
  let res: Response;
  try {
    res = await fetch(path, {
      method: options.method ?? "GET",
      headers,
      body: options.body === undefined ? undefined : JSON.stringify(options.body),
      credentials: "same-origin",
      cache: "no-store",
      signal: options.signal,
    });
  } catch (error) {
    if ((error as Error).name === "AbortError") throw error;
    throw new ApiClientError(0, "network", "Could not reach the Engram server; check your connection and try again");
  }
  let payload: { data?: T; error?: { code: string; message: string; details?: Record<string, unknown> } } | undefined;
  try {
    payload = await res.json();
  } catch {
    payload = undefined;
  }
  if (!res.ok || !payload || payload.error) {
    const error = payload?.error;
    if (res.status === 401 && !options.noRedirect && typeof window !== "undefined") window.location.assign(signInUrl());
    throw new ApiClientError(res.status, error?.code ?? "http_error", error?.message ?? `The server answered ${res.status}`, error?.details);
  }
  return payload.data as T;
}

export function errorMessage(error: unknown): string {
  if (error instanceof Error) return error.message;
  return "Something went wrong";
}
