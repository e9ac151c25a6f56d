"use client";

import Link from "next/link";
import { useState } from "react";
import { useAction } from "@/lib/web/use-action.ts";
import {
  linkErrorMessage,
  requestEmailCode,
  signInErrorMessage,
  signInWithEmailCode,
  signInWithPassword,
  signInWithProvider,
  signUpAccount,
} from "@/lib/web/auth-client.ts";
import { Button, ErrorNotice, TextInput } from "./ui.tsx";

interface Provider {
  id: string;
  name: string;
}

function AuthCard({ title, children }: { title: string; children: React.ReactNode }) {
  return (
    <main className="flex min-h-screen items-start justify-center px-4 py-12 sm:items-center">
      <div className="w-full max-w-sm rounded-xl border border-slate-200 bg-white p-6 shadow-sm">
        <p className="mb-1 text-lg font-semibold text-indigo-700">Engram</p>
        <h1 className="mb-5 text-2xl font-semibold">{title}</h1>
        {children}
      </div>
    </main>
  );
}

function ProviderButtons({ providers, callbackUrl }: { providers: Provider[]; callbackUrl: string }) {
  if (providers.length === 0) return null;
  return (
    <div className="mt-5 flex flex-col gap-2 border-t border-slate-200 pt-5">
      {providers.map((provider) => (
        <Button key={provider.id} onClick={() => signInWithProvider(provider.id, callbackUrl)}>
          Continue with {provider.name}
        </Button>
      ))}
    </div>
  );
}

/** Address → a mailed code (POST /v1/auth/email/request) → signed in with it. */
function EmailCodeForm({ callbackUrl }: { callbackUrl: string }) {
  const [email, setEmail] = useState("");
  const [code, setCode] = useState("");
  const [sentTo, setSentTo] = useState<string>();
  const { busy, error, run } = useAction();
  if (!sentTo) {
    return (
      <form
        className="flex flex-col gap-4"
        onSubmit={async (event) => {
          event.preventDefault();
          await run(async () => {
            // A development server answers with the code (it may mail none): filled in for the person.
            setCode((await requestEmailCode(email)) ?? "");
            setSentTo(email);
          });
        }}
      >
        <TextInput label="Email" type="email" autoComplete="email" required value={email} onChange={(e) => setEmail(e.target.value)} />
        <ErrorNotice error={error} />
        <Button type="submit" variant="primary" busy={busy}>
          Send code
        </Button>
      </form>
    );
  }
  return (
    <form
      className="flex flex-col gap-4"
      onSubmit={async (event) => {
        event.preventDefault();
        await run(async () => window.location.assign(await signInWithEmailCode(sentTo, code, callbackUrl)), { navigates: true });
      }}
    >
      <p className="text-sm text-slate-600">We sent a six-digit code to {sentTo}. It works once, for 10 minutes.</p>
      <TextInput
        label="Code"
        inputMode="numeric"
        autoComplete="one-time-code"
        pattern="[0-9]{6}"
        maxLength={6}
        required
        value={code}
        onChange={(e) => setCode(e.target.value.trim())}
      />
      <ErrorNotice error={error} />
      <Button type="submit" variant="primary" busy={busy}>
        Sign in
      </Button>
      <button
        type="button"
        className="text-left text-sm text-indigo-700 underline"
        onClick={() => {
          setSentTo(undefined);
          setCode("");
        }}
      >
        Use another address or send a new code
      </button>
    </form>
  );
}

export function SignInForm({
  callbackUrl,
  initialError,
  providers,
  signUpOpen,
  emailCode = false,
  initialProvider,
}: {
  callbackUrl: string;
  initialError?: string;
  providers: Provider[];
  signUpOpen: boolean;
  /** E-mail sign-in is on (SMTP): the form offers a mailed code beside the password. */
  emailCode?: boolean;
  /** The provider hint of the link (`?provider=email`, Memax's providerLoginURL): the form opens on it. */
  initialProvider?: string;
}) {
  const [email, setEmail] = useState("");
  const [password, setPassword] = useState("");
  const [byCode, setByCode] = useState(emailCode && initialProvider === "email");
  const { busy, error, run } = useAction(signInErrorMessage(initialError));
  return (
    <AuthCard title="Sign in">
      {byCode ? (
        <EmailCodeForm callbackUrl={callbackUrl} />
      ) : (
        <form
          className="flex flex-col gap-4"
          onSubmit={async (event) => {
            event.preventDefault();
            await run(async () => window.location.assign(await signInWithPassword(email, password, callbackUrl)), { navigates: true });
          }}
        >
          <TextInput label="Email" type="email" autoComplete="email" required value={email} onChange={(e) => setEmail(e.target.value)} />
          <TextInput
            label="Password"
            type="password"
            autoComplete="current-password"
            required
            value={password}
            onChange={(e) => setPassword(e.target.value)}
          />
          <ErrorNotice error={error} />
          <Button type="submit" variant="primary" busy={busy}>
            Sign in
          </Button>
        </form>
      )}
      {emailCode && (
        <button type="button" className="mt-4 text-sm text-indigo-700 underline" onClick={() => setByCode(!byCode)}>
          {byCode ? "Sign in with a password" : "Sign in with an e-mail code"}
        </button>
      )}
      <ProviderButtons providers={providers} callbackUrl={callbackUrl} />
      <p className="mt-5 text-sm text-slate-600">
        {signUpOpen ? (
          <>
            New here?{" "}
            <Link className="text-indigo-700 underline" href={`/sign-up?callbackUrl=${encodeURIComponent(callbackUrl)}`}>
              Create an account
            </Link>
          </>
        ) : (
          "Sign-up is closed on this instance; ask an administrator for an account."
        )}
      </p>
    </AuthCard>
  );
}

