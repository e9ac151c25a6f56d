import { AppShell, RedirectToSignIn } from "@/components/app-shell.tsx";
import { sessionUser } from "@/lib/auth/session-user.ts";

export const dynamic = "force-dynamic";

export default async function SignedInLayout({ children }: { children: React.ReactNode }) {
  const user = await sessionUser();
  if (!user) return <RedirectToSignIn />;
  return <AppShell user={user}>{children}</AppShell>;
}
