import { describe, expect, it } from "vitest";
import { decideSyncAction, type CloudState, type DeviceState, type LocalState, type SyncDecision } from "@/lib/configs/decide-sync-action.ts";

// The decision table of docs/configs.md, one row per case.
const A = "a".repeat(64);
const B = "b".repeat(64);
const C = "c".repeat(64);
const local = (hash: string): LocalState => ({ hash });
const live = (version: number, hash: string): CloudState => ({ kind: "live", version, hash });
const gone = (version: number, deletedHash: string | null): CloudState => ({ kind: "deleted", version, deletedHash });
const synced = (version: number, hash: string | null, extra: Partial<DeviceState> = {}): DeviceState => ({ version, hash, deleted: false, removed: false, ...extra });

const rows: [string, LocalState | undefined, CloudState | undefined, DeviceState | undefined, SyncDecision | null][] = [
  ["nothing anywhere", undefined, undefined, undefined, null],
  ["only on the device", local(A), undefined, undefined, { action: "push", reason: "local_only" }],
  ["only on the device, stale device state ignored", local(A), undefined, synced(3, B), { action: "push", reason: "local_only" }],
  ["only in the cloud, device never synced it", undefined, live(1, A), undefined, { action: "pull", reason: "cloud_only" }],
  ["only in the cloud, device synced it before", undefined, live(2, A), synced(2, A), { action: "pull", reason: "cloud_only" }],
  ["only in the cloud, removed from this device", undefined, live(2, A), synced(2, A, { removed: true }), { action: "unchanged", reason: "removed_on_device" }],
  ["same content, never synced", local(A), live(1, A), undefined, { action: "unchanged", reason: "in_sync" }],
  ["same content, synced", local(A), live(4, A), synced(4, A), { action: "unchanged", reason: "in_sync" }],
  ["same content, device base outdated", local(A), live(5, A), synced(2, B), { action: "unchanged", reason: "in_sync" }],
  ["differs, never synced from this device", local(A), live(1, B), undefined, { action: "conflict", reason: "no_sync_base" }],
  ["differs, removed from this device then recreated", local(A), live(1, B), synced(1, B, { removed: true }), { action: "conflict", reason: "no_sync_base" }],
  ["differs, device only knew a deletion", local(A), live(3, B), synced(2, null, { deleted: true }), { action: "conflict", reason: "no_sync_base" }],
  ["changed here, cloud still at the base", local(B), live(1, A), synced(1, A), { action: "push", reason: "local_newer" }],
  ["unchanged here, cloud moved on", local(A), live(2, B), synced(1, A), { action: "pull", reason: "cloud_newer" }],
  ["changed on both sides", local(B), live(2, C), synced(1, A), { action: "conflict", reason: "both_changed" }],
  ["changed here; cloud version moved though its hash returned to the base", local(B), live(3, A), synced(1, A), { action: "conflict", reason: "both_changed" }],
  ["deleted in the cloud, nothing here", undefined, gone(2, A), synced(1, A), null],
  ["deleted in the cloud, copy here is the synced one", local(A), gone(2, A), synced(1, A), { action: "delete_local", reason: "deleted_in_cloud" }],
  ["deleted in the cloud, never synced here but identical to what was deleted", local(A), gone(2, A), undefined, { action: "delete_local", reason: "deleted_in_cloud" }],
  ["deleted in the cloud, changed here since the sync", local(B), gone(2, A), synced(1, A), { action: "conflict", reason: "modified_locally_deleted_in_cloud" }],
  ["deleted in the cloud, never synced here and different", local(B), gone(2, A), undefined, { action: "conflict", reason: "modified_locally_deleted_in_cloud" }],
  ["deleted in the cloud and acknowledged here, then created again", local(B), gone(2, A), synced(2, null, { deleted: true }), { action: "push", reason: "recreated_after_delete" }],
  ["deleted again after an older acknowledged deletion, copy identical", local(A), gone(4, A), synced(2, null, { deleted: true }), { action: "delete_local", reason: "deleted_in_cloud" }],
  ["deleted in the cloud, removed here, a different file reappeared", local(B), gone(3, A), synced(2, A, { removed: true }), { action: "conflict", reason: "modified_locally_deleted_in_cloud" }],
];

describe("config sync decision table", () => {
  it.each(rows)("%s", (_name, l, c, d, expected) => {
    expect(decideSyncAction(l, c, d)).toEqual(expected);
  });

  it("covers every action and every reason", () => {
    const decisions = rows.map((row) => row[4]).filter((d): d is SyncDecision => d !== null);
    expect(new Set(decisions.map((d) => d.action))).toEqual(new Set(["unchanged", "push", "pull", "conflict", "delete_local"]));
    expect(new Set(decisions.map((d) => d.reason)).size).toBe(11);
  });
});
