/**
 * The config sync decision table (docs/configs.md). A pure function of three
 * facts about one file — what the device has now, what the cloud has, and what
 * this device last synced — and never of clocks: `updated_at` in the manifest
 * is informational only, because two devices' clocks cannot be compared.
 */

export type SyncAction = "unchanged" | "push" | "pull" | "conflict" | "delete_local";

export type SyncReason =
  | "in_sync" // local and cloud hold the same content
  | "local_only" // nothing in the cloud yet
  | "cloud_only" // nothing on this device
  | "local_newer" // changed here since the last sync; cloud unchanged
  | "cloud_newer" // changed in the cloud since the last sync; unchanged here
  | "both_changed" // changed on both sides since the last sync
  | "no_sync_base" // both sides have it, they differ, and this device never synced it
  | "removed_on_device" // removed from this device only; sync leaves it away
  | "deleted_in_cloud" // deleted elsewhere; the copy here is the one that was synced (or identical)
  | "modified_locally_deleted_in_cloud" // deleted elsewhere, but the copy here differs from what was deleted
  | "recreated_after_delete"; // deleted in the cloud and on this device, then created here again

/** The device's manifest entry: present when the file exists on the device. */
export interface LocalState {
  hash: string;
}

/** The cloud row: a live config or a deletion record. */
export type CloudState =
  | { kind: "live"; version: number; hash: string }
  | { kind: "deleted"; version: number; deletedHash: string | null };

/** What this device last synced (acknowledged or pushed) of this file. */
export interface DeviceState {
  version: number;
  hash: string | null;
  /** The device acknowledged the cloud deletion at `version`. */
  deleted: boolean;
  /** The owner removed the file from this device only. */
  removed: boolean;
}

export interface SyncDecision {
  action: SyncAction;
  reason: SyncReason;
}

/** Decides one file; `null` when there is nothing to say (no file anywhere, or deleted everywhere). */
export function decideSyncAction(local: LocalState | undefined, cloud: CloudState | undefined, device: DeviceState | undefined): SyncDecision | null {
  if (!cloud) return local ? { action: "push", reason: "local_only" } : null;

  if (cloud.kind === "deleted") {
    if (!local) return null;
    // The device already removed its copy after this deletion: a file here now is a new one.
    if (device?.deleted && device.version >= cloud.version) return { action: "push", reason: "recreated_after_delete" };
    const base = device && !device.deleted && !device.removed ? device.hash : null;
    if (base !== null && local.hash === base) return { action: "delete_local", reason: "deleted_in_cloud" };
    if (cloud.deletedHash !== null && local.hash === cloud.deletedHash) return { action: "delete_local", reason: "deleted_in_cloud" };
    return { action: "conflict", reason: "modified_locally_deleted_in_cloud" };
  }

  if (!local) {
    if (device?.removed) return { action: "unchanged", reason: "removed_on_device" };
    return { action: "pull", reason: "cloud_only" };
  }

  if (local.hash === cloud.hash) return { action: "unchanged", reason: "in_sync" };

  // Without a base from this device (never synced, removed here, or synced before a deletion) there is no telling who is newer.
  if (!device || device.removed || device.deleted || device.hash === null) return { action: "conflict", reason: "no_sync_base" };

  const localChanged = local.hash !== device.hash;
  const cloudChanged = cloud.version !== device.version || cloud.hash !== device.hash;
  if (localChanged && !cloudChanged) return { action: "push", reason: "local_newer" };
  if (!localChanged && cloudChanged) return { action: "pull", reason: "cloud_newer" };
  return { action: "conflict", reason: "both_changed" };
}
