"use client";

import { useRouter } from "next/navigation";
import { useState } from "react";
import { api, apiPath } from "@/lib/web/api.ts";
import { roleCan, type Hub, type HubDetail } from "@/lib/web/types.ts";
import { useHub } from "./hub-frame.tsx";
import { Button, Card, ConfirmDialog, ErrorNotice, LoadingRows, Notice, Select, TextInput } from "./ui.tsx";

export function HubSettings() {
  const hub = useHub();
  if (hub.error && !hub.data) return <ErrorNotice error={hub.error} onRetry={hub.reload} />;
  if (!hub.data) return <LoadingRows rows={2} height="h-40" label="Loading settings…" />;
  if (!roleCan(hub.data.role, "manage")) {
    return <ErrorNotice error={new Error(`Your role (${hub.data.role}) cannot change this hub's settings; ask an owner or admin.`)} />;
  }
  return <SettingsForm key={hub.data.hub.updated_at} detail={hub.data} onSaved={hub.reload} />;
}

function SettingsForm({ detail, onSaved }: { detail: HubDetail; onSaved: () => void }) {
  const router = useRouter();
  const { hub, role } = detail;
  const [name, setName] = useState(hub.name);
  const [slug, setSlug] = useState(hub.slug);
  const [slugStatus, setSlugStatus] = useState<string>();
  const [topics, setTopics] = useState(hub.allow_contributor_topics);
  const [dreams, setDreams] = useState(hub.allow_contributor_dreams);
  const [deletePolicy, setDeletePolicy] = useState(hub.contributor_delete_policy);
  const [busy, setBusy] = useState<string>();
  const [error, setError] = useState<unknown>();
  const [saved, setSaved] = useState(false);
  const [deleting, setDeleting] = useState(false);
  const personal = hub.hub_type === "personal";

  const changes: Partial<Hub> = {
    ...(name.trim() !== hub.name && { name: name.trim() }),
    ...(!personal && slug !== hub.slug && { slug }),
    ...(topics !== hub.allow_contributor_topics && { allow_contributor_topics: topics }),
    ...(dreams !== hub.allow_contributor_dreams && { allow_contributor_dreams: dreams }),
    ...(deletePolicy !== hub.contributor_delete_policy && { contributor_delete_policy: deletePolicy }),
  };

  return (
    <div className="flex flex-col gap-5">
      <Card title="Hub settings">
        <form
          className="flex flex-col gap-4"
          onSubmit={async (event) => {
            event.preventDefault();
            setBusy("save");
            setError(undefined);
            setSaved(false);
            try {
              await api<Hub>(apiPath`/v1/hubs/${hub.id}`, { method: "PATCH", body: changes });
              setSaved(true);
              onSaved();
            } catch (caught) {
              setError(caught);
            } finally {
              setBusy(undefined);
            }
          }}
        >
          <TextInput label="Name" required maxLength={100} value={name} onChange={(e) => setName(e.target.value)} />
          {!personal && (
            <TextInput
              label="Slug"
              required
              pattern="[a-z0-9][a-z0-9\-]{1,46}[a-z0-9]"
              value={slug}
              onChange={(e) => {
                setSlug(e.target.value.toLowerCase());
                setSlugStatus(undefined);
              }}
              onBlur={async () => {
                if (slug === hub.slug) return;
                try {
                  const check = await api<{ available: boolean; reason?: string }>(`/v1/hubs/check-slug?slug=${encodeURIComponent(slug)}`);
                  setSlugStatus(check.available ? "Available" : check.reason === "taken" ? "Already taken" : "Not a valid slug");
                } catch (caught) {
                  setSlugStatus((caught as Error).message);
                }
              }}
              hint={slugStatus ?? "3–48 lowercase letters, digits or dashes."}
            />
          )}
          {!personal && (
            <fieldset className="flex flex-col gap-3 rounded-md border border-slate-200 p-3">
              <legend className="px-1 text-sm font-medium text-slate-700">Contributor permissions</legend>
              <label className="flex items-center gap-2 text-sm">
                <input type="checkbox" checked={topics} onChange={(e) => setTopics(e.target.checked)} className="h-4 w-4" />
                Contributors may create, rename and delete topics
              </label>
              <label className="flex items-center gap-2 text-sm">
                <input type="checkbox" checked={dreams} onChange={(e) => setDreams(e.target.checked)} className="h-4 w-4" />
                Contributors may trigger dreams
              </label>
              <Select label="Contributors may delete" value={deletePolicy} onChange={(e) => setDeletePolicy(e.target.value as Hub["contributor_delete_policy"])}>
                <option value="none">no memories</option>
                <option value="own">their own memories</option>
                <option value="any">any memory</option>
              </Select>
            </fieldset>
          )}
          <ErrorNotice error={error} />
          {saved && <Notice>Settings saved.</Notice>}
          <div>
            <Button type="submit" variant="primary" busy={busy === "save"} disabled={Object.keys(changes).length === 0}>
              Save changes
            </Button>
          </div>
        </form>
      </Card>
      {role === "owner" && !personal && (
        <Card title="Danger zone" className="border-red-200">
          <p className="mb-3 text-sm text-slate-600">Deleting the hub removes all its memories, topics and invites for every member. This cannot be undone.</p>
          <Button variant="danger" onClick={() => setDeleting(true)}>
            Delete hub…
          </Button>
        </Card>
      )}
      <ConfirmDialog
        open={deleting}
        title={`Delete “${hub.name}”?`}
        confirmLabel="Delete hub forever"
        typeToConfirm={hub.slug}
        busy={busy === "delete"}
        error={error}
        onClose={() => setDeleting(false)}
        onConfirm={async () => {
          setBusy("delete");
          setError(undefined);
          try {
            await api(apiPath`/v1/hubs/${hub.id}`, { method: "DELETE" });
            router.push("/hubs");
          } catch (caught) {
            setError(caught);
            setBusy(undefined);
          }
        }}
      >
        All {detail.counts.memories.toLocaleString()} memories in this hub will be deleted.
      </ConfirmDialog>
    </div>
  );
}
