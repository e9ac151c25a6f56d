import type { Metadata } from "next";
import { redirect } from "next/navigation";
import { SignInForm } from "@/components/auth-forms.tsx";
import { emailSignInOn } from "@/lib/auth/request-email-code.ts";
import { oauthProviders } from "@/lib/auth/session-options.ts";
import { sessionUser } from "@/lib/auth/session-user.ts";
import { signUpOpen } from "@/lib/auth/sign-up.ts";
import { safeCallback } from "@/lib/web/safe-callback.ts";

export const metadata: Metadata = { title: "Sign in" };
export const dynamic = "force-dynamic";

export default async function SignInPage({ searchParams }: { searchParams: Promise<Record<string, string | string[] | undefined>> }) {
  const params = await searchParams;
  const callbackUrl = safeCallback(params.callbackUrl);
  const error = typeof params.error === "string" ? params.error : undefined;
  if (!error && (await sessionUser())) redirect(callbackUrl);
  const provider = typeof params.provider === "string" ? params.provider : undefined;
  return (
    <SignInForm
      callbackUrl={callbackUrl}
      initialError={error}
      providers={oauthProviders()}
      signUpOpen={signUpOpen()}
      emailCode={emailSignInOn()}
      initialProvider={provider}
    />
  );
}
