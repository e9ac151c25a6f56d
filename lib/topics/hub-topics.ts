import { ApiError } from "@/lib/api/errors.ts";
import { lockForTransaction } from "@/lib/db/advisory-lock.ts";
import type { DbClient } from "@/lib/db/database.ts";
import type { AuthContext } from "@/lib/api/context.ts";
import { hubMembersLockKey, lockMembershipOrThrow } from "@/lib/hubs/hub-access.ts";
import type { TopicRow } from "./serialize-topic.ts";
import { MAX_POSITION, MAX_TOPIC_DEPTH } from "./topic-fields.ts";

/** The lock on a hub's topic tree: exclusive for changes to it, shared for filing memories under a topic. */
export function topicsLockKey(hubId: string): string {
  return `topics:${hubId}`;
}

/**
 * Under the hub's membership lock (held shared) and its topic lock: the caller's role and the hub's
 * contributor policy read again. Checked only before the transaction, a demotion committed in between
 * let a member who may no longer manage topics change them anyway. A demotion takes the membership
 * lock exclusively, and a change of allow_contributor_topics the topic lock (updateHub), so each
 * excludes this check and the write after it.
 */
export async function assertManagesTopics(tx: DbClient, hubId: string, ctx: Pick<AuthContext, "user" | "credential">, action: string): Promise<void> {
  const hub = await tx.hub.findUnique({ where: { id: hubId } });
  if (!hub) throw new ApiError("not_found", "Hub not found");
  await lockMembershipOrThrow(tx, { ...ctx, db: tx }, hub, "topics.manage", action, { locked: true });
}

/**
 * A hub's whole topic set (≤ 500 rows), for checks that need the tree: depth,
 * cycles, sibling names, subtrees. Loaded under the hub's topic lock inside
 * the writing transaction, so concurrent edits see each other.
 */
export class HubTopics {
  readonly rows: TopicRow[];
  readonly byId: Map<string, TopicRow>;
  /** Every topic of the hub, those being deleted too: they count towards the 500 until they are gone. */
  readonly size: number;

  /**
   * Topics being deleted (deletingAt) are left out unless `withDeleting`: to every change but the
   * delete itself they are gone already, so none is moved, changed, archived or taken as a parent
   * while its delete unfiles its memories a batch at a time.
   */
  constructor(rows: TopicRow[], options: { withDeleting?: boolean } = {}) {
    this.size = rows.length;
    this.rows = options.withDeleting ? rows : rows.filter((row) => !row.deletingAt);
    this.byId = new Map(this.rows.map((row) => [row.id, row]));
  }

  /**
   * `manager`: the caller changing the tree, who must still be allowed to manage the hub's topics; null
   * only for the sweep finishing a delete a manager began (lib/topics/delete-topic.ts).
   */
  static async lockAndLoad(
    tx: DbClient,
    hubId: string,
    manager: { ctx: Pick<AuthContext, "user" | "credential">; action: string } | null,
    options: { withDeleting?: boolean } = {},
  ): Promise<HubTopics> {
    // The hub's membership lock (shared) first, as every write into a hub takes it: a hub delete holds
    // it exclusively, so a topic change waits for it rather than deadlocking with its cascade.
    await lockForTransaction(tx, [{ shared: hubMembersLockKey(hubId) }, topicsLockKey(hubId)]);
    if (manager) await assertManagesTopics(tx, hubId, manager.ctx, manager.action);
    return new HubTopics(await tx.topic.findMany({ where: { hubId } }), options);
  }

  /** 0 for a root. */
  depth(id: string): number {
    let depth = 0;
    for (let node = this.byId.get(id); node?.parentId; node = this.byId.get(node.parentId)) depth += 1;
    return depth;
  }

  children(id: string | null): TopicRow[] {
    return this.rows.filter((row) => row.parentId === id);
  }

  /** The topic and every descendant. */
  subtree(id: string): TopicRow[] {
    const out: TopicRow[] = [];
    const stack = [id];
    while (stack.length) {
      const current = this.byId.get(stack.pop()!);
      if (!current) continue;
      out.push(current);
      for (const child of this.children(current.id)) stack.push(child.id);
    }
    return out;
  }

  /** Levels below the topic, counting itself as 1. */
  height(id: string): number {
    const kids = this.children(id);
    return 1 + (kids.length ? Math.max(...kids.map((kid) => this.height(kid.id))) : 0);
  }

  /** duplicate_name when a sibling under `parentId` already has this name (ignoring case). */
  assertNameFree(parentId: string | null, name: string, exceptId?: string): void {
    const lower = name.toLowerCase();
    const taken = this.children(parentId).find((row) => row.id !== exceptId && row.name.toLowerCase() === lower);
    if (taken) {
      throw new ApiError("duplicate_name", `A topic named "${taken.name}" already exists here`, { topic_id: taken.id, parent_id: parentId });
    }
  }

  /** The parent of a new or moved topic: in this hub, and active. */
  parentOrThrow(parentId: string): TopicRow {
    const parent = this.byId.get(parentId);
    if (!parent) throw new ApiError("invalid_parent", "The parent topic does not exist in this hub", { parent_id: parentId });
    if (parent.archivedAt) throw new ApiError("parent_archived", "The parent topic is archived; restore it first", { parent_id: parentId });
    return parent;
  }

  /**
   * Last among the siblings, within the positions a client may send: past MAX_POSITION the topic ties
   * with the last (then name orders them), as a position beyond it could not be sent back.
   */
  nextPosition(parentId: string | null): number {
    const siblings = this.children(parentId);
    return siblings.length ? Math.min(MAX_POSITION, Math.max(...siblings.map((row) => row.position)) + 1) : 0;
  }

  /** Validates moving `id` (with its subtree) under `parentId`. */
  assertMove(id: string, parentId: string | null): void {
    if (parentId === null) return;
    if (parentId === id || this.subtree(id).some((row) => row.id === parentId)) {
      throw new ApiError("cycle_detected", "A topic cannot move under itself or one of its descendants", { parent_id: parentId });
    }
    this.parentOrThrow(parentId);
    if (this.depth(parentId) + this.height(id) >= MAX_TOPIC_DEPTH) {
      throw new ApiError("max_depth_subtree", `Topics nest at most ${MAX_TOPIC_DEPTH} levels deep; this branch would go deeper`, {
        max_depth: MAX_TOPIC_DEPTH,
      });
    }
  }
}
