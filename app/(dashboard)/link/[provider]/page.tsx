import type { Metadata } from "next";
import { notFound } from "next/navigation";
import { LinkProviderCard } from "@/components/auth-forms.tsx";
import { oauthProviders } from "@/lib/auth/session-options.ts";
import { safeCallback } from "@/lib/web/safe-callback.ts";

export const metadata: Metadata = { title: "Link an account" };
export const dynamic = "force-dynamic";

// /link/{provider} — the browser step of GET /v1/auth/link/{provider}: off to the provider, or why linking failed
export default async function LinkProviderPage({
  params,
  searchParams,
}: {
  params: Promise<{ provider: string }>;
  searchParams: Promise<Record<string, string | string[] | undefined>>;
}) {
  const { provider } = await params;
  const query = await searchParams;
  const error = typeof query.error === "string" ? query.error : undefined;
  const configured = oauthProviders().find((p) => p.id === provider);
  if (!configured && !error) notFound();
  return <LinkProviderCard provider={provider} name={configured?.name ?? provider} next={safeCallback(query.next)} error={error} />;
}