export function SignUpForm({ callbackUrl, providers, open }: { callbackUrl: string; providers: Provider[]; open: boolean }) {
  const [name, setName] = useState("");
  const [email, setEmail] = useState("");
  const [password, setPassword] = useState("");
  const { busy, error, run } = useAction();
  if (!open) {
    return (
      <AuthCard title="Sign-up is closed">
        <p className="text-sm text-slate-600">This Engram instance does not accept new accounts. Ask an administrator to create one for you.</p>
        <p className="mt-4 text-sm">
          <Link className="text-indigo-700 underline" href={`/sign-in?callbackUrl=${encodeURIComponent(callbackUrl)}`}>
            Sign in
          </Link>
        </p>
      </AuthCard>
    );
  }
  return (
    <AuthCard title="Create your account">
      <form
        className="flex flex-col gap-4"
        onSubmit={async (event) => {
          event.preventDefault();
          await run(
            async () => {
              await signUpAccount({ name, email, password });
              window.location.assign(await signInWithPassword(email, password, callbackUrl));
            },
            { navigates: true },
          );
        }}
      >
        <TextInput label="Name" autoComplete="name" required maxLength={100} value={name} onChange={(e) => setName(e.target.value)} />
        <TextInput label="Email" type="email" autoComplete="email" required value={email} onChange={(e) => setEmail(e.target.value)} />
        <TextInput
          label="Password"
          type="password"
          autoComplete="new-password"
          required
          minLength={8}
          hint="At least 8 characters."
          value={password}
          onChange={(e) => setPassword(e.target.value)}
        />
        <ErrorNotice error={error} />
        <Button type="submit" variant="primary" busy={busy}>
          Create account
        </Button>
      </form>
      <ProviderButtons providers={providers} callbackUrl={callbackUrl} />
      <p className="mt-5 text-sm text-slate-600">
        Already have an account?{" "}
        <Link className="text-indigo-700 underline" href={`/sign-in?callbackUrl=${encodeURIComponent(callbackUrl)}`}>
          Sign in
        </Link>
      </p>
    </AuthCard>
  );
}

/**
 * The middle of GET /v1/auth/link/{provider}: the person confirms, then the provider's sign-in starts
 * (next-auth wants a POST with its CSRF token), whose callback links the account to the signed-in
 * one; or it shows why the callback refused. Never started without the click: a link to this page
 * from another site must not add whatever account the browser is signed in to at the provider.
 */
export function LinkProviderCard({ provider, name, next, error }: { provider: string; name: string; next: string; error?: string }) {
  const { busy, error: failed, run } = useAction();
  if (error) {
    return (
      <AuthCard title="Account not linked">
        <ErrorNotice error={new Error(linkErrorMessage(error))} />
        <Link className="mt-4 inline-block text-indigo-700 underline" href="/hubs">
          Back to Engram
        </Link>
      </AuthCard>
    );
  }
  return (
    <AuthCard title={`Link ${name}`}>
      <p className="text-slate-600">Your {name} account will be added as a way to sign in to this Engram account. You will be asked to sign in to {name}.</p>
      {failed !== undefined && <ErrorNotice error={failed} />}
      <div className="mt-4 flex gap-2">
        <Button variant="primary" busy={busy} onClick={() => void run(() => signInWithProvider(provider, next), { navigates: true })}>
          Continue to {name}
        </Button>
        <Link className="inline-flex items-center px-3 text-sm text-slate-600 underline" href={next}>
          Cancel
        </Link>
      </div>
    </AuthCard>
  );
}
