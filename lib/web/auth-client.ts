// Browser-side sign-in and sign-out against next-auth's endpoints (no next-auth/react needed).
import { sameOriginPath } from "./safe-callback.ts";

async function csrfToken(): Promise<string> {
  const res = await fetch("/api/auth/csrf", { credentials: "same-origin", cache: "no-store" });
  if (!res.ok) throw new Error("Could not start sign-in; reload the page and try again");
  const body = (await res.json()) as { csrfToken: string };
  return body.csrfToken;
}

function form(values: Record<string, string>): URLSearchParams {
  return new URLSearchParams(values);
}

const SIGN_IN_ERRORS: Record<string, string> = {
  CredentialsSignin: "Wrong email or password",
  OAuthAccountNotLinked:
    "That email already has an account, and your provider does not confirm the address is verified: sign in the way you signed up, then link the provider from your account settings",
  OAuthNoEmail: "Your provider did not share an email address",
  SignupClosed: "Sign-up is closed on this instance; ask an administrator for an account",
  AccessDenied: "Access denied",
  Configuration: "Sign-in is misconfigured on this server; check the server logs",
  TooManyAttempts: "Too many sign-in attempts; wait a little and try again",
  SignInUnavailable: "Sign-in is briefly unavailable; try again in a moment",
};

export function signInErrorMessage(code: string | null | undefined): string | undefined {
  if (!code) return undefined;
  // The code comes from the page's ?error=: "hasOwnProperty" must not find Object.prototype's (a
  // function the sign-in form's useState would call, and crash on), nor "constructor" an object.
  return Object.hasOwn(SIGN_IN_ERRORS, code) ? SIGN_IN_ERRORS[code] : "Sign-in failed; try again";
}

const LINK_ERRORS: Record<string, string> = {
  ProviderAccountInUse: "That account already signs in another Engram account; unlink it there first",
  LinkExpired: "The link request expired or its account is gone; start again from your settings",
};

/** Why linking a provider failed, from the link page's ?error= (a link error or a sign-in one). */
export function linkErrorMessage(code: string): string {
  return Object.hasOwn(LINK_ERRORS, code) ? LINK_ERRORS[code]! : (signInErrorMessage(code) ?? "Linking failed; try again");
}

/** Resolves to the URL to go to next; throws with a readable message on failure. */
export async function signInWithPassword(email: string, password: string, callbackUrl: string): Promise<string> {
  const res = await fetch("/api/auth/callback/credentials", {
    method: "POST",
    credentials: "same-origin",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: form({ email, password, csrfToken: await csrfToken(), callbackUrl, json: "true" }),
  });
  const body = (await res.json().catch(() => ({}))) as { url?: string; error?: { message?: string } };
  // 429 (too many failed attempts) and 503 (throttle unavailable) carry their own message.
  if ((res.status === 429 || res.status === 503) && body.error?.message) throw new Error(body.error.message);
  const url = body.url ? new URL(body.url, window.location.origin) : undefined;
  const error = url?.searchParams.get("error");
  if (!res.ok || !url || error) throw new Error(signInErrorMessage(error ?? "CredentialsSignin"));
  return sameOriginPath(url, window.location.origin) ?? "/hubs";
}

/**
 * Mails a sign-in code to the address (POST /v1/auth/email/request); throws with the server's reason
 * (a wait, e-mail sign-in off). Resolves to the code itself only on a development server that returns
 * it (ENGRAM_EMAIL_CODE_DEV_RETURN), where no mail may arrive.
 */
export async function requestEmailCode(email: string): Promise<string | undefined> {
  const res = await fetch("/v1/auth/email/request", {
    method: "POST",
    credentials: "omit",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ email }),
  });
  const body = (await res.json().catch(() => undefined)) as { data?: { dev_code?: string }; error?: { message?: string } } | undefined;
  if (res.ok) return body?.data?.dev_code;
  throw new Error(body?.error?.message ?? `The code could not be sent (${res.status})`);
}

/** Signs in with a mailed code (next-auth's "email-code" provider); resolves to the URL to go to next. */
export async function signInWithEmailCode(email: string, code: string, callbackUrl: string): Promise<string> {
  const res = await fetch("/api/auth/callback/email-code", {
    method: "POST",
    credentials: "same-origin",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: form({ email, code, csrfToken: await csrfToken(), callbackUrl, json: "true" }),
  });
  const body = (await res.json().catch(() => ({}))) as { url?: string };
  const url = body.url ? new URL(body.url, window.location.origin) : undefined;
  const error = url?.searchParams.get("error");
  if (error === "CredentialsSignin" || (!error && (!res.ok || !url))) throw new Error("The code is wrong or has expired; ask for a new one");
  if (error) throw new Error(signInErrorMessage(error));
  return sameOriginPath(url!, window.location.origin) ?? "/hubs";
}

/** Starts an OAuth sign-in: a real form POST so the browser follows the provider redirect. */
export async function signInWithProvider(provider: string, callbackUrl: string): Promise<void> {
  const token = await csrfToken();
  const element = document.createElement("form");
  element.method = "POST";
  element.action = `/api/auth/signin/${encodeURIComponent(provider)}`;
  for (const [name, value] of Object.entries({ csrfToken: token, callbackUrl })) {
    const input = document.createElement("input");
    input.type = "hidden";
    input.name = name;
    input.value = value;
    element.appendChild(input);
  }
  document.body.appendChild(element);
  element.submit();
}

export async function signOut(): Promise<void> {
  await fetch("/api/auth/signout", {
    method: "POST",
    credentials: "same-origin",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: form({ csrfToken: await csrfToken(), callbackUrl: "/sign-in", json: "true" }),
  });
  // A full load, not a client navigation: every cached view of the signed-in user must go.
  // eslint-disable-next-line @next/next/no-location-assign-relative-destination
  window.location.assign("/sign-in");
}

export async function signUpAccount(input: { email: string; name: string; password: string }): Promise<void> {
  const res = await fetch("/api/auth/sign-up", {
    method: "POST",
    credentials: "same-origin",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(input),
  });
  const body = (await res.json().catch(() => undefined)) as { error?: { message: string } } | undefined;
  if (!res.ok) throw new Error(body?.error?.message ?? `Sign-up failed (${res.status})`);
}
