/** How long one person's open of a memory counts as the same open (a page load fetches, then signals). */
const OPEN_WINDOW_MS = 60_000;
/** Opens remembered per process; the oldest are forgotten first. */
const MAX_OPENS = 10_000;

/**
 * Which memories each user opened in the last minute, so a deliberate open counts one access even
 * when a client both reads the memory and signals the view: Memax's `memax show` and its MCP `get`
 * call GET /v1/memories/{id}, which counts (the contract), and then POST …/access. Kept in the
 * process: with several processes an open whose two requests land on two of them counts twice, which
 * an advisory signal tolerates.
 */
class RecentOpens {
  private readonly opened = new Map<string, number>();

  /** Whether this user's open of this memory was counted less than OPEN_WINDOW_MS before `now`. */
  has(userId: string, memoryId: string, now: Date): boolean {
    const at = this.opened.get(`${userId}:${memoryId}`);
    return at !== undefined && now.getTime() - at < OPEN_WINDOW_MS;
  }

  remember(userId: string, memoryId: string, now: Date): void {
    const key = `${userId}:${memoryId}`;
    // Re-inserted, so the map's order stays oldest first.
    this.opened.delete(key);
    this.opened.set(key, now.getTime());
    if (this.opened.size > MAX_OPENS) this.opened.delete(this.opened.keys().next().value!);
  }
}

const globalForOpens = globalThis as unknown as { __engramRecentOpens?: RecentOpens };
export const recentOpens = (globalForOpens.__engramRecentOpens ??= new RecentOpens());
