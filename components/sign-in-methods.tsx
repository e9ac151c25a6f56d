"use client";

import { api } from "@/lib/web/api.ts";
import { formatDate } from "@/lib/web/format.ts";
import { useApi } from "@/lib/web/use-api.ts";
import { DisconnectList } from "./disconnect-list.tsx";

interface Identity {
  id: string;
  provider: string;
  provider_id: string;
  provider_email: string;
  provider_name: string;
  created_at: string;
}

/**
 * The GitHub / Google accounts that sign you in: unlink one (never the last way in; the server says
 * why), or link a provider this server offers through its sign-in (GET /v1/auth/link/{provider}).
 */
export function SignInMethods({ providers }: { providers: { id: string; name: string }[] }) {
  const identities = useApi<Identity[]>("/v1/auth/identities");
  const nameOf = (provider: string) => providers.find((p) => p.id === provider)?.name ?? provider;
  const linkable = identities.data ? providers.filter((p) => !identities.data!.some((i) => i.provider === p.id)) : [];
  return (
    <DisconnectList
      title="Sign-in methods"
      items={identities.data}
      error={identities.error}
      reload={identities.reload}
      loadingLabel="Loading sign-in methods…"
      empty={{ title: "No linked accounts", body: "You sign in with your email and password." }}
      testId="sign-in-methods"
      describe={(identity) => (
        <>
          <p className="font-medium">{nameOf(identity.provider)}</p>
          <p className="text-xs text-slate-500">
            {identity.provider_email || identity.provider_name || identity.provider_id} · linked {formatDate(identity.created_at)}
          </p>
        </>
      )}
      name={(identity) => nameOf(identity.provider)}
      actionLabel="Unlink"
      confirmTitle={(identity) => `Unlink ${nameOf(identity.provider)}?`}
      confirmLabel="Unlink"
      confirmBody="It stops signing you in. Your last way in cannot be unlinked: set a password or link another account first."
      disconnect={async (identity) => {
        await api(`/v1/auth/link/${identity.provider}`, { method: "DELETE" });
        identities.reload();
      }}
      footer={
        linkable.length > 0 && (
          <div className="mt-3 flex flex-wrap gap-2 border-t border-slate-100 pt-3">
            {linkable.map((provider) => (
              // A navigation, not a fetch: the flow goes through the provider's pages and comes back here.
              <a
                key={provider.id}
                className="rounded-md border border-slate-300 px-3 py-1.5 text-sm font-medium hover:bg-slate-50"
                href={`/v1/auth/link/${provider.id}?redirect_uri=${encodeURIComponent("/api-keys")}`}
              >
                Link {provider.name}
              </a>
            ))}
          </div>
        )
      }
    />
  );
}
