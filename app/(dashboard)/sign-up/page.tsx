import type { Metadata } from "next";
import { redirect } from "next/navigation";
import { SignUpForm } from "@/components/auth-forms.tsx";
import { oauthProviders } from "@/lib/auth/session-options.ts";
import { sessionUser } from "@/lib/auth/session-user.ts";
import { signUpOpen } from "@/lib/auth/sign-up.ts";
import { safeCallback } from "@/lib/web/safe-callback.ts";

export const metadata: Metadata = { title: "Sign up" };
export const dynamic = "force-dynamic";

export default async function SignUpPage({ searchParams }: { searchParams: Promise<Record<string, string | string[] | undefined>> }) {
  const callbackUrl = safeCallback((await searchParams).callbackUrl);
  if (await sessionUser()) redirect(callbackUrl);
  return <SignUpForm callbackUrl={callbackUrl} providers={signUpOpen() ? oauthProviders() : []} open={signUpOpen()} />;
}
