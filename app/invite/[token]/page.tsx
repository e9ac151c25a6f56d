import type { Metadata } from "next";
import { InvitePage } from "@/components/invite-page.tsx";
import { sessionUser } from "@/lib/auth/session-user.ts";
import { signUpOpen } from "@/lib/auth/sign-up.ts";

export const metadata: Metadata = { title: "Join a hub", robots: { index: false } };
export const dynamic = "force-dynamic";

export default async function Page({ params }: { params: Promise<{ token: string }> }) {
  const { token } = await params;
  const user = await sessionUser();
  return <InvitePage token={token} user={user ? { name: user.name } : null} signUpOpen={signUpOpen()} />;
}
