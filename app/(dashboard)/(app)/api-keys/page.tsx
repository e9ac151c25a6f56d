import type { Metadata } from "next";
import { ApiKeysPage } from "@/components/api-keys-page.tsx";
import { oauthProviders } from "@/lib/auth/session-options.ts";

export const metadata: Metadata = { title: "API keys" };
// The providers offered depend on the server's environment, read at request time.
export const dynamic = "force-dynamic";

export default function Page() {
  return <ApiKeysPage providers={oauthProviders()} />;
}
